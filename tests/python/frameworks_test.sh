#!/usr/bin/env bash
# The framework adapters (fedagg.flower, fedagg.flare) with real Flower and NVIDIA FLARE
# against live servers: a fedagg root and two intermediate aggregators, and the pytest
# files test_flower.py and test_flare.py beside this script, run in .venv-frameworks (the
# pinned frameworks scripts/setup_frameworks.sh installs) with the fedagg package installed
# into it. Exits 77 (ctest: skipped) saying why when that environment is missing.
# Usage: frameworks_test.sh FEDAGG_SERVER
set -euo pipefail
SERVER=$1
REPO=$(cd "$(dirname "$0")/../.." && pwd)
VENV=$REPO/.venv-frameworks
if ! "$VENV/bin/python" -c "import flwr, nvflare, ray" 2>/dev/null; then
  echo "SKIPPED: Flower / NVIDIA FLARE are not installed in $VENV (scripts/setup.sh installs them from the package index)"
  exit 77
fi
source "$(dirname "$0")/../e2e/e2e_lib.sh"
# The package from this tree, over the frameworks' pinned grpcio, protobuf and numpy.
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-index --no-deps --no-build-isolation \
    --force-reinstall "$REPO/client_stub/python" >"$E2E_DIR/pip.log" 2>&1 || { cat "$E2E_DIR/pip.log"; exit 1; }

e2e_start_tree "$SERVER"

cd "$E2E_DIR"  # not the source tree: `import fedagg` must find the installed package
export RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0 RAY_DISABLE_USAGE_STATS=1 RAY_USAGE_STATS_ENABLED=0 \
    FLWR_TELEMETRY_ENABLED=0 FLWR_HOME="$E2E_DIR/flwr-home"

# One Ray cluster serves every Flower simulation of test_flower.py (each attaches to it
# through RAY_ADDRESS). Starting Ray is the fragile step on a loaded 2-core machine: its GCS
# server gets 30 s to come up, and a simulation that started its own Ray now and then
# crashed or hung there. Started once here, a failed start is retried, and stopped on exit.
RAY=$VENV/bin/ray
RAY_PORT=$((E2E_BASE + 8))
frameworks_cleanup() {
  local rc=$?
  "$RAY" stop --force >/dev/null 2>&1 || true
  (exit "$rc")
  e2e_cleanup
}
trap frameworks_cleanup EXIT
ray_start() {
  for attempt in 1 2 3; do
    timeout 180 "$RAY" start --head --port="$RAY_PORT" --num-cpus=2 --include-dashboard=false \
        --disable-usage-stats --temp-dir="$E2E_DIR/ray" >"$E2E_DIR/ray-start.log" 2>&1 && return 0
    echo "starting Ray failed (attempt $attempt of 3):"; tail -n 20 "$E2E_DIR/ray-start.log"
    "$RAY" stop --force >/dev/null 2>&1 || true
  done
  return 1
}
ray_start
export RAY_ADDRESS=127.0.0.1:$RAY_PORT
FEDAGG_TEST_ROOT="127.0.0.1:$ROOT" FEDAGG_TEST_INTERMEDIATES="127.0.0.1:$I1,127.0.0.1:$I2" \
FEDAGG_EXAMPLES="$REPO/client_stub/python/examples" PYTHONDONTWRITEBYTECODE=1 \
    "$VENV/bin/python" -m pytest -p no:cacheprovider -q -rs "$REPO/tests/python/test_flower.py" \
    "$REPO/tests/python/test_flare.py"
