#!/usr/bin/env bash
# An intermediate stopped with SIGTERM, as a rolling update or a scale-down stops a pod,
# pushes what it acknowledged before it goes (docs/RELIABILITY.md, "Faults"). It forwards
# nothing on its own here (a forward interval of an hour), so the 3 updates it acks are
# only in its memory until the stop.
#  1. Clients 1-3 send through the intermediate I and are acked; the root R counts none.
#  2. I gets SIGTERM and exits: R now counts the 3, and a client's resend is refused
#     ALREADY_EXISTS (the claim is covered: the update is in R's partial).
#  3. Sealed at R: each client counted once ([1, 1000 + n] as int64).
# Usage: intermediate_stop_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
R=$E2E_BASE I=$((E2E_BASE + 1))

e2e_start_server "$SERVER" root "$R" $((R + 5))
e2e_start_server "$SERVER" intermediate "$I" $((I + 5)) --parent="127.0.0.1:$R" --forward_interval_ms=3600000
I_PID=${E2E_PIDS[-1]}
"$CLIENT" --server="127.0.0.1:$R" create k1 --type='<w=int64[2]>' --intrinsics=federated_sum \
    --min_contributions=1 >/dev/null
e2e_wait_mirrored "$CLIENT" "$I" k1
for n in 1 2 3; do e2e_submit "$CLIENT" "$I" k1 "$n"; done
[ "$(e2e_contributions "$CLIENT" "$I" k1)" = 3 ]
[ "$(e2e_contributions "$CLIENT" "$R" k1)" = 0 ]

kill -TERM "$I_PID"
wait "$I_PID"  # exits 0 after its last push
[ "$(e2e_contributions "$CLIENT" "$R" k1)" = 3 ] ||
  { echo "the root counts $(e2e_contributions "$CLIENT" "$R" k1) of the 3 updates I acknowledged" >&2; exit 1; }
if grep -q "could not push" "$E2E_DIR/intermediate.log"; then cat "$E2E_DIR/intermediate.log" >&2; exit 1; fi
if e2e_submit "$CLIENT" "$R" k1 2 2>"$E2E_DIR/resend.txt"; then echo "a resend of client 2 was counted again" >&2; exit 1; fi
grep -q "ALREADY_EXISTS" "$E2E_DIR/resend.txt" || { cat "$E2E_DIR/resend.txt" >&2; exit 1; }

e2e_finish_counting_round "$CLIENT" "$R" k1 3
echo "an intermediate stopped with SIGTERM delivers what it acknowledged: ok"
