#!/usr/bin/env bash
# Soak test: a root and two intermediate aggregators on loopback, driven by fedagg-loadgen
# for a set time, round after round, with client faults on (streams cut mid-update, acks
# lost and the update sent again under the same client id, slow senders).
#   scripts/soak.sh [MINUTES]   (default 30; the report goes to build/soak/)
# After every batch of rounds it checks that the load generator's own result check passed
# and that every client was counted exactly once with none refused (no acknowledged update
# lost, none counted twice), and samples each server's resident memory (VmRSS) and open
# file descriptors. At the end: resident memory must be flat after warm-up (the largest
# sample of the last third at most 10% + 16 MiB above the largest of the first third after
# warm-up) and descriptors must not grow (last sample at most 16 above the warm-up's
# largest). Finished aggregations are retained 20 at a time (--retain_finished=20) so the
# steady state is reached within the warm-up; what remains is what leaks.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-30}"

./scripts/build.sh default fedagg-server fedagg-loadgen >/dev/null
REPORT_DIR=$PWD/build/soak
mkdir -p "$REPORT_DIR"
source tests/e2e/e2e_lib.sh
# Copies, so a rebuild during the run does not pull the binaries away under it.
cp build/service/fedagg-server build/client_stub/fedagg-loadgen "$E2E_DIR/"
SERVER=$E2E_DIR/fedagg-server LOADGEN=$E2E_DIR/fedagg-loadgen

ROOT=$E2E_BASE
COMMON=(--flush_interval_ms=20 --retain_finished=20)
e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5)) "${COMMON[@]}"
e2e_start_server "$SERVER" mid-a $((ROOT + 1)) $((ROOT + 6)) --parent="127.0.0.1:$ROOT" "${COMMON[@]}" --forward_interval_ms=50
e2e_start_server "$SERVER" mid-b $((ROOT + 2)) $((ROOT + 7)) --parent="127.0.0.1:$ROOT" "${COMMON[@]}" --forward_interval_ms=50
names=(root mid-a mid-b)
pids=("${E2E_PIDS[@]}")

CLIENTS=300 ROUNDS=5
samples=$REPORT_DIR/samples.csv
echo "elapsed_s,batch,server,rss_kib,fds" >"$samples"
start=$(date +%s) end=$(( $(date +%s) + minutes * 60 )) batch=0 updates=0
while [ "$(date +%s)" -lt "$end" ]; do
  batch=$((batch + 1))
  "$LOADGEN" --json --control="127.0.0.1:$ROOT" --servers="127.0.0.1:$((ROOT + 1)),127.0.0.1:$((ROOT + 2))" \
      --id_prefix="soak-$batch" --rounds=$ROUNDS --clients=$CLIENTS --concurrency=64 --channels=2 \
      --seed=$batch --type='<dense=float32[128,32],emb=float32[2000,16],tok=int64[20000]>' \
      --intrinsics=federated_weighted_mean,row_sparse_sum,sparse_sum_sparse+counts --density=1,0.01,0.002 \
      --chunk_kib=16 --disconnect_fraction=0.05 --lost_ack_fraction=0.05 --slow_fraction=0.02 \
      --slow_delay_ms=2 >"$E2E_DIR/batch.json"
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

/usr/bin/python3 - "$samples" "$minutes" "$updates" <<'PY' | tee "$REPORT_DIR/summary.txt"
import csv, sys
rows, minutes, updates = list(csv.DictReader(open(sys.argv[1]))), sys.argv[2], int(sys.argv[3])
batches = max(int(r["batch"]) for r in rows)
assert batches >= 6, f"only {batches} batches ran: run longer"
warm = max(2, batches // 10)  # the first tenth warms up (caches, gRPC buffers, retention)
print(f"soak: {minutes} min, {batches} batches, {updates} updates counted exactly once, "
      f"every result checked; warm-up = first {warm} batches")
failed = False
for server in ("root", "mid-a", "mid-b"):
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
