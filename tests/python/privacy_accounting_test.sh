#!/usr/bin/env bash
# fedagg.privacy_accounting against dp-accounting itself, no server: the pytest file
# test_privacy_accounting.py beside this script, run with the python of .venv-privacy
# (dp-accounting pinned in scripts/setup.sh; Debian's NumPy, SciPy, grpcio, protobuf,
# crc32c and pytest through its system site packages) and the fedagg package of this tree,
# built into a scratch directory (its gRPC stubs are generated at build time, so
# client_stub/python/src alone does not import). Exits 77 (ctest: skipped) saying why when
# dp-accounting is missing; with it, a test that cannot import it fails instead of skipping.
# A fedagg root (FEDAGG_SERVER) serves the control API's privacy_spent test.
# Usage: privacy_accounting_test.sh FEDAGG_SERVER
set -euo pipefail
SERVER=$1
REPO=$(cd "$(dirname "$0")/../.." && pwd)
VENV=$REPO/.venv-privacy
if ! "$VENV/bin/python" -c "import dp_accounting" 2>/dev/null; then
  echo "SKIPPED: dp-accounting is not installed in $VENV (scripts/setup.sh installs it from the package index)"
  exit 77
fi
source "$REPO/tests/e2e/e2e_lib.sh"
WORK=$E2E_DIR  # removed, and the server stopped, on exit
e2e_start_server "$SERVER" root "$E2E_BASE" $((E2E_BASE + 5))
# Built from a copy of the package's sources: a build in client_stub/python (its build/ and
# egg-info) would collide with the other Python tests' (their fedagg_python_package lock).
mkdir "$WORK/package"
cp -r "$REPO/client_stub/python/setup.py" "$REPO/client_stub/python/pyproject.toml" \
    "$REPO/client_stub/python/src" "$WORK/package/"
FEDAGG_PROTO_DIR=$REPO/proto "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-index --no-deps \
    --no-build-isolation --target "$WORK/site" "$WORK/package" >"$WORK/pip.log" 2>&1 || { cat "$WORK/pip.log"; exit 1; }

cd "$WORK"  # not the source tree: `import fedagg` must find the package built here
FEDAGG_TEST_SERVER="127.0.0.1:$E2E_BASE" PYTHONPATH=$WORK/site FEDAGG_REQUIRE_DP_ACCOUNTING=1 PYTHONDONTWRITEBYTECODE=1 \
    "$VENV/bin/python" -m pytest -p no:cacheprovider -q -rs "$REPO/tests/python/test_privacy_accounting.py"
