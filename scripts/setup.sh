#!/usr/bin/env bash
# Installs what fedagg needs to build and test on Debian 12: Debian's packages, then
# (scripts/setup_frameworks.sh) Flower and NVIDIA FLARE from the package index into
# .venv-frameworks for the framework adapters' tests, kubernetes-validate into
# .venv-tools for the Kubernetes manifests' test (tests/deploy), and dp-accounting into
# .venv-privacy for fedagg.privacy_accounting's test (tests/python).
# Idempotent: installs nothing when everything is present. Needs root (or sudo).
# The CUDA toolkit is optional and not installed here: with nvcc on PATH the CUDA backend
# is built as well (see docs/DEPENDENCIES.md).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  python3 openssl libssl-dev
  python3-venv python3-pip python3-setuptools python3-wheel
  python3-grpcio python3-protobuf python3-numpy python3-scipy python3-crc32c python3-pytest
  prometheus nginx curl google-perftools
  clang libclang-rt-14-dev
)

"$(dirname "$0")/install_packages.sh" setup "${PACKAGES[@]}"

# Flower and NVIDIA FLARE for the framework adapters' tests (pinned, from the package index).
"$(dirname "$0")/setup_frameworks.sh"

# kubernetes-validate (pinned, from the package index; it carries the Kubernetes JSON schemas
# and downloads nothing when it runs) for tests/deploy/kubernetes_manifests_test.sh, in its
# own small environment. Idempotent: a stamp holds the pinned requirement. Without the
# package index it says so and goes on: that test then skips, saying why.
KUBERNETES_VALIDATE=kubernetes-validate==1.37.0
TOOLS=$(cd "$(dirname "$0")/.." && pwd)/.venv-tools
if [ "$(cat "$TOOLS/.fedagg-requirement" 2>/dev/null)" != "$KUBERNETES_VALIDATE" ] ||
   [ ! -x "$TOOLS/bin/kubernetes-validate" ]; then
  echo "setup: installing $KUBERNETES_VALIDATE (from the package index) into .venv-tools"
  rm -rf "$TOOLS"
  /usr/bin/python3 -m venv "$TOOLS"
  log=$(mktemp)
  if "$TOOLS/bin/pip" install --quiet --disable-pip-version-check --no-input "$KUBERNETES_VALIDATE" >"$log" 2>&1; then
    echo "$KUBERNETES_VALIDATE" >"$TOOLS/.fedagg-requirement"
  else
    echo "setup: could not install it (no package index?); the Kubernetes manifests' test will skip:" >&2
    tail -n 5 "$log" >&2
  fi
  rm -f "$log"
fi

# dp-accounting (Google's privacy accountants, pinned, from the package index) for
# fedagg.privacy_accounting and tests/python/privacy_accounting_test.sh, in its own small
# environment: no release fits .venv-frameworks (0.5.0-0.6.0 want attrs<24, 0.4.3-0.4.4
# NumPy<2, older ones attrs 21.4; the frameworks pin attrs 26.1.0 and NumPy 2.4.6). It sees
# Debian's packages (--system-site-packages): NumPy and SciPy for dp-accounting, and
# grpcio, protobuf, crc32c and pytest for the fedagg package and its test. Idempotent: a
# stamp holds the pinned requirement. Without the package index it says so and goes on:
# that test then skips, saying why.
DP_ACCOUNTING=dp-accounting==0.6.0
PRIVACY=$(cd "$(dirname "$0")/.." && pwd)/.venv-privacy
if [ "$(cat "$PRIVACY/.fedagg-requirement" 2>/dev/null)" != "$DP_ACCOUNTING" ] ||
   [ ! -x "$PRIVACY/bin/python" ]; then
  echo "setup: installing $DP_ACCOUNTING (from the package index) into .venv-privacy"
  rm -rf "$PRIVACY"
  /usr/bin/python3 -m venv --system-site-packages "$PRIVACY"
  log=$(mktemp)
  if "$PRIVACY/bin/pip" install --quiet --disable-pip-version-check --no-input "$DP_ACCOUNTING" >"$log" 2>&1; then
    echo "$DP_ACCOUNTING" >"$PRIVACY/.fedagg-requirement"
  else
    echo "setup: could not install it (no package index?); the privacy accounting test will skip:" >&2
    tail -n 5 "$log" >&2
  fi
  rm -f "$log"
fi
