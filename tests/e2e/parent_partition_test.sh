#!/usr/bin/env bash
# A network partition between an intermediate and its parent, longer than the parent's
# --child_grace_ms (docs/RELIABILITY.md, "Faults"), made by a relay between them
# (tcp_relay.py) stopped with SIGSTOP: every packet is dropped, no connection is reset, so
# each side learns of the cut only from its keepalive pings.
#  1. Clients 1-2 send through the intermediate I, which acks them and, forwarding nothing
#     before the seal (a forward interval of an hour), holds them: the root R holds their
#     claims for I, uncovered.
#  2. The partition. R's pings to I go unanswered (--child_keepalive_ms), so I's Join
#     stream ends there, and --child_grace_ms later I is lost: R releases its 2 claims.
#     The clients' retries, sent to R directly, are refused ABORTED until then, and
#     accepted after.
#  3. The partition heals. I rejoins, R refuses it (it gave I up), and I fails its mirror,
#     saying why: what I acked and held is never pushed, so nothing is counted twice.
#  4. Sealed at R: clients 1-2 each counted exactly once ([1, 1000 + n] as int64).
# Usage: parent_partition_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
R=$E2E_BASE I=$((E2E_BASE + 1)) RELAY=$((E2E_BASE + 2))

e2e_start_server "$SERVER" root "$R" $((R + 5)) --child_grace_ms=3000 --child_keepalive_ms=1000
python3 "$(dirname "$0")/tcp_relay.py" "$RELAY" "$R" >"$E2E_DIR/relay.log" 2>&1 &
RELAY_PID=$!
E2E_PIDS+=("$RELAY_PID")
e2e_wait_port "$RELAY"
e2e_start_server "$SERVER" intermediate "$I" $((I + 5)) --parent="127.0.0.1:$RELAY" --parent_keepalive_ms=1000 \
    --forward_interval_ms=3600000
cli() { local port=$1; shift; "$CLIENT" --server="127.0.0.1:$port" "$@"; }
state() { cli "$1" --json status k1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }

cli "$R" create k1 --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1 >/dev/null
e2e_wait_mirrored "$CLIENT" "$I" k1
submit() { e2e_submit "$CLIENT" "$1" k1 "$2"; }  # submit PORT N: client N's update through PORT
for n in 1 2; do submit "$I" "$n"; done
[ "$(e2e_contributions "$CLIENT" "$R" k1)" = 0 ]  # I holds both

kill -STOP "$RELAY_PID"
if submit "$R" 1 2>"$E2E_DIR/held.txt"; then echo "client 1 was accepted while I held its claim" >&2; exit 1; fi
grep -q "ABORTED: the update of client 'client-1' .* has not delivered it yet" "$E2E_DIR/held.txt" ||
  { cat "$E2E_DIR/held.txt" >&2; exit 1; }
for n in 1 2; do e2e_submit_once_released "$CLIENT" "$R" k1 "$n"; done  # once R gives I up (keepalive, then grace: ~5 s)
grep -q "child aggregator 'intermediate@.*' is lost (no Join stream for 3s); released the 2 client ids" \
  "$E2E_DIR/root.log" || { echo "the root did not log the release of I's claims" >&2; exit 1; }

kill -CONT "$RELAY_PID"
for _ in $(seq 300); do [ "$(state "$I")" = FAILED ] && break; sleep 0.1; done
[ "$(state "$I")" = FAILED ] || { echo "I's mirror is $(state "$I"), not FAILED" >&2; exit 1; }
if submit "$I" 3 2>"$E2E_DIR/failed.txt"; then echo "I accepted an update after the root gave it up" >&2; exit 1; fi
grep -q "FAILED_PRECONDITION: aggregation 'k1' is FAILED (the parent aggregator gave this aggregator up as lost" \
  "$E2E_DIR/failed.txt" || { cat "$E2E_DIR/failed.txt" >&2; exit 1; }

e2e_finish_counting_round "$CLIENT" "$R" k1 2
echo "a partition between an intermediate and its parent: ok"
