#!/usr/bin/env bash
# The peer comparison (bench/peers_bench.py): makes two virtual environments under
# BUILD_DIR/peers, once (bench/peers_envs.sh), then runs every contender on the same inputs.
#   bench/peers_bench.sh BUILD_DIR [--clients=100] [--elements=4000000] [--rounds=5]
set -euo pipefail
BUILD=$(cd "$1" && pwd); shift
REPO=$(cd "$(dirname "$0")/.." && pwd)
source "$REPO/bench/peers_envs.sh"
exec /usr/bin/python3 "$REPO/bench/peers_bench.py" --build "$BUILD" --peer_python "$PEER_PYTHON" \
    --fedagg_python "$FEDAGG_PYTHON" "$@"
