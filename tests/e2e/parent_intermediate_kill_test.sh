#!/usr/bin/env bash
# kill -9 of an intermediate that is itself the parent of an intermediate, and its restart
# as another process (docs/PROTOCOL.md 6.3, docs/RELIABILITY.md "Faults": a parent
# intermediate crash in a deeper tree). The tree: root R; A under R, which forwards nothing
# before the seal (a forward interval of an hour); B under A; C under R.
#  1. Clients 1-4 send through B. B claims each id at A, A at R (the root decides), B counts
#     and acks them and pushes them to A: A holds them, R holds A's claims, uncovered.
#  2. A is killed. Its clients' retries through C are refused ABORTED (A holds their claims
#     and has not delivered them) until R has gone --child_grace_ms (6 s) without A's Join
#     stream: R releases A's 4 claims, and the retries are accepted, each counted once.
#  3. A is started again as another process. B rejoins it, sees that its parent is another
#     process (what B delivered and claimed through the old one is gone) and, having
#     counted clients, fails its mirror instead of pushing: an update sent to B is refused
#     FAILED_PRECONDITION, saying why.
#  4. Clients 5-6 send through the new A. Sealed at R: clients 1-6 each counted exactly
#     once. Every client sends [1, 1000 + its number] as int64, so a lost or doubled update
#     shows in the sum.
# Usage: parent_intermediate_kill_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
R=$E2E_BASE A=$((E2E_BASE + 1)) B=$((E2E_BASE + 2)) C=$((E2E_BASE + 3))

e2e_start_server "$SERVER" root "$R" $((R + 5)) --child_grace_ms=6000
e2e_start_server "$SERVER" intermediate-a "$A" $((A + 5)) --parent="127.0.0.1:$R" --forward_interval_ms=3600000
A_PID=${E2E_PIDS[-1]}
e2e_start_server "$SERVER" intermediate-b "$B" $((B + 5)) --parent="127.0.0.1:$A"
e2e_start_server "$SERVER" intermediate-c "$C" $((C + 5)) --parent="127.0.0.1:$R"
cli() { local port=$1; shift; "$CLIENT" --server="127.0.0.1:$port" "$@"; }
contributions() { e2e_contributions "$CLIENT" "$1" k1; }
state() { cli "$1" --json status k1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }

cli "$R" create k1 --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1 >/dev/null
for port in "$A" "$B" "$C"; do e2e_wait_mirrored "$CLIENT" "$port" k1; done

submit() { e2e_submit "$CLIENT" "$1" k1 "$2"; }  # submit PORT N: client N's update through PORT
for n in 1 2 3 4; do submit "$B" "$n"; done
e2e_wait_for_contributions "$CLIENT" "$A" k1 4  # B's push is merged at A
[ "$(contributions "$R")" = 0 ]                 # and A has pushed nothing to R
kill -9 "$A_PID"
wait "$A_PID" 2>/dev/null || true

# Sent again through C at once: R holds the claims for A, which has not delivered them.
if submit "$C" 1 2>"$E2E_DIR/held.txt"; then echo "client 1 was accepted while A held its claim" >&2; exit 1; fi
grep -q "ABORTED: the update of client 'client-1' .* has not delivered it yet" "$E2E_DIR/held.txt" ||
  { cat "$E2E_DIR/held.txt" >&2; exit 1; }
for n in 1 2 3 4; do e2e_submit_once_released "$CLIENT" "$C" k1 "$n"; done  # R releases A's claims 6 s after its death
grep -q "child aggregator 'intermediate-a@.*' is lost (no Join stream for 6s); released the 4 client ids" \
  "$E2E_DIR/root.log" || { echo "the root did not log the release of A's claims" >&2; exit 1; }
e2e_wait_for_contributions "$CLIENT" "$R" k1 4

# A comes back as another process; B must not push what it delivered to the old one.
mv "$E2E_DIR/intermediate-a.log" "$E2E_DIR/intermediate-a-first.log"
e2e_start_server "$SERVER" intermediate-a "$A" $((A + 5)) --parent="127.0.0.1:$R"
e2e_wait_mirrored "$CLIENT" "$A" k1
for _ in $(seq 300); do [ "$(state "$B")" = FAILED ] && break; sleep 0.1; done
[ "$(state "$B")" = FAILED ] || { echo "B's mirror is $(state "$B"), not FAILED" >&2; exit 1; }
if submit "$B" 5 2>"$E2E_DIR/failed.txt"; then echo "B accepted an update after its parent restarted" >&2; exit 1; fi
grep -q "FAILED_PRECONDITION: aggregation 'k1' is FAILED (the parent aggregator restarted without checkpoints" \
  "$E2E_DIR/failed.txt" || { cat "$E2E_DIR/failed.txt" >&2; exit 1; }
for n in 5 6; do submit "$A" "$n"; done
e2e_wait_for_contributions "$CLIENT" "$R" k1 6
[ "$(contributions "$R")" = 6 ]  # B's 4, delivered to the old A only, were not pushed again

e2e_finish_counting_round "$CLIENT" "$R" k1 6
echo "kill -9 of a parent intermediate, and its restart: ok"
