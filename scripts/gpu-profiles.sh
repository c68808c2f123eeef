#!/usr/bin/env bash
# Reads the CPU profiles of the GPU bundle's run (run.sh step 8: logs/profiles, one per
# fedagg-server run of the sparse rows on the cuda backend) on the machine that made the
# bundle: the bundle's own programs and libraries (fedagg-server and the cuda plugin keep
# their symbols there), and the lent machine's C library that the run copied beside the
# profiles, stand in for the paths the profiles name. Prints google-pprof's top functions
# of each profile.
#   scripts/gpu-profiles.sh PROFILES_DIR [--bundle=build/gpu-bundle] [--top=30]
set -euo pipefail
PROFILES=${1:?usage: gpu-profiles.sh PROFILES_DIR [--bundle=build/gpu-bundle] [--top=30]}; shift
BUNDLE=build/gpu-bundle TOP=30
for arg in "$@"; do
  case $arg in
    --bundle=*) BUNDLE=${arg#*=} ;;
    --top=*) TOP=${arg#*=} ;;
    *) echo "gpu-profiles: unknown argument $arg" >&2; exit 2 ;;
  esac
done
command -v google-pprof >/dev/null || { echo "gpu-profiles: needs google-pprof (Debian: google-perftools)" >&2; exit 2; }
if [ "$(cat "$PROFILES/COMMIT")" != "$(cat "$BUNDLE/COMMIT")" ]; then
  echo "gpu-profiles: the profiles are of the bundle of $(cat "$PROFILES/COMMIT"), $BUNDLE is of $(cat "$BUNDLE/COMMIT")" >&2
  exit 2
fi
ROOT=$(mktemp -d /tmp/fedagg-gpu-profiles.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
tar -xzf "$BUNDLE/payload.tar.gz" -C "$ROOT"
cp "$PROFILES/libc.so.6" "$ROOT/"
# google-pprof takes the program from the mapping whose path is the one it is given (so
# the profile's copy names the local one), and looks for every other mapped file under
# the prefix, dropping its leading directories one at a time: the plugin and libraries
# as $ROOT/bin/... and $ROOT/lib/..., the lent machine's /lib/.../libc.so.6 as
# $ROOT/libc.so.6.
for profile in "$PROFILES"/*.prof; do
  echo "== $(basename "$profile" .prof)"
  python3 - "$profile" "$ROOT/profile" "$(cat "$PROFILES/bundle-dir")/bin/fedagg-server" "$ROOT/bin/fedagg-server" <<'PY'
import sys
source, target, remote, local = sys.argv[1:]
with open(source, "rb") as f:
    data = f.read()
with open(target, "wb") as f:
    f.write(data.replace(remote.encode(), local.encode()))
PY
  # awk reads to the end: a reader that stops early (head) ends the script with SIGPIPE.
  google-pprof --text --lib_prefix="$ROOT" "$ROOT/bin/fedagg-server" "$ROOT/profile" 2>/dev/null |
    awk -v lines="$((TOP + 1))" 'NR <= lines'
done
