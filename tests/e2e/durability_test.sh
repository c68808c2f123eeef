#!/usr/bin/env bash
# Durability of a root with --checkpoint_dir across kill -9 and restart:
#  - every update acked DURABLE is in the final result, and sending it again is refused
#    with ALREADY_EXISTS;
#  - an update acked only RECEIVED, sent again with the same client id, is either
#    accepted (it was not in the checkpoint) or refused with ALREADY_EXISTS (it was), and
#    the result counts it exactly once;
#  - a finished aggregation's result survives a restart;
#  - a corrupt checkpoint is refused (reported, kept as .refused, not resumed);
#  - a server without --checkpoint_dir refuses DURABLE with FAILED_PRECONDITION.
# Usage: durability_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
PORT=$E2E_BASE
CHECKPOINTS=$E2E_DIR/checkpoints
cli() { "$CLIENT" --server="127.0.0.1:$PORT" "$@"; }
ROOT_PID=
start_root() {  # start_root LOG_NAME
  e2e_start_server "$SERVER" "$1" "$PORT" $((PORT + 5)) --checkpoint_dir="$CHECKPOINTS" \
      --checkpoint_interval=300ms
  ROOT_PID=${E2E_PIDS[-1]}
}
crash_root() {
  kill -9 "$ROOT_PID"
  wait "$ROOT_PID" 2>/dev/null || true
}
# submit CLIENT VALUE [cli flags...]: one update w=[1, VALUE] (a count and an id sum).
submit() {
  local client=$1 value=$2; shift 2
  npy "$E2E_DIR/$client.npy" "<i8" "1,$value"
  cli "$@" submit d1 --client_id="$client" w="$E2E_DIR/$client.npy"
}
# expect_already_counted CLIENT VALUE: sending it again is refused with ALREADY_EXISTS.
expect_already_counted() {
  if submit "$1" "$2" 2>"$E2E_DIR/again.err"; then
    echo "client $1 was counted twice" >&2
    return 1
  fi
  grep -q ALREADY_EXISTS "$E2E_DIR/again.err"
}

start_root root-1
cli create d1 --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1
[ -f "$CHECKPOINTS/d1.ckpt" ]  # written when the aggregation was created
expected_sum=0
for i in 1 2 3 4 5; do
  submit "durable-$i" "$i" --wait=durable --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["level"] == "durable", d'
  expected_sum=$((expected_sum + i))
done
for i in 1 2 3 4 5; do
  submit "received-$i" $((100 + i)) --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["level"] == "received", d'
  expected_sum=$((expected_sum + 100 + i))
done
crash_root

start_root root-2
grep -q "resumed 1 aggregations" "$E2E_DIR/root-2.log"
[ "$(e2e_metric $((PORT + 5)) 'fedagg_checkpoint_writes_total{result="failed"}')" = 0 ]
for i in 1 2 3 4 5; do expect_already_counted "durable-$i" "$i"; done
resent=0
for i in 1 2 3 4 5; do
  if submit "received-$i" $((100 + i)) 2>"$E2E_DIR/resend.err"; then
    resent=$((resent + 1))
  else
    grep -q ALREADY_EXISTS "$E2E_DIR/resend.err"
  fi
done
echo "RECEIVED-only updates lost in the crash and accepted again: $resent of 5"
for i in 1 2 3 4 5; do expect_already_counted "received-$i" $((100 + i)); done

cli seal d1
cli watch d1 | tail -n 1 | grep -q FINALIZED
writes=$(e2e_metric $((PORT + 5)) 'fedagg_checkpoint_writes_total{result="ok"}')
echo "checkpoints written since the restart: $writes"
[ "${writes%.*}" -ge 1 ]
mkdir -p "$E2E_DIR/out"
cli result d1 --out="$E2E_DIR/out"
w=$(npy_read "$E2E_DIR/out/w.npy")
echo "result w=$w (expected 10,$expected_sum)"
[ "$w" = "10,$expected_sum" ]

# A second aggregation whose checkpoint is torn by the "crash"; d1's result survives.
cli create c1 --type='<w=int64[2]>' --intrinsics=federated_sum
npy "$E2E_DIR/c.npy" "<i8" "1,7"
cli submit c1 --client_id=c --wait=durable w="$E2E_DIR/c.npy"
crash_root
size=$(stat -c %s "$CHECKPOINTS/c1.ckpt")
truncate -s $((size - 3)) "$CHECKPOINTS/c1.ckpt"
start_root root-3
grep -q "checkpoint $CHECKPOINTS/c1.ckpt refused" "$E2E_DIR/root-3.log"
[ -f "$CHECKPOINTS/c1.ckpt.refused" ] && [ ! -f "$CHECKPOINTS/c1.ckpt" ]
set +e
cli status c1 2>"$E2E_DIR/c1.err"
c1_status=$?
set -e
[ "$c1_status" = 1 ] && grep -q NOT_FOUND "$E2E_DIR/c1.err"
rm -r "$E2E_DIR/out" && mkdir "$E2E_DIR/out"
cli result d1 --out="$E2E_DIR/out"
[ "$(npy_read "$E2E_DIR/out/w.npy")" = "10,$expected_sum" ]

# Without --checkpoint_dir, asking for DURABLE is refused and nothing is counted.
PLAIN=$((PORT + 1))
e2e_start_server "$SERVER" plain "$PLAIN" $((PORT + 6))
"$CLIENT" --server="127.0.0.1:$PLAIN" create p1 --type='<w=int64[2]>' --intrinsics=federated_sum
set +e
"$CLIENT" --server="127.0.0.1:$PLAIN" submit p1 --client_id=p --wait=durable w="$E2E_DIR/c.npy" 2>"$E2E_DIR/plain.err"
plain_status=$?
set -e
cat "$E2E_DIR/plain.err"
[ "$plain_status" = 1 ] && grep -q "FAILED_PRECONDITION.*runs without checkpoints" "$E2E_DIR/plain.err"
"$CLIENT" --server="127.0.0.1:$PLAIN" --json status p1 | python3 -c 'import json,sys; d=json.load(sys.stdin); assert "contributions" not in d or d["contributions"] == "0", d'
echo "durability: ok"
