#!/usr/bin/env bash
# End-to-end: clients reach fedagg only through a real nginx gRPC load balancer in front
# of two intermediate aggregators; their streams spread over both, and the root's result
# (checked by fedagg-demo against the float64 reference) contains every update.
# Usage: nginx_load_balancer_test.sh FEDAGG_SERVER FEDAGG_DEMO
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 DEMO=$2
CLIENTS=40

e2e_start_tree "$SERVER"
A=$I1 B=$I2 LB=$((E2E_BASE + 3))
e2e_start_nginx "$LB" "$A" "$B"

# Every client goes through the load balancer; the demo checks the root's result.
"$DEMO" --root="127.0.0.1:$ROOT" --intermediates="127.0.0.1:$LB" --clients=$CLIENTS \
    >"$E2E_DIR/demo.log" 2>&1 || { cat "$E2E_DIR/demo.log"; exit 1; }
grep -E "FINALIZED with $CLIENTS contributions|check against" "$E2E_DIR/demo.log"

a=$(e2e_metric $((A + 5)) fedagg_updates_accepted_total)
b=$(e2e_metric $((B + 5)) fedagg_updates_accepted_total)
# The demo runs two rounds of its clients (plain, then its dense layers quantized).
echo "updates accepted: intermediate-a $a, intermediate-b $b (of $((2 * CLIENTS)), two rounds of $CLIENTS)"
[ "$((a + b))" -eq "$((2 * CLIENTS))" ] && [ "$a" -gt 0 ] && [ "$b" -gt 0 ]
