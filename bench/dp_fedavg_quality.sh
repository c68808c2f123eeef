#!/usr/bin/env bash
# DP-FedAvg's model quality through fedagg beside NumPy (TFF's formulas) and Flower's DP
# wrapper's code (bench/dp_fedavg_quality.py says what each does): a fedagg root and two
# intermediates on loopback; scikit-learn's digits exported by Debian's python3 (its
# python3-sklearn, which scripts/bench.sh installs); the noise multiplier calibrated for
# epsilon 8 at delta 1e-5 by fedagg.privacy_accounting in .venv-privacy; the contenders run in
# .venv-frameworks (Flower), with the fedagg package of this tree installed there.
# Prints one "BENCH {json}" line per seed.
# Usage: bench/dp_fedavg_quality.sh BUILD_DIR [--rounds=40] [--seeds=1,...,10] [--clip=0.5] [--epsilon=8]
set -euo pipefail
BUILD=$(cd "$1" && pwd); shift
REPO=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=40 SEEDS=1,2,3,4,5,6,7,8,9,10 CLIP=0.5 EPSILON=8
for arg in "$@"; do
  case $arg in
    --rounds=*) ROUNDS=${arg#*=} ;; --seeds=*) SEEDS=${arg#*=} ;; --clip=*) CLIP=${arg#*=} ;;
    --epsilon=*) EPSILON=${arg#*=} ;; *) echo "unknown option $arg" >&2; exit 2 ;;
  esac
done
for venv in .venv-frameworks .venv-privacy; do
  [ -x "$REPO/$venv/bin/python" ] || { echo "$venv is missing: run scripts/setup.sh" >&2; exit 1; }
done
source "$REPO/tests/e2e/e2e_lib.sh"
/usr/bin/python3 -c "
import numpy as np, sklearn.datasets
digits = sklearn.datasets.load_digits()
np.savez('$E2E_DIR/digits.npz', x=digits.data, y=digits.target)"
# The accountant's module needs only the standard library and dp-accounting: run as a script.
Z=$("$REPO/.venv-privacy/bin/python" "$REPO/client_stub/python/src/fedagg/privacy_accounting.py" \
    --target-epsilon "$EPSILON" --delta 1e-5 --sampling fixed --clients-per-round 20 --population 100 \
    --rounds "$ROUNDS" | awk '/^# noise multiplier/ {print $4}')
echo "noise multiplier $Z for epsilon $EPSILON at delta 1e-5 after $ROUNDS rounds (20 of 100 clients, fixed-size, RDP)"
"$REPO/.venv-frameworks/bin/pip" install --quiet --disable-pip-version-check --no-index --no-deps \
    --no-build-isolation --force-reinstall "$REPO/client_stub/python" >"$E2E_DIR/pip.log" 2>&1 ||
  { cat "$E2E_DIR/pip.log"; exit 1; }
e2e_start_tree "$BUILD/service/fedagg-server"
cd "$E2E_DIR"  # not the source tree: `import fedagg` must find the installed package
"$REPO/.venv-frameworks/bin/python" "$REPO/bench/dp_fedavg_quality.py" --data "$E2E_DIR/digits.npz" \
    --root "127.0.0.1:$ROOT" --targets "127.0.0.1:$I1,127.0.0.1:$I2" --z "$Z" --epsilon "$EPSILON" \
    --clip "$CLIP" --rounds "$ROUNDS" --seeds "$SEEDS"
