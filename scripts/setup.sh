#!/usr/bin/env bash
# Installs what fedagg needs to build and test on Debian 12: Debian's packages, then
# (scripts/setup_frameworks.sh) Flower and NVIDIA FLARE from the package index into
# .venv-frameworks for the framework adapters' tests, kubernetes-validate into
# .venv-tools for the Kubernetes manifests' test (tests/deploy), and dp-accounting into
# .venv-privacy for fedagg.privacy_accounting's test (tests/python).
# With --demo (scripts/demo.sh) only what building and running the demo needs: the
# build's packages, none of the test tools, browsers or framework environments.
# Idempotent: installs nothing when everything is present. Needs root (or sudo).
# The CUDA toolkit is optional and not installed here: with nvcc on PATH the CUDA backend
# is built as well (see docs/DEPENDENCIES.md).
set -euo pipefail

# What the build (the default preset: programs, tests and benchmarks) needs.
BUILD_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  openssl libssl-dev libcpp-httplib-dev curl
)
# What the tests run: Python and its packages, Prometheus's promtool, nginx, the
# sanitizer and fuzzing toolchain, and a browser with its WebDriver (tests/browser).
TEST_PACKAGES=(
  python3 python3-venv python3-pip python3-setuptools python3-wheel
  python3-grpcio python3-protobuf python3-numpy python3-scipy python3-crc32c python3-cryptography python3-pytest
  prometheus nginx google-perftools
  clang libclang-rt-14-dev
  chromium chromium-driver python3-selenium
)

if [ "${1:-}" = "--demo" ]; then
  "$(dirname "$0")/install_packages.sh" setup "${BUILD_PACKAGES[@]}"
  exit 0
fi
"$(dirname "$0")/install_packages.sh" setup "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}"

# Flower and NVIDIA FLARE for the framework adapters' tests (pinned, from the package index).
"$(dirname "$0")/setup_frameworks.sh"

# A small environment of its own for one pinned package from the package index, made once:
# idempotent (a stamp holds the pinned requirement; a venv whose CHECK program is missing is
# made again). Without the package index it says so and goes on: the tests that need it then
# skip, saying why.
#   pinned_venv DIR REQUIREMENT CHECK WHO [venv options...]
pinned_venv() {
  local dir=$1 requirement=$2 check=$3 who=$4; shift 4
  if [ "$(cat "$dir/.fedagg-requirement" 2>/dev/null)" = "$requirement" ] && [ -x "$dir/bin/$check" ]; then
    return 0
  fi
  echo "setup: installing $requirement (from the package index) into $(basename "$dir")"
  rm -rf "$dir"
  /usr/bin/python3 -m venv "$@" "$dir"
  local log
  log=$(mktemp)
  if "$dir/bin/pip" install --quiet --disable-pip-version-check --no-input "$requirement" >"$log" 2>&1; then
    echo "$requirement" >"$dir/.fedagg-requirement"
  else
    echo "setup: could not install it (no package index?); $who will skip:" >&2
    tail -n 5 "$log" >&2
  fi
  rm -f "$log"
}
REPO=$(cd "$(dirname "$0")/.." && pwd)

# kubernetes-validate (it carries the Kubernetes JSON schemas and downloads nothing when it
# runs) for tests/deploy/kubernetes_manifests_test.sh.
pinned_venv "$REPO/.venv-tools" kubernetes-validate==1.37.0 kubernetes-validate "the Kubernetes manifests' test"

# dp-accounting (Google's privacy accountants) for fedagg.privacy_accounting and
# tests/python/privacy_accounting_test.sh: no release fits .venv-frameworks (0.5.0-0.6.0 want
# attrs<24, 0.4.3-0.4.4 NumPy<2, older ones attrs 21.4; the frameworks pin attrs 26.1.0 and
# NumPy 2.4.6). It sees Debian's packages (--system-site-packages): NumPy and SciPy for
# dp-accounting, and grpcio, protobuf, crc32c and pytest for the fedagg package and its test.
pinned_venv "$REPO/.venv-privacy" dp-accounting==0.6.0 python "the privacy accounting test" --system-site-packages
