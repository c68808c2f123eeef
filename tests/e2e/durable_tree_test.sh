#!/usr/bin/env bash
# DURABLE acks through intermediates (docs/RELIABILITY.md, "What an acknowledgement
# survives"): a root with --checkpoint_dir and two intermediate aggregators. Clients 1-10
# send through A and B at once asking for DURABLE (`--wait=durable`); each ack must say
# durable. Then the root and A are both killed with SIGKILL, so nothing A holds can be
# pushed again: the restarted root must hold every DURABLE-acked update from its checkpoint
# alone. Their retries through B are refused ALREADY_EXISTS, and the result counts each of
# clients 1-10 exactly once: w = [10, sum of 1000 + n].
# Usage: durable_tree_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
ROOT=$E2E_BASE A=$((E2E_BASE + 1)) B=$((E2E_BASE + 2))
CHECKPOINTS=$E2E_DIR/checkpoints

e2e_start_server "$SERVER" root-1 "$ROOT" $((ROOT + 5)) --checkpoint_dir="$CHECKPOINTS" --checkpoint_interval=300ms
ROOT_PID=${E2E_PIDS[-1]}
# Forwarding once an hour: only the waiting DURABLE acks make them push.
e2e_start_server "$SERVER" intermediate-a "$A" $((A + 5)) --parent="127.0.0.1:$ROOT" --forward_interval_ms=3600000
A_PID=${E2E_PIDS[-1]}
e2e_start_server "$SERVER" intermediate-b "$B" $((B + 5)) --parent="127.0.0.1:$ROOT" --forward_interval_ms=3600000
cli() { local port=$1; shift; "$CLIENT" --server="127.0.0.1:$port" "$@"; }

cli "$ROOT" create d1 --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1 >/dev/null
for port in "$A" "$B"; do e2e_wait_mirrored "$CLIENT" "$port" d1; done
submitting=()
for n in $(seq 10); do
  port=$([ $((n % 2)) = 1 ] && echo "$A" || echo "$B")
  npy "$E2E_DIR/u$n.npy" "<i8" "1,$((1000 + n))"
  cli "$port" submit d1 --client_id="client-$n" --wait=durable w="$E2E_DIR/u$n.npy" >"$E2E_DIR/ack$n.txt" &
  submitting+=($!)
done
for pid in "${submitting[@]}"; do wait "$pid"; done
for n in $(seq 10); do grep -q "(durable)" "$E2E_DIR/ack$n.txt" || { cat "$E2E_DIR/ack$n.txt" >&2; exit 1; }; done
kill -9 "$ROOT_PID" "$A_PID"
wait "$ROOT_PID" "$A_PID" 2>/dev/null || true

e2e_start_server "$SERVER" root-2 "$ROOT" $((ROOT + 5)) --checkpoint_dir="$CHECKPOINTS" --checkpoint_interval=300ms \
    --child_grace_ms=2000
grep -q "resumed 1 aggregations" "$E2E_DIR/root-2.log"
e2e_wait_for_contributions "$CLIENT" "$ROOT" d1 10  # all of them from the checkpoint (B may push again too)
for n in 1 3 5 7 9; do  # acked DURABLE by A, which is gone
  if cli "$B" submit d1 --client_id="client-$n" w="$E2E_DIR/u$n.npy" 2>"$E2E_DIR/retry.err"; then
    echo "client $n, acked DURABLE before the crash, was counted again" >&2; exit 1
  fi
  grep -q "ALREADY_EXISTS: client 'client-$n' already contributed" "$E2E_DIR/retry.err" || { cat "$E2E_DIR/retry.err" >&2; exit 1; }
done
e2e_finish_counting_round "$CLIENT" "$ROOT" d1 10
echo "DURABLE acks through intermediates survive the root and the intermediate: ok"
