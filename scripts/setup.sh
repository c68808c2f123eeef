#!/usr/bin/env bash
# Installs what fedagg needs to build and test on Debian 12: Debian's packages, then
# (scripts/setup_frameworks.sh) Flower and NVIDIA FLARE from the package index into
# .venv-frameworks for the framework adapters' tests.
# Idempotent: installs nothing when everything is present. Needs root (or sudo).
# The CUDA toolkit is optional and not installed here: with nvcc on PATH the CUDA backend
# is built as well (see docs/DEPENDENCIES.md).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  python3 openssl
  python3-venv python3-pip python3-setuptools python3-wheel
  python3-grpcio python3-protobuf python3-numpy python3-scipy python3-crc32c python3-pytest
  prometheus nginx curl
  clang libclang-rt-14-dev
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: run as root or install sudo" >&2; exit 1; }
    SUDO=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Flower and NVIDIA FLARE for the framework adapters' tests (pinned, from the package index).
"$(dirname "$0")/setup_frameworks.sh"
