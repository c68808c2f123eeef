#!/usr/bin/env bash
# The accuracy of the value encodings against FLARE's and TFF's quantizers
# (bench/encoding_accuracy.py; its header says what it measures): installs the fedagg Python
# package of this tree into build/encoding-bench-venv, over Debian's python3-numpy,
# -grpcio, -sklearn and -matplotlib (no network; scripts/bench.sh installs the last two),
# then runs the script with the arguments given.
#   bench/encoding_accuracy.sh [--seed=1] [--json=FILE] [--picture=FILE.png]    one run
#   bench/encoding_accuracy.sh --combine RUN.json ... [--picture=FILE.png]      median [min-max]
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=$REPO/build/encoding-bench-venv
[ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$VENV"
# The package of this tree, every run: an environment made by an earlier run holds an older one.
"$VENV/bin/pip" install --quiet --no-index --no-deps --no-build-isolation --force-reinstall \
    "$REPO/client_stub/python"
exec "$VENV/bin/python" "$REPO/bench/encoding_accuracy.py" "$@"
