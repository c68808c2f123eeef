#!/usr/bin/env bash
# Installs the Debian packages named that are not installed yet (apt-get, as root or with
# sudo); nothing when they all are. scripts/setup.sh installs what fedagg needs with it,
# scripts/bench.sh what only the benchmarks need.
#   scripts/install_packages.sh WHO PACKAGE...   (WHO prefixes its messages: setup, bench)
set -euo pipefail
who=$1; shift
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -gt 0 ] || exit 0
echo "$who: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "$who: run as root or install sudo" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
