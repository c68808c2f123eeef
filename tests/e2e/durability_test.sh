#!/usr/bin/env bash
# Durability of a root with --checkpoint_dir across kill -9 and restart:
#  - every update acked DURABLE is in the final result, and sending it again is refused
#    with ALREADY_EXISTS;
#  - an update acked only RECEIVED, sent again with the same client id, is either
#    accepted (it was not in the checkpoint) or refused with ALREADY_EXISTS (it was), and
#    the result counts it exactly once;
#  - the same holds for a crash in the middle of concurrent DURABLE traffic;
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
# submit_to AGGREGATION CLIENT VALUE [cli flags...]: one update w=[1, VALUE] (a count and
# a sum that tells which updates are in a result).
submit_to() {
  local aggregation=$1 client=$2 value=$3; shift 3
  npy "$E2E_DIR/$client.npy" "<i8" "1,$value"
  cli "$@" submit "$aggregation" --client_id="$client" w="$E2E_DIR/$client.npy"
}
submit() { submit_to d1 "$@"; }
# expect_already_counted CLIENT VALUE: sending it to d1 again is refused with ALREADY_EXISTS.
expect_already_counted() {
  if submit "$1" "$2" 2>"$E2E_DIR/again.err"; then
    echo "client $1 was counted twice" >&2
    return 1
  fi
  grep -q ALREADY_EXISTS "$E2E_DIR/again.err"
}
# result_of AGGREGATION: seals it, waits for FINALIZED, prints w.
result_of() {
  cli seal "$1" >/dev/null
  cli watch "$1" | tail -n 1 | grep -q FINALIZED
  rm -rf "$E2E_DIR/out" && mkdir -p "$E2E_DIR/out"
  cli result "$1" --out="$E2E_DIR/out" >/dev/null
  npy_read "$E2E_DIR/out/w.npy"
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

w=$(result_of d1)
# The finished aggregation changed since the restart: its checkpoint is written within
# --checkpoint_interval of the finalization (not before the result is served).
writes=0
for _ in $(seq 50); do
  writes=$(e2e_metric $((PORT + 5)) 'fedagg_checkpoint_writes_total{result="ok"}')
  [ "${writes%.*}" -ge 1 ] && break
  sleep 0.1
done
echo "checkpoints written since the restart: $writes"
[ "${writes%.*}" -ge 1 ]
echo "result w=$w (expected 10,$expected_sum)"
[ "$w" = "10,$expected_sum" ]

# A crash in the middle of concurrent DURABLE traffic: four clients loop over their
# updates while the root is killed. Every update whose DURABLE ack arrived must be in the
# restored aggregation; all of them, sent again, end up counted exactly once.
cli create d2 --type='<w=int64[2]>' --intrinsics=federated_sum
WORKERS=4 PER_WORKER=30
# The updates' files, made once: w<worker>-<i>.npy holds [1, worker * 1000 + i].
python3 - "$E2E_DIR" "$WORKERS" "$PER_WORKER" <<'PY'
import struct, sys
directory, workers, per_worker = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
header = "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }"
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
for worker in range(1, workers + 1):
    for i in range(1, per_worker + 1):
        with open("%s/w%d-%d.npy" % (directory, worker, i), "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
                    + struct.pack("<2q", 1, worker * 1000 + i))
PY
worker_pids=()
for worker in $(seq "$WORKERS"); do
  (
    for i in $(seq "$PER_WORKER"); do
      if cli submit d2 --client_id="w$worker-$i" --wait=durable w="$E2E_DIR/w$worker-$i.npy" >/dev/null 2>&1; then
        echo "w$worker-$i $((worker * 1000 + i))" >>"$E2E_DIR/durable-$worker.txt"
      fi
    done
  ) &
  worker_pids+=($!)
done
# Crash once a few updates were acked DURABLE, while the others are still going.
for _ in $(seq 600); do
  [ "$(cat "$E2E_DIR"/durable-*.txt 2>/dev/null | wc -l)" -ge 8 ] && break
  sleep 0.05
done
crash_root
wait "${worker_pids[@]}"
start_root root-crash-under-load
acked=0
for worker in $(seq "$WORKERS"); do
  [ -f "$E2E_DIR/durable-$worker.txt" ] || continue
  while read -r client value; do
    if cli submit d2 --client_id="$client" w="$E2E_DIR/$client.npy" 2>"$E2E_DIR/again.err"; then
      echo "client $client, acked DURABLE before the crash, was counted again" >&2
      exit 1
    fi
    grep -q ALREADY_EXISTS "$E2E_DIR/again.err"
    acked=$((acked + 1))
  done <"$E2E_DIR/durable-$worker.txt"
done
echo "updates acked DURABLE before the crash: $acked of $((WORKERS * PER_WORKER)), all restored"
[ "$acked" -ge 8 ]
load_sum=0
for worker in $(seq "$WORKERS"); do
  for i in $(seq "$PER_WORKER"); do
    value=$((worker * 1000 + i))
    load_sum=$((load_sum + value))
    if ! cli submit d2 --client_id="w$worker-$i" w="$E2E_DIR/w$worker-$i.npy" 2>"$E2E_DIR/resend.err" >/dev/null; then
      grep -q ALREADY_EXISTS "$E2E_DIR/resend.err"
    fi
  done
done
w=$(result_of d2)
echo "result w=$w (expected $((WORKERS * PER_WORKER)),$load_sum)"
[ "$w" = "$((WORKERS * PER_WORKER)),$load_sum" ]

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
