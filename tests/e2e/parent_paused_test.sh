#!/usr/bin/env bash
# A parent that stops answering for a few seconds (docs/RELIABILITY.md, "Faults"): the
# root is stopped with SIGSTOP while clients send to an intermediate aggregator, then
# resumed with SIGCONT. The pause is shorter than the intermediate's --parent_keepalive_ms
# and than its claim deadline (5 s), so its link to the root holds: the updates sent
# meanwhile wait for their client-id claims at the root (exactly once in the whole tree,
# docs/PROTOCOL.md 6.4), are acknowledged when the root answers again, and are forwarded.
# The result at the root counts every acknowledged update exactly once; int64 values
# distinct per client make a lost or doubled update show in the sum.
# Usage: parent_paused_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
ROOT=$E2E_BASE I=$((E2E_BASE + 1))

e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5))
ROOT_PID=${E2E_PIDS[-1]}
e2e_start_server "$SERVER" intermediate "$I" $((I + 5)) --parent="127.0.0.1:$ROOT" --parent_keepalive_ms=10000
cli() { local port=$1; shift; "$CLIENT" --server="127.0.0.1:$port" "$@"; }

cli "$ROOT" create p1 --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1 >/dev/null
e2e_wait_mirrored "$CLIENT" "$I" p1
submit() {  # submit N: client N's update [1, 1000 + N] through the intermediate; it must be acked
  npy "$E2E_DIR/u$1.npy" "<i8" "1,$((1000 + $1))"
  cli "$I" submit p1 --client_id="client-$1" w="$E2E_DIR/u$1.npy" >/dev/null
}

for n in 1 2 3; do submit "$n"; done
e2e_wait_for_contributions "$CLIENT" "$ROOT" p1 3
kill -STOP "$ROOT_PID"
waiting=()
for n in 4 5 6; do submit "$n" & waiting+=($!); done  # their claims wait for the stopped root
sleep 2
kill -CONT "$ROOT_PID"
for pid in "${waiting[@]}"; do wait "$pid"; done  # each acked once the root answers
for n in 7 8; do submit "$n"; done
e2e_wait_for_contributions "$CLIENT" "$ROOT" p1 8  # nothing the intermediate acked was lost

e2e_finish_counting_round "$CLIENT" "$ROOT" p1 8
# The intermediate learns from the root's answer that its final partial was delivered.
timeout 30 "$CLIENT" --server="127.0.0.1:$I" watch p1 | tail -n 1 | grep -q FINALIZED
echo "a parent paused for a few seconds: ok"
