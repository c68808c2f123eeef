#!/usr/bin/env bash
# Encoded updates (docs/SEMANTICS.md section 11) through a root and two intermediate
# aggregators on loopback:
#  1. fedagg-loadgen sends quantized (8 bits, rotated; 2 bits in blocks of 64, weighted) and
#     discretized fields through both intermediates, with streams cut mid-update and acks
#     dropped; its check holds the root's result to the float64 reference of what was sent,
#     decoded, and every client is counted once; then the sparse family's encoded values
#     the same way;
#  2. fedagg-client creates with --encoding and submits .npy files through an intermediate
#     and the root: values that are whole steps of a discretized field's scale round to
#     themselves, so the result is known exactly, in each field's declared dtype; a value
#     beyond the field's 16-bit range is refused by the client (exit 2), and an encoded
#     federated_max by the server when it is created (exit 1, INVALID_ARGUMENT);
#  3. a root that asks for float16 partials (--child_partial_dtype=float16) gets its
#     intermediate's sums rounded to float16.
# Usage: encoded_tree_test.sh FEDAGG_SERVER FEDAGG_LOADGEN FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 LOADGEN=$2 CLIENT=$3
e2e_start_tree "$SERVER"

N=120
"$LOADGEN" --json --control="127.0.0.1:$ROOT" --servers="127.0.0.1:$I1,127.0.0.1:$I2" \
    --clients=$N --concurrency=32 --channels=2 --chunk_kib=4 \
    --type='<w=float32[64,64],b=float32[300],c=float32[1000],n=int64[10]>' \
    --intrinsics='federated_mean@quantized:8+rotation:1024,federated_weighted_mean@quantized:2/64,federated_sum@discretized:16@0.01,federated_sum' \
    --disconnect_fraction=0.1 --lost_ack_fraction=0.1 >"$E2E_DIR/run.json"
cat "$E2E_DIR/run.json"
python3 - "$E2E_DIR/run.json" $N <<'PY'
import json, sys
r, n = json.load(open(sys.argv[1])), int(sys.argv[2])
u = r["updates"]
assert r["passed"] is True, "the load generator's check did not pass"
c = r["checks"][0]
assert c["contributions"] == n and c["expected_contributions"] == n, c
assert [x["path"] for x in c["fields"]] == ["w", "b", "c", "n"], c["fields"]
assert all(x["max_relative_error"] <= x["tolerance"] for x in c["fields"]), c["fields"]
assert u["counted"] == n and u["refused"] == 0, u
# On the wire: 4096 + 32 codes bytes + 16 scales (w), 75 + 20 (b), 2000 (c), 80 (n); the
# model is 4 bytes a float32 coordinate.
assert r["payload_bytes_per_update"] == 4096 + 16 * 4 + 75 + 5 * 4 + 2000 + 80, r["payload_bytes_per_update"]
assert r["model_bytes_per_update"] == 4 * (4096 + 300 + 1000) + 80, r["model_bytes_per_update"]
print("encoded loadgen run through the tree: OK")
PY

# The sparse family's values encoded, their indices exact (quantized, rotated quantized
# and discretized, with counts), through both intermediates, streams cut and acks lost.
"$LOADGEN" --json --control="127.0.0.1:$ROOT" --servers="127.0.0.1:$I1,127.0.0.1:$I2" \
    --clients=$N --concurrency=32 --channels=2 --chunk_kib=4 --density=0.05 \
    --type='<s=float32[5000],r=float32[200,8],u=float64[3000]>' \
    --intrinsics='sparse_mean+counts@quantized:8/64,row_sparse_sum@discretized:16@0.01,sparse_sum_sparse+counts@quantized:4+rotation:64' \
    --disconnect_fraction=0.1 --lost_ack_fraction=0.1 >"$E2E_DIR/sparse.json"
cat "$E2E_DIR/sparse.json"
python3 - "$E2E_DIR/sparse.json" $N <<'PY'
import json, sys
r, n = json.load(open(sys.argv[1])), int(sys.argv[2])
assert r["passed"] is True, "the load generator's check did not pass"
c = r["checks"][0]
assert c["contributions"] == n and c["expected_contributions"] == n, c
assert all(x["max_relative_error"] <= x["tolerance"] for x in c["fields"]), c["fields"]
# 250 entries of s: 8-byte indices, 4 scales, 250 codes; 10 rows of r: ids, 80 int16; 150
# entries of u: ids, a scale (blocks of 256), 75 bytes of 4-bit codes.
assert r["payload_bytes_per_update"] == 250 * 8 + 16 + 250 + 10 * 8 + 160 + 150 * 8 + 4 + 75, r
print("encoded sparse loadgen run through the tree: OK")
PY

CLI=("$CLIENT" --server="127.0.0.1:$ROOT")
"${CLI[@]}" create enc --type='<x=float32[4],y=float64[3]>' --intrinsics=federated_sum,federated_mean \
    --encoding='discretized:16@0.25' --min_contributions=2
