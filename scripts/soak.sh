#!/usr/bin/env bash
# Soak test: a root and two intermediate aggregators on loopback, driven by fedagg-loadgen
# for a set time, round after round, with client faults on (streams cut mid-update, acks
# lost and the update sent again under the same client id, slow senders).
#   scripts/soak.sh [MINUTES] [--kill_intermediates]   (default 30; the report goes to build/soak/)
# After every batch of rounds it checks that the load generator's own result check passed
# and that every client was counted exactly once with none refused (no acknowledged update
# lost, none counted twice), and samples each server's resident memory (VmRSS) and open
# file descriptors. At the end: resident memory must be flat after warm-up (the largest
# sample of the last third at most 10% + 16 MiB above the largest of the first third after
# warm-up) and descriptors must not grow (last sample at most 16 above the warm-up's
# largest). Finished aggregations are retained 20 at a time (--retain_finished=20; and
# those finished in the last 10 s, --finished_grace_s) so the steady state is reached
# within the warm-up; what remains is what leaks.
# --kill_intermediates: the root writes checkpoints (every 100 ms) and the clients ask for
# DURABLE acks; in every batch one intermediate, chosen at random, is killed with SIGKILL at
# a random moment and started again under the same --node_id. Every DURABLE-acked update
# must still be counted exactly once, and every client whose update the dead node held
# must be accepted when it sends again (nothing refused), so each round's result matches
# the reference. Memory and descriptors are then checked on the root only.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-30}"
kills=false
[ "${2:-}" = --kill_intermediates ] && kills=true

./scripts/build.sh default fedagg-server fedagg-loadgen >/dev/null
REPORT_DIR=$PWD/build/soak
mkdir -p "$REPORT_DIR"
source tests/e2e/e2e_lib.sh
# Copies, so a rebuild during the run does not pull the binaries away under it.
cp build/service/fedagg-server build/client_stub/fedagg-loadgen "$E2E_DIR/"
SERVER=$E2E_DIR/fedagg-server LOADGEN=$E2E_DIR/fedagg-loadgen

ROOT=$E2E_BASE
COMMON=(--flush_interval_ms=20 --retain_finished=20)
ROOT_FLAGS=() CLIENT_FLAGS=()
if $kills; then
  ROOT_FLAGS=(--checkpoint_dir="$E2E_DIR/checkpoints" --checkpoint_interval=100ms)
  CLIENT_FLAGS=(--durable --max_attempts=60)
fi
e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5)) "${COMMON[@]}" "${ROOT_FLAGS[@]}"
start_intermediate() {  # start_intermediate 1|2: mid-a or mid-b; its pid goes to pids[1|2]
  local i=$1 name; name=$([ "$1" = 1 ] && echo mid-a || echo mid-b)
  e2e_start_server "$SERVER" "$name" $((ROOT + i)) $((ROOT + 5 + i)) --parent="127.0.0.1:$ROOT" "${COMMON[@]}" \
      --forward_interval_ms=50
  pids[$i]=${E2E_PIDS[-1]}
}
pids=("${E2E_PIDS[@]}")
start_intermediate 1
start_intermediate 2
names=(root mid-a mid-b)
killed=0
kill_one_intermediate() {  # at a random moment of the batch: SIGKILL, then the same node again
  sleep "$(( RANDOM % 5000 ))e-3"
  local i=$(( RANDOM % 2 + 1 ))
  kill -9 "${pids[$i]}"
  wait "${pids[$i]}" 2>/dev/null || true
  start_intermediate "$i"
  killed=$((killed + 1))
}

