#!/usr/bin/env bash
# --metrics_address defaults to 'auto': two servers on one host, started as the README
# starts them (no --metrics_address), both come up, each serves /metrics on the host of its
# --listen at a port of its own (printed at start), and not on another interface. An
# explicit port already in use fails the start with a message saying what to do, and so
# does a gRPC port in use.
# Usage: metrics_address_test.sh FEDAGG_SERVER
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1
ROOT=$E2E_BASE I=$((E2E_BASE + 1))

"$SERVER" --listen="127.0.0.1:$ROOT" >"$E2E_DIR/root.log" 2>&1 &
E2E_PIDS+=($!)
"$SERVER" --listen="127.0.0.1:$I" --parent="127.0.0.1:$ROOT" >"$E2E_DIR/intermediate.log" 2>&1 &
E2E_PIDS+=($!)
e2e_wait_port "$ROOT"; e2e_wait_port "$I"
metrics_port() {  # the port a server printed for its metrics
  for _ in $(seq 50); do
    sed -n 's/^fedagg-server metrics on port \([0-9]*\) .*/\1/p' "$1" | grep . && return 0
    sleep 0.1
  done
  echo "no metrics line in $1" >&2; cat "$1" >&2; return 1
}
root_metrics=$(metrics_port "$E2E_DIR/root.log")
intermediate_metrics=$(metrics_port "$E2E_DIR/intermediate.log")
echo "metrics: root on $root_metrics, intermediate on $intermediate_metrics"
[ "$root_metrics" != "$intermediate_metrics" ]
for port in "$root_metrics" "$intermediate_metrics"; do
  curl -sf "http://127.0.0.1:$port/metrics" | grep -q '^fedagg_backend_info'
done
# Served on the --listen host only: a non-loopback address of this host does not answer.
other=$(hostname -I 2>/dev/null | awk '{print $1}')
if [ -n "$other" ] && [ "$other" != 127.0.0.1 ]; then
  if curl -sf -m 2 "http://$other:$root_metrics/metrics" >/dev/null; then
    echo "metrics answered on $other although --listen is 127.0.0.1" >&2; exit 1
  fi
fi
# An explicit port that is taken: the start fails and says what to do.
if "$SERVER" --listen="127.0.0.1:0" --metrics_address="127.0.0.1:$root_metrics" >"$E2E_DIR/clash.log" 2>&1; then
  echo "a server started on a metrics port already in use" >&2; exit 1
fi
cat "$E2E_DIR/clash.log"
grep -q "cannot listen for metrics on '127.0.0.1:$root_metrics'.*give each server on a host its own --metrics_address port" "$E2E_DIR/clash.log"
# The same for the gRPC port: a second server on it fails rather than share it (one that
# keeps running is stopped after 10 s, and has no refusal to show).
if timeout 10 "$SERVER" --listen="127.0.0.1:$ROOT" --metrics_address= >"$E2E_DIR/grpc-clash.log" 2>&1; then
  echo "a server started on a gRPC port already in use" >&2; exit 1
fi
grep -q "cannot listen on '127.0.0.1:$ROOT'" "$E2E_DIR/grpc-clash.log"
echo "metrics address: ok"