e2e_wait_mirrored "$CLIENT" "$I1" enc
/usr/bin/python3 - "$E2E_DIR" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
np.save(f"{d}/x1.npy", np.float32([0.25, -1.5, 2.0, 100.0]))
np.save(f"{d}/y1.npy", np.float64([1.0, 0.5, -0.75]))
np.save(f"{d}/x2.npy", np.float32([0.5, 1.5, -2.0, 0.0]))
np.save(f"{d}/y2.npy", np.float64([3.0, 0.25, 0.75]))
np.save(f"{d}/big.npy", np.float32([0.0, 0.0, 0.0, 9000.0]))  # 36000 steps: beyond int16
PY
"$CLIENT" --server="127.0.0.1:$I1" submit enc --client_id=a x="$E2E_DIR/x1.npy" y="$E2E_DIR/y1.npy"
"${CLI[@]}" submit enc --client_id=b --encoding_seed=7 x="$E2E_DIR/x2.npy" y="$E2E_DIR/y2.npy"
set +e
"${CLI[@]}" submit enc --client_id=c x="$E2E_DIR/big.npy" y="$E2E_DIR/y2.npy" 2>"$E2E_DIR/big.err"
big=$?
"${CLI[@]}" create enc-max --type='<x=float32[4]>' --intrinsics='federated_max@quantized:8' 2>"$E2E_DIR/max.err"
max=$?
set -e
echo "beyond the 16-bit range: exit $big ($(cat "$E2E_DIR/big.err"))"
echo "federated_max encoded: exit $max ($(cat "$E2E_DIR/max.err"))"
[ "$big" = 2 ] && grep -q "outside the 16-bit range" "$E2E_DIR/big.err"
[ "$max" = 1 ] && grep -q "INVALID_ARGUMENT" "$E2E_DIR/max.err" && grep -q "maximum or minimum" "$E2E_DIR/max.err"
"${CLI[@]}" seal enc && "${CLI[@]}" watch enc | tail -n 1 | grep -q FINALIZED
"${CLI[@]}" result enc --out="$E2E_DIR/out"
/usr/bin/python3 - "$E2E_DIR/out" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
x, y = np.load(f"{d}/x.npy"), np.load(f"{d}/y.npy")
print("x:", x.tolist(), "y:", y.tolist())
assert x.dtype == np.float32 and x.tolist() == [0.75, 0.0, 0.0, 100.0], x
assert y.dtype == np.float64 and y.tolist() == [2.0, 0.375, 0.0], y
PY

# 3. A parent that asks its children for float16 partials (--child_partial_dtype): what an
#    intermediate pushes up is its float32 sums rounded to float16, so a root that counted
#    nothing else reports values float16 holds exactly, within float16's rounding of the sum.
R16=$((E2E_BASE + 3)) M16=$((E2E_BASE + 4))
e2e_start_server "$SERVER" root-f16 "$R16" $((R16 + 5)) --child_partial_dtype=float16
# It pushes once, its final delta at the seal: both updates in one float16 partial.
e2e_start_server "$SERVER" mid-f16 "$M16" $((M16 + 5)) --parent="127.0.0.1:$R16" --forward_interval_ms=600000
"$CLIENT" --server="127.0.0.1:$R16" create f16 --type='<x=float32[1000]>' --intrinsics=federated_sum --min_contributions=2
e2e_wait_mirrored "$CLIENT" "$M16" f16
/usr/bin/python3 - "$E2E_DIR" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(5)
for i in range(2):
    np.save(f"{sys.argv[1]}/f{i}.npy", (rng.normal(size=1000) / 3).astype(np.float32))
PY
for i in 0 1; do "$CLIENT" --server="127.0.0.1:$M16" submit f16 --client_id="c$i" x="$E2E_DIR/f$i.npy"; done
"$CLIENT" --server="127.0.0.1:$R16" seal f16 && "$CLIENT" --server="127.0.0.1:$R16" watch f16 | tail -n 1 | grep -q FINALIZED
"$CLIENT" --server="127.0.0.1:$R16" result f16 --out="$E2E_DIR/f16"
/usr/bin/python3 - "$E2E_DIR" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
x = np.load(f"{d}/f16/x.npy")
exact = np.load(f"{d}/f0.npy").astype(np.float32) + np.load(f"{d}/f1.npy").astype(np.float32)
assert x.dtype == np.float32
assert np.array_equal(x, x.astype(np.float16).astype(np.float32)), "the partial did not travel in float16"
assert np.array_equal(x, exact.astype(np.float16).astype(np.float32)), np.max(np.abs(x - exact))
assert not np.array_equal(x, exact), "float16 rounding should show"
print("float16 partials: the root's sum is the intermediate's, rounded to float16: OK")
PY
echo "encoded tree e2e: PASSED"
