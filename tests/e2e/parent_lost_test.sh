#!/usr/bin/env bash
# A parent that stops answering for longer than the intermediate's --parent_keepalive_ms
# (docs/RELIABILITY.md, "Faults"): the root is stopped with SIGSTOP — its connections stay
# open, as with a hung process or a network that drops packets — and stays stopped until
# the intermediate has reported the failure every way it does:
#  - an update sent right after the stop is not acknowledged: it waits for its client-id
#    claim at the root (exactly once in the whole tree, docs/PROTOCOL.md 6.4), which the
#    stopped root cannot answer, and is refused UNAVAILABLE (the accounted memory stays
#    within --memory_budget_bytes);
#  - its keepalive ping goes unanswered, the Join stream ends, it logs the lost link, and
#    clients get UNAVAILABLE with a message saying why and what to do;
#  - /readyz answers 503. (It holds no acknowledged update it could not push: each one
#    was claimed at the root first, so fedagg_partial_forwards_total{result="failed"} has
#    nothing to count here.)
# Then the root is resumed: the intermediate rejoins and delivers what it acknowledged, the
# refused clients send again, and the result counts every update once.
# Usage: parent_lost_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
ROOT=$E2E_BASE I=$((E2E_BASE + 1))
BUDGET=1048576

e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5))
ROOT_PID=${E2E_PIDS[-1]}
e2e_start_server "$SERVER" intermediate "$I" $((I + 5)) --parent="127.0.0.1:$ROOT" --parent_keepalive_ms=2000 \
    --memory_budget_bytes=$BUDGET
cli() { local port=$1; shift; "$CLIENT" --server="127.0.0.1:$port" "$@"; }
metric() { e2e_metric $((I + 5)) "$1"; }
wait_until() {  # wait_until WHAT COMMAND...: until COMMAND succeeds (60 s at most)
  local what=$1; shift
  for _ in $(seq 600); do "$@" && return 0; sleep 0.1; done
  echo "never happened: $what" >&2
  return 1
}

cli "$ROOT" create p2 --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1 >/dev/null
e2e_wait_mirrored "$CLIENT" "$I" p2
update() { npy "$E2E_DIR/u$1.npy" "<i8" "1,$((1000 + $1))"; echo "w=$E2E_DIR/u$1.npy"; }  # client N's [1, 1000 + N]

cli "$I" submit p2 --client_id=client-1 "$(update 1)" >/dev/null
e2e_wait_for_contributions "$CLIENT" "$ROOT" p2 1
kill -STOP "$ROOT_PID"
# The link still looks alive (the keepalive ping is at least 2 s away from failing), but
# the update's claim waits for the stopped root: it is not acknowledged.
if cli "$I" submit p2 --client_id=client-2 "$(update 2)" 2>"$E2E_DIR/unclaimed.txt"; then
  echo "an update was acknowledged while the root could not answer its claim" >&2; exit 1
fi
cat "$E2E_DIR/unclaimed.txt"
grep -q "UNAVAILABLE" "$E2E_DIR/unclaimed.txt"
[ "$(e2e_contributions "$CLIENT" "$I" p2)" = 1 ]

lost_logged() { grep -q "lost the link to the parent aggregator for aggregation 'p2'" "$E2E_DIR/intermediate.log"; }
wait_until "the intermediate logs the lost link" lost_logged
if cli "$I" submit p2 --client_id=client-3 "$(update 3)" 2>"$E2E_DIR/refused.txt"; then
  echo "an update was acknowledged after the parent was reported lost" >&2; exit 1
fi
cat "$E2E_DIR/refused.txt"
grep -q "UNAVAILABLE" "$E2E_DIR/refused.txt"
grep -q "is not joined to aggregation 'p2' at its parent: the link to the parent aggregator ended with" "$E2E_DIR/refused.txt"
grep -q "retry shortly, or send the update to another aggregator" "$E2E_DIR/refused.txt"
not_ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$((I + 5))/readyz")" = 503 ]; }
wait_until "/readyz answers 503" not_ready
accounted=$(metric fedagg_memory_accounted_bytes)
echo "accounted $accounted of a $(metric fedagg_memory_budget_bytes)-byte budget"
[ "$(metric fedagg_memory_budget_bytes)" = "$BUDGET" ]
python3 -c "import sys; sys.exit(0 if 0 < float('$accounted') <= $BUDGET else 1)"
[ "$(e2e_contributions "$CLIENT" "$I" p2)" = 1 ]  # nothing was counted while the root was away

kill -CONT "$ROOT_PID"
rejoined() { grep -q "rejoined aggregation 'p2' at the parent aggregator" "$E2E_DIR/intermediate.log"; }
wait_until "the intermediate rejoins" rejoined
for n in 2 3; do cli "$I" submit p2 --client_id="client-$n" "$(update "$n")" >/dev/null; done  # the refused updates, sent again
e2e_wait_for_contributions "$CLIENT" "$ROOT" p2 3
cli "$ROOT" seal p2 >/dev/null
cli "$ROOT" watch p2 | tail -n 1 | grep -q FINALIZED
mkdir -p "$E2E_DIR/out"
cli "$ROOT" result p2 --out="$E2E_DIR/out" >/dev/null
w=$(npy_read "$E2E_DIR/out/w.npy")
echo "result w=$w (expected 3,3006)"
[ "$w" = "3,3006" ]
echo "a parent lost for longer than the keepalive: ok"
