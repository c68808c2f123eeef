#!/usr/bin/env bash
# Installs what is missing, builds, and runs the demo: a root and two intermediate
# aggregators (fedagg-server processes on loopback), simulated clients streaming updates of
# a small model (dense layers, a row-sparse embedding table, sparse token counts) through
# the intermediate aggregators, the result fetched from the root and checked against the
# float64 reference; then the same clients again with the dense layers sent as 8-bit
# quantized values (a quarter of the bytes), whose error is checked against its bound;
# then a secure aggregation (docs/SEMANTICS.md 13): 120 fedagg-loadgen clients in cohorts of
# 20 at the intermediate aggregators, 5% leaving at each stage, each update masked so that
# no aggregator below the root sees it; the root unmasks only the sum, checked exact.
# Extra arguments go to fedagg-demo (e.g. --clients=1000).
# With --page as the first argument, it then keeps the tree running with an aggregation for
# the example web page (client_stub/js/examples): open the URL it prints in three browser
# tabs; each trains a small model and contributes it over the HTTP path, and the page shows
# the aggregated model's accuracy. Ctrl-C ends it.
set -euo pipefail
cd "$(dirname "$0")/.."

page=false
if [ "${1:-}" = "--page" ]; then page=true; shift; fi

./scripts/setup.sh --demo
./scripts/build.sh default fedagg-server fedagg-demo fedagg-client fedagg-loadgen

ROOT_PORT=${FEDAGG_DEMO_PORT:-50551}
LOG_DIR=$(mktemp -d /tmp/fedagg-demo.XXXXXX)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT

start() {  # start NAME PORT [flags...]; metrics on PORT + 1000, the HTTP path on PORT + 2000
  local name=$1 port=$2; shift 2
  ./build/service/fedagg-server --listen="127.0.0.1:$port" --node_id="$name" \
      --metrics_address="127.0.0.1:$((port + 1000))" --http_address="127.0.0.1:$((port + 2000))" \
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
echo
echo "A secure aggregation: 120 clients in cohorts of up to 20 at the intermediate aggregators, 5% leaving at each"
echo "stage; the intermediates add masked updates and relay the cohorts' messages, only the root unmasks the sum."
./build/client_stub/fedagg-loadgen --control="127.0.0.1:$ROOT_PORT" --id_prefix=secure-demo \
    --servers="127.0.0.1:$((ROOT_PORT + 1)),127.0.0.1:$((ROOT_PORT + 2))" --clients=120 --concurrency=120 \
    --type='<w=float32[10000]>' --encoding='discretized:32@0.0001' --secure='cohort=20,min=5,timeout_ms=10000' \
    --leave_before_sharing=0.05 --leave_before_input=0.05 --leave_before_unmasking=0.05
echo "Prometheus metrics: http://127.0.0.1:$((ROOT_PORT + 1000))/metrics (root), :$((ROOT_PORT + 1001)) and :$((ROOT_PORT + 1002)) (intermediate aggregators)"
curl -s "http://127.0.0.1:$((ROOT_PORT + 1000))/metrics" 2>/dev/null | grep -E '^fedagg_(updates_accepted_total|partials_merged_total|aggregations\{state="FINALIZED"\})' || true
echo "server logs: $LOG_DIR"

if $page; then
  C="./build/client_stub/fedagg-client --server=127.0.0.1:$ROOT_PORT"
  # Three contributions seal it; the root then finalizes and the pages show the result.
  $C create browser-demo --type='<weights=float32[9]>' --intrinsics=federated_weighted_mean \
      --max_contributions=3 >/dev/null
  echo
  echo "Open in three browser tabs (each one a client; the third one completes the round):"
  echo "  http://127.0.0.1:$((ROOT_PORT + 2000))/examples/logistic-regression/?aggregation=browser-demo"
  echo "Ctrl-C ends the demo."
  last=""
  while true; do
    status=$($C status browser-demo 2>/dev/null | tr '\n' ' ' || true)
    [ "$status" != "$last" ] && echo "browser-demo: $status" && last=$status
    sleep 2
  done
fi
