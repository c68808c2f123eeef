#!/usr/bin/env bash
# Installs what is missing, builds, and runs the demo: a root and two intermediate
# aggregators (fedagg-server processes on loopback), simulated clients streaming updates of
# a small model (dense layers, a row-sparse embedding table, sparse token counts) through
# the intermediate aggregators, the result fetched from the root and checked against the
# float64 reference; then the same clients again with the dense layers sent as 8-bit
# quantized values (a quarter of the bytes), whose error is checked against its bound.
# Extra arguments go to fedagg-demo (e.g. --clients=1000).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/build.sh default fedagg-server fedagg-demo

ROOT_PORT=${FEDAGG_DEMO_PORT:-50551}
LOG_DIR=$(mktemp -d /tmp/fedagg-demo.XXXXXX)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT

start() {  # start NAME PORT [flags...]; metrics on PORT + 1000
  local name=$1 port=$2; shift 2
  ./build/service/fedagg-server --listen="127.0.0.1:$port" --node_id="$name" \
      --metrics_address="127.0.0.1:$((port + 1000))" \
      --forward_interval_ms=200 --child_grace_ms=5000 "$@" >"$LOG_DIR/$name.log" 2>&1 &
  pids+=($!)
}
start root "$ROOT_PORT"
start intermediate-a $((ROOT_PORT + 1)) --parent="127.0.0.1:$ROOT_PORT"
start intermediate-b $((ROOT_PORT + 2)) --parent="127.0.0.1:$ROOT_PORT"
for port in "$ROOT_PORT" $((ROOT_PORT + 1)) $((ROOT_PORT + 2)); do
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
done
echo "fedagg tree on loopback: root :$ROOT_PORT, intermediate aggregators :$((ROOT_PORT + 1)) :$((ROOT_PORT + 2)) (logs in $LOG_DIR)"

./build/service/demo/fedagg-demo --root="127.0.0.1:$ROOT_PORT" \
    --intermediates="127.0.0.1:$((ROOT_PORT + 1)),127.0.0.1:$((ROOT_PORT + 2))" "$@"
echo "Prometheus metrics: http://127.0.0.1:$((ROOT_PORT + 1000))/metrics (root), :$((ROOT_PORT + 1001)) and :$((ROOT_PORT + 1002)) (intermediate aggregators)"
curl -s "http://127.0.0.1:$((ROOT_PORT + 1000))/metrics" 2>/dev/null | grep -E '^fedagg_(updates_accepted_total|partials_merged_total|aggregations\{state="FINALIZED"\})' || true
echo "server logs: $LOG_DIR"
