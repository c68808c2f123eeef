#!/usr/bin/env bash
# Differential privacy (docs/SEMANTICS.md section 12) through a root and two intermediate
# aggregators on loopback:
#  1. fedagg-loadgen sends a dense mean, a sparse sum, a discretized sum (clipped by its
#     clients, as the protocol requires) and a rotated quantized mean (clipped through its
#     block scales) through both intermediates, streams cut and acks
#     lost; its check clips the reference as the servers do, matches the root's clipped
#     count, and holds each field's noise to mean 0 and the reported standard deviation
#     (six standard errors): noise added once, at the root, whatever the retries;
#  2. adaptive clipping: the root's status reports the noised unclipped fraction and the
#     next bound, and fedagg-client prints them; bad privacy specs are refused at creation
#     (exit 1, INVALID_ARGUMENT);
#  3. a root with --checkpoint_dir killed (SIGKILL) after it published a private result
#     and restarted: it publishes the same result, to the bit (the checkpoint holds the
#     noise key), never a second draw.
# Usage: privacy_tree_test.sh FEDAGG_SERVER FEDAGG_LOADGEN FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 LOADGEN=$2 CLIENT=$3
e2e_start_tree "$SERVER"

N=120
"$LOADGEN" --json --control="127.0.0.1:$ROOT" --servers="127.0.0.1:$I1,127.0.0.1:$I2" \
    --clients=$N --concurrency=32 --channels=2 --chunk_kib=4 --density=0.05 \
    --type='<w=float32[4000],s=float32[5000],d=float32[3000],q=float32[4096]>' \
    --intrinsics='federated_mean,sparse_sum,federated_sum@discretized:16@0.001,federated_mean@quantized:8+rotation:1024' \
    --privacy='clip=2,z=1.5,clients=100' \
    --disconnect_fraction=0.1 --lost_ack_fraction=0.1 >"$E2E_DIR/run.json"
cat "$E2E_DIR/run.json"
python3 - "$E2E_DIR/run.json" $N <<'PY'
import json, sys
r, n = json.load(open(sys.argv[1])), int(sys.argv[2])
assert r["passed"] is True, "the load generator's check did not pass"
c = r["checks"][0]
assert c["contributions"] == n and c["expected_contributions"] == n, c
for f in c["fields"]:
    assert f["reported_noise_stddev"] >= 3.0 and abs(f["noise_stddev"] / f["reported_noise_stddev"] - 1) <= f["tolerance"], f
print("private loadgen run through the tree: OK")
PY

# Adaptive clipping: 40 clients of norm 32 (clipped at 1), the next bound moves down.
"$LOADGEN" --json --control="127.0.0.1:$ROOT" --servers="127.0.0.1:$I1,127.0.0.1:$I2" \
    --clients=40 --type='<w=float64[1024]>' --intrinsics=federated_mean --id_prefix=adaptive \
    --privacy='clip=1,z=1,clients=40,quantile=0.5' >"$E2E_DIR/adaptive.json"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['passed'] is True, r" "$E2E_DIR/adaptive.json"
ID=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['aggregation_ids'][0])" "$E2E_DIR/adaptive.json")
"$CLIENT" --server="127.0.0.1:$ROOT" status "$ID" | tee "$E2E_DIR/adaptive.txt"
grep -q "clipped_updates=40 unclipped_fraction=" "$E2E_DIR/adaptive.txt"
"$CLIENT" --server="127.0.0.1:$ROOT" --json status "$ID" >"$E2E_DIR/adaptive-status.json"
python3 - "$E2E_DIR/adaptive-status.json" <<'PY'
import json, math, sys
p = json.load(open(sys.argv[1]))["privacy"]
p.setdefault("unclipped_fraction", 0.0)  # proto JSON leaves zeros out
# 0 of 40 unclipped, the centred count -20 noised with sd 2: the fraction is within 0.3 of 0.
assert 0 <= p["unclipped_fraction"] <= 0.3, p
assert abs(p["next_clip_norm"] - math.exp(-0.2 * (p["unclipped_fraction"] - 0.5))) < 1e-12, p
print("adaptive clipping's next bound: OK", p["next_clip_norm"])
PY
for bad in 'clip=0,z=1,clients=10' 'clip=1,z=-1,clients=10' 'clip=1,z=1,clients=10,quantile=1.5'; do
  set +e
  "$CLIENT" --server="127.0.0.1:$ROOT" create bad --type='<w=float32[4]>' --intrinsics=federated_mean \
      --privacy="$bad" 2>"$E2E_DIR/bad.txt"
  rc=$?
  set -e
  [ "$rc" = 1 ] && grep -q INVALID_ARGUMENT "$E2E_DIR/bad.txt" || { echo "privacy '$bad': rc $rc"; cat "$E2E_DIR/bad.txt"; exit 1; }
done

# A checkpointed root, killed after publishing and restarted: the same result.
CK=$((E2E_BASE + 3))
mkdir -p "$E2E_DIR/checkpoints"
e2e_start_server "$SERVER" checkpointed "$CK" $((CK + 5)) --checkpoint_dir="$E2E_DIR/checkpoints" --checkpoint_interval=100ms
"$LOADGEN" --json --control="127.0.0.1:$CK" --clients=20 --type='<w=float32[2000]>' --intrinsics=federated_mean \
    --id_prefix=restart --privacy='clip=1,z=1,clients=20' >"$E2E_DIR/restart.json"
ID=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['passed'] is True, r; print(r['aggregation_ids'][0])" \
    "$E2E_DIR/restart.json")
"$CLIENT" --server="127.0.0.1:$CK" result "$ID" --out="$E2E_DIR/before.npz" >/dev/null
kill -9 "${E2E_PIDS[-1]}"
e2e_start_server "$SERVER" checkpointed-again "$CK" $((CK + 5)) --checkpoint_dir="$E2E_DIR/checkpoints"
"$CLIENT" --server="127.0.0.1:$CK" result "$ID" --out="$E2E_DIR/after.npz" >/dev/null
cmp "$E2E_DIR/before.npz" "$E2E_DIR/after.npz"
echo "a restarted root publishes the same private result: OK"
