#!/usr/bin/env bash
# Durability in a tree: the root (with --checkpoint_dir) is killed with SIGKILL and
# restarted while two intermediate aggregators hold partials it had merged but not yet
# checkpointed. In its first life the root writes only the creation checkpoint (a
# checkpoint interval of 10 minutes), so after the restart it holds none of the updates:
# the intermediates, told on re-join that the root holds no sequence of theirs, push their
# kept deltas again, and the result counts every update exactly once.
# Usage: durability_tree_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
ROOT=$E2E_BASE; A=$((E2E_BASE + 1)); B=$((E2E_BASE + 2))
CHECKPOINTS=$E2E_DIR/checkpoints
CLIENTS_PER_INTERMEDIATE=6

e2e_start_server "$SERVER" root-1 "$ROOT" $((ROOT + 5)) --checkpoint_dir="$CHECKPOINTS" --checkpoint_interval=10m
ROOT_PID=${E2E_PIDS[-1]}
e2e_start_server "$SERVER" intermediate-a "$A" $((A + 5)) --parent="127.0.0.1:$ROOT"
e2e_start_server "$SERVER" intermediate-b "$B" $((B + 5)) --parent="127.0.0.1:$ROOT"
cli() { local port=$1; shift; "$CLIENT" --server="127.0.0.1:$port" "$@"; }
contributions() { e2e_contributions "$CLIENT" "$1" d1; }  # contributions PORT -> what d1 counts there
wait_for_contributions() { e2e_wait_for_contributions "$CLIENT" "$1" d1 "$2"; }  # wait_for_contributions PORT N

cli "$ROOT" create d1 --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1
for port in "$A" "$B"; do e2e_wait_mirrored "$CLIENT" "$port" d1; done
expected_sum=0
for i in $(seq "$CLIENTS_PER_INTERMEDIATE"); do
  for port in "$A" "$B"; do
    value=$((port * 100 + i))
    npy "$E2E_DIR/u.npy" "<i8" "1,$value"
    cli "$port" submit d1 --client_id="client-$port-$i" w="$E2E_DIR/u.npy" >/dev/null
    expected_sum=$((expected_sum + value))
  done
done
total=$((2 * CLIENTS_PER_INTERMEDIATE))
wait_for_contributions "$ROOT" "$total"  # every delta merged at the root, in memory only
kill -9 "$ROOT_PID"
wait "$ROOT_PID" 2>/dev/null || true

e2e_start_server "$SERVER" root-2 "$ROOT" $((ROOT + 5)) --checkpoint_dir="$CHECKPOINTS" --checkpoint_interval=300ms
grep -q "resumed 1 aggregations" "$E2E_DIR/root-2.log"
wait_for_contributions "$ROOT" "$total"  # pushed again by the intermediates
cli "$ROOT" seal d1
cli "$ROOT" watch d1 | tail -n 1 | grep -q FINALIZED
[ "$(contributions "$ROOT")" = "$total" ]
mkdir -p "$E2E_DIR/out"
cli "$ROOT" result d1 --out="$E2E_DIR/out" >/dev/null
w=$(npy_read "$E2E_DIR/out/w.npy")
echo "result w=$w (expected $total,$expected_sum)"
[ "$w" = "$total,$expected_sum" ]
for port in "$A" "$B"; do cli "$port" status d1 | grep -q FINALIZED; done  # final partials delivered
echo "durability in a tree: ok"
