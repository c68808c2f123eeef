#!/usr/bin/env bash
# kill -9 of intermediate aggregators in the middle of an aggregation (docs/PROTOCOL.md,
# section 6.3). A root and three intermediates: A forwards every 200 ms, B survives, and
# C forwards nothing before the seal (a forward interval of an hour), so what C acks is
# exactly what its crash loses.
#  1. Clients 1-4 send through A, clients 9-12 through C; the test waits until the root has
#     merged A's pushes (4 contributions), then kills A and C with SIGKILL.
#  2. The root still counts A's 4 and none of C's: C acknowledged 4 updates that are lost.
#  3. Clients 5-8 try A, get UNAVAILABLE, and go to B. Clients 9-12, lost with C, send
#     their updates again through B: C claimed their ids at the root before it acked them,
#     and holds those claims as leases, so at first the retries are refused ABORTED (held by
#     an aggregator that has not delivered them; never ALREADY_EXISTS, which would tell the
#     client it was counted). Once C has been gone for the root's --child_grace_ms (6 s) the
#     root releases C's claims, and the retries are accepted (docs/PROTOCOL.md 6.4).
#  4. Sealed at the root: it finalizes because the dead children left and B delivered its
#     final push, with each of updates 1-12 exactly once. Every client sends
#     [1, 1000 + its number] as int64, so a lost or doubled update shows in the sum.
# Usage: intermediate_kill_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
ROOT=$E2E_BASE A=$((E2E_BASE + 1)) B=$((E2E_BASE + 2)) C=$((E2E_BASE + 3))

e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5)) --child_grace_ms=6000
e2e_start_server "$SERVER" intermediate-a "$A" $((A + 5)) --parent="127.0.0.1:$ROOT"
A_PID=${E2E_PIDS[-1]}
e2e_start_server "$SERVER" intermediate-b "$B" $((B + 5)) --parent="127.0.0.1:$ROOT"
e2e_start_server "$SERVER" intermediate-c "$C" $((C + 5)) --parent="127.0.0.1:$ROOT" --forward_interval_ms=3600000
C_PID=${E2E_PIDS[-1]}
cli() { local port=$1; shift; "$CLIENT" --server="127.0.0.1:$port" "$@"; }
contributions() { e2e_contributions "$CLIENT" "$1" k1; }

cli "$ROOT" create k1 --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1 >/dev/null
for port in "$A" "$B" "$C"; do e2e_wait_mirrored "$CLIENT" "$port" k1; done

submit() { e2e_submit "$CLIENT" "$1" k1 "$2"; }  # submit PORT N: client N's update through PORT
for n in 1 2 3 4; do submit "$A" "$n"; done
for n in 9 10 11 12; do submit "$C" "$n"; done
e2e_wait_for_contributions "$CLIENT" "$ROOT" k1 4  # A's updates are merged at the root
[ "$(contributions "$C")" = 4 ]                    # C acked its 4, and pushed nothing
kill -9 "$A_PID" "$C_PID"
wait "$A_PID" "$C_PID" 2>/dev/null || true

[ "$(contributions "$ROOT")" = 4 ]  # A's pushes stay merged; C's acked updates are lost
for n in 5 6 7 8; do
  if submit "$A" "$n" 2>"$E2E_DIR/refused.txt"; then echo "a dead intermediate accepted an update" >&2; exit 1; fi
  grep -q UNAVAILABLE "$E2E_DIR/refused.txt" || { cat "$E2E_DIR/refused.txt" >&2; exit 1; }
  submit "$B" "$n"
done
# Sent again at once: C still holds their claims, and has not delivered the updates.
if submit "$B" 9 2>"$E2E_DIR/held.txt"; then echo "client 9 was accepted while C held its claim" >&2; exit 1; fi
grep -q "ABORTED: the update of client 'client-9' .* has not delivered it yet" "$E2E_DIR/held.txt" ||
  { cat "$E2E_DIR/held.txt" >&2; exit 1; }
for n in 9 10 11 12; do e2e_submit_once_released "$CLIENT" "$B" k1 "$n"; done  # C's claims released 6 s after its death
grep -q "child aggregator 'intermediate-c@.*' is lost (no Join stream for 6s); released the 4 client ids" \
  "$E2E_DIR/root.log" || { echo "the root did not log the release of C's claims" >&2; exit 1; }
e2e_wait_for_contributions "$CLIENT" "$ROOT" k1 12

e2e_finish_counting_round "$CLIENT" "$ROOT" k1 12
# B's final partial was delivered (B learns it from the root's answer: wait for it).
timeout 30 "$CLIENT" --server="127.0.0.1:$B" watch k1 | tail -n 1 | grep -q FINALIZED
echo "kill -9 of intermediate aggregators: ok"
