#!/usr/bin/env bash
# Durability in a tree: the root (with --checkpoint_dir) is killed with SIGKILL and
# restarted while two intermediate aggregators hold partials it had merged but not yet
# checkpointed. Each update's client-id claim waits for a root checkpoint (docs/PROTOCOL.md
# 6.4), so the root's first life writes one (a 3 s interval) before the updates are acked;
# their partials are merged about 200 ms later and the root is killed then, seconds before
# its next checkpoint: after the restart it knows every client id but holds none of the
# updates. The intermediates, told on re-join that the root holds no sequence of theirs,
# push their kept deltas again, and the result counts every update exactly once; a client
# that retries through the other intermediate after the restart is refused ALREADY_EXISTS.
# Usage: durability_tree_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
ROOT=$E2E_BASE; A=$((E2E_BASE + 1)); B=$((E2E_BASE + 2))
CHECKPOINTS=$E2E_DIR/checkpoints
CLIENTS_PER_INTERMEDIATE=6

e2e_start_server "$SERVER" root-1 "$ROOT" $((ROOT + 5)) --checkpoint_dir="$CHECKPOINTS" --checkpoint_interval=3s
ROOT_PID=${E2E_PIDS[-1]}
e2e_start_server "$SERVER" intermediate-a "$A" $((A + 5)) --parent="127.0.0.1:$ROOT"
e2e_start_server "$SERVER" intermediate-b "$B" $((B + 5)) --parent="127.0.0.1:$ROOT"
cli() { local port=$1; shift; "$CLIENT" --server="127.0.0.1:$port" "$@"; }
contributions() { e2e_contributions "$CLIENT" "$1" d1; }  # contributions PORT -> what d1 counts there
wait_for_contributions() { e2e_wait_for_contributions "$CLIENT" "$1" d1 "$2"; }  # wait_for_contributions PORT N

cli "$ROOT" create d1 --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1
for port in "$A" "$B"; do e2e_wait_mirrored "$CLIENT" "$port" d1; done
expected_sum=0
submitting=()
for i in $(seq "$CLIENTS_PER_INTERMEDIATE"); do
  for port in "$A" "$B"; do
    value=$((port * 100 + i))
    npy "$E2E_DIR/u-$port-$i.npy" "<i8" "1,$value"
    # At once: their claims share the root's next checkpoint.
    cli "$port" submit d1 --client_id="client-$port-$i" w="$E2E_DIR/u-$port-$i.npy" >/dev/null &
    submitting+=($!)
    expected_sum=$((expected_sum + value))
  done
done
for pid in "${submitting[@]}"; do wait "$pid"; done
total=$((2 * CLIENTS_PER_INTERMEDIATE))
wait_for_contributions "$ROOT" "$total"  # every delta merged at the root, in memory only
kill -9 "$ROOT_PID"
wait "$ROOT_PID" 2>/dev/null || true

e2e_start_server "$SERVER" root-2 "$ROOT" $((ROOT + 5)) --checkpoint_dir="$CHECKPOINTS" --checkpoint_interval=300ms
grep -q "resumed 1 aggregations" "$E2E_DIR/root-2.log"
# The claims were in the checkpoint: a client acked through A that retries through B
# after the restart is refused, not counted a second time — ABORTED while A has not pushed
# its update again (the claim is A's lease), ALREADY_EXISTS once it has.
retry_through_b() {
  if cli "$B" submit d1 --client_id="client-$A-1" w="$E2E_DIR/u-$A-1.npy" 2>"$E2E_DIR/retry.err"; then
    echo "a client acked before the restart was counted again through the other intermediate" >&2; exit 1
  fi
}
retry_through_b
grep -q "ALREADY_EXISTS: client 'client-$A-1' already contributed\|ABORTED: the update of client 'client-$A-1'" \
  "$E2E_DIR/retry.err" || { cat "$E2E_DIR/retry.err" >&2; exit 1; }
wait_for_contributions "$ROOT" "$total"  # pushed again by the intermediates
retry_through_b
grep -q "ALREADY_EXISTS: client 'client-$A-1' already contributed" "$E2E_DIR/retry.err" || { cat "$E2E_DIR/retry.err" >&2; exit 1; }
cli "$ROOT" seal d1
cli "$ROOT" watch d1 | tail -n 1 | grep -q FINALIZED
[ "$(contributions "$ROOT")" = "$total" ]
mkdir -p "$E2E_DIR/out"
cli "$ROOT" result d1 --out="$E2E_DIR/out" >/dev/null
w=$(npy_read "$E2E_DIR/out/w.npy")
echo "result w=$w (expected $total,$expected_sum)"
[ "$w" = "$total,$expected_sum" ]
# Final partials delivered: each intermediate learns it from the root's answer, after the
# root finalized, so wait for it.
for port in "$A" "$B"; do timeout 30 "$CLIENT" --server="127.0.0.1:$port" watch d1 | tail -n 1 | grep -q FINALIZED; done
echo "durability in a tree: ok"
