#!/usr/bin/env bash
# Random aggregations through a tree — a root on ROOT_BACKEND and two cpu intermediates
# under it — sent with the Python package (installed with pip into a fresh virtual
# environment, as python_client_test.sh does) and checked against NumPy
# (random_conformance.py beside this script: every intrinsic, dtype and input encoding).
# The seed is drawn per run and printed, so a mismatch can be replayed:
#   random_conformance_test.sh FEDAGG_SERVER ROOT_BACKEND [ROUNDS] [SEED]
set -euo pipefail
source "$(dirname "$0")/../e2e/e2e_lib.sh"
SERVER=$1 ROOT_BACKEND=$2 ROUNDS=${3:-60} SEED=${4:-$RANDOM}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=/usr/bin/python3  # Debian's python3-grpcio, -numpy and -crc32c live here

"$PYTHON" -m venv --system-site-packages "$E2E_DIR/venv"
"$E2E_DIR/venv/bin/pip" install --quiet --no-index --no-build-isolation "$REPO/client_stub/python"

ROOT=$E2E_BASE I1=$((E2E_BASE + 1)) I2=$((E2E_BASE + 2))
e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5)) --backend="$ROOT_BACKEND"
e2e_start_server "$SERVER" intermediate-1 "$I1" $((I1 + 5)) --parent="127.0.0.1:$ROOT" --backend=cpu
e2e_start_server "$SERVER" intermediate-2 "$I2" $((I2 + 5)) --parent="127.0.0.1:$ROOT" --backend=cpu

cd "$E2E_DIR"  # not the source tree: `import fedagg` must find the installed package
echo "seed $SEED (replay: $0 SERVER $ROOT_BACKEND $ROUNDS $SEED)"
PYTHONDONTWRITEBYTECODE=1 "$E2E_DIR/venv/bin/python" "$REPO/tests/python/random_conformance.py" \
    "127.0.0.1:$ROOT,127.0.0.1:$I1,127.0.0.1:$I2" "$SEED" "$ROUNDS"
