#!/usr/bin/env bash
# One command: a Flower simulation (flower_app.py: 8 clients, a small NumPy model, 3 rounds)
# whose FedAvg runs on a local fedagg root + 2 intermediate aggregators. Builds fedagg-server
# when it is missing, installs the pinned Flower into .venv-frameworks (once), and the
# fedagg package into it. Arguments go to flower_app.py (--clients, --rounds, ...).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
SERVER=$REPO/build/service/fedagg-server
[ -x "$SERVER" ] || "$REPO/scripts/build.sh" default fedagg-server
"$REPO/scripts/setup_frameworks.sh"
VENV=$REPO/.venv-frameworks
"$VENV/bin/python" -c "import flwr, ray" 2>/dev/null || { echo "Flower is not installed in $VENV" >&2; exit 1; }
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-index --no-deps --no-build-isolation \
    --force-reinstall "$REPO/client_stub/python"
source "$REPO/tests/e2e/e2e_lib.sh"
e2e_start_tree "$SERVER"
echo "fedagg root on 127.0.0.1:$ROOT, intermediates on :$I1 and :$I2"
RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0 "$VENV/bin/python" "$REPO/client_stub/python/examples/flower_app.py" \
    --root "127.0.0.1:$ROOT" --targets "127.0.0.1:$I1,127.0.0.1:$I2" "$@"