CLIENTS=300 ROUNDS=5
samples=$REPORT_DIR/samples.csv
echo "elapsed_s,batch,server,rss_kib,fds" >"$samples"
start=$(date +%s) end=$(( $(date +%s) + minutes * 60 )) batch=0 updates=0
while [ "$(date +%s)" -lt "$end" ]; do
  batch=$((batch + 1))
  "$LOADGEN" "${CLIENT_FLAGS[@]}" --json --control="127.0.0.1:$ROOT" --servers="127.0.0.1:$((ROOT + 1)),127.0.0.1:$((ROOT + 2))" \
      --id_prefix="soak-$batch" --rounds=$ROUNDS --clients=$CLIENTS --concurrency=64 --channels=2 \
      --seed=$batch --type='<dense=float32[128,32],emb=float32[2000,16],tok=int64[20000]>' \
      --intrinsics=federated_weighted_mean,row_sparse_sum,sparse_sum_sparse+counts --density=1,0.01,0.002 \
      --chunk_kib=16 --disconnect_fraction=0.05 --lost_ack_fraction=0.05 --slow_fraction=0.02 \
      --slow_delay_ms=2 >"$E2E_DIR/batch.json" &
  loadgen_pid=$!
  if $kills; then kill_one_intermediate; fi
  wait "$loadgen_pid" || { cat "$E2E_DIR/batch.json"; echo "soak: batch $batch failed" >&2; exit 1; }
  /usr/bin/python3 - "$E2E_DIR/batch.json" $((CLIENTS * ROUNDS)) <<'PY'
import json, sys
r, n = json.load(open(sys.argv[1])), int(sys.argv[2])
u = r["updates"]
assert r["passed"] is True and all(c["passed"] for c in r["checks"]), r["checks"]
assert u["counted"] == n and u["acked"] + u["already_counted"] == n and u["refused"] == 0, u
PY
  updates=$((updates + CLIENTS * ROUNDS))
  for i in "${!pids[@]}"; do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/${pids[$i]}/status")
    fds=$(find "/proc/${pids[$i]}/fd" -mindepth 1 -maxdepth 1 | wc -l)
    echo "$(( $(date +%s) - start )),$batch,${names[$i]},$rss,$fds" >>"$samples"
  done
done

# What the kills left for the root to release: client ids whose updates a dead node had
# acknowledged (or claimed) without delivering them.
released=$(sed -n 's/.* is lost (.*); released the \([0-9]*\) client ids.*/\1/p' "$E2E_DIR/root.log" | awk '{sum += $1} END {print sum + 0}')
/usr/bin/python3 - "$samples" "$minutes" "$updates" "$killed" "${released:-0}" <<'PY' | tee "$REPORT_DIR/summary.txt"
import csv, sys
rows, minutes, updates = list(csv.DictReader(open(sys.argv[1]))), sys.argv[2], int(sys.argv[3])
killed, released = int(sys.argv[4]), int(sys.argv[5])
batches = max(int(r["batch"]) for r in rows)
assert batches >= 6, f"only {batches} batches ran: run longer"
warm = max(2, batches // 10)  # the first tenth warms up (caches, gRPC buffers, retention)
print(f"soak: {minutes} min, {batches} batches, {updates} updates counted exactly once, "
      f"every result checked; warm-up = first {warm} batches" +
      (f"; {killed} intermediates killed with SIGKILL and restarted, DURABLE acks, the root released "
       f"{released} client ids the dead ones held" if killed else ""))
failed = False
for server in (("root",) if killed else ("root", "mid-a", "mid-b")):
    s = [r for r in rows if r["server"] == server and int(r["batch"]) > warm]
    third = max(1, len(s) // 3)
    first, last = s[:third], s[-third:]
    rss_first = max(int(r["rss_kib"]) for r in first)
    rss_last = max(int(r["rss_kib"]) for r in last)
    fds_warm = max(int(r["fds"]) for r in rows if r["server"] == server and int(r["batch"]) <= warm)
    fds_end = int(s[-1]["fds"])
    rss_ok = rss_last <= rss_first * 1.10 + 16 * 1024
    fds_ok = fds_end <= fds_warm + 16
    failed |= not (rss_ok and fds_ok)
    print(f"  {server:6s} RSS max first third {rss_first / 1024:.1f} MiB, last third {rss_last / 1024:.1f} MiB "
          f"({'flat' if rss_ok else 'GROWING'}); fds warm-up max {fds_warm}, end {fds_end} "
          f"({'flat' if fds_ok else 'GROWING'})")
sys.exit(1 if failed else 0)
PY
echo "soak: samples in $samples"
