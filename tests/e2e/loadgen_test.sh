#!/usr/bin/env bash
# fedagg-loadgen against a real root + two intermediate aggregators on loopback, with every
# fault on: streams cut mid-update, acks dropped and the update sent again with the same
# client id, slow senders. Asserts that the load generator's own result check passed
# (dense, sparse and row-sparse fields; integer sums exact) and that its counts are right:
# every client counted exactly once, none refused, each fault played on exactly
# floor(N * fraction) clients. Then a wrong expectation must fail: a run that joins an
# aggregation someone else already contributed to reports a mismatch and exits 1.
# Usage: loadgen_test.sh FEDAGG_SERVER FEDAGG_LOADGEN FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 LOADGEN=$2 CLIENT=$3
ROOT=$E2E_BASE
e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5)) --flush_interval_ms=20
e2e_start_server "$SERVER" mid-a $((ROOT + 1)) $((ROOT + 6)) --parent="127.0.0.1:$ROOT" --forward_interval_ms=50
e2e_start_server "$SERVER" mid-b $((ROOT + 2)) $((ROOT + 7)) --parent="127.0.0.1:$ROOT" --forward_interval_ms=50

N=200
"$LOADGEN" --json --control="127.0.0.1:$ROOT" --servers="127.0.0.1:$((ROOT + 1)),127.0.0.1:$((ROOT + 2))" \
    --clients=$N --concurrency=64 --channels=2 \
    --type='<dense=float32[64,16],emb=float32[500,8],tok=int64[4000],hits=int32[100]>' \
    --intrinsics=federated_weighted_mean,row_sparse_mean+counts,sparse_sum_sparse+counts,federated_sum \
    --density=1,0.02,0.005,1 --chunk_kib=1 \
    --disconnect_fraction=0.1 --lost_ack_fraction=0.1 --slow_fraction=0.05 --slow_delay_ms=5 \
    >"$E2E_DIR/run.json"
cat "$E2E_DIR/run.json"
python3 - "$E2E_DIR/run.json" $N <<'PY'
import json, sys
r, n = json.load(open(sys.argv[1])), int(sys.argv[2])
u, f = r["updates"], r["faults"]
assert r["passed"] is True, "the load generator's check did not pass"
assert len(r["checks"]) == 1 and r["checks"][0]["passed"], r["checks"]
c = r["checks"][0]
assert c["contributions"] == n and c["expected_contributions"] == n, c
assert [x["path"] for x in c["fields"]] == ["dense", "emb", "tok", "hits"], c["fields"]
assert c["fields"][2]["tolerance"] == 0 and c["fields"][3]["tolerance"] == 0, "integer sums must be exact"
assert all(x["max_relative_error"] <= x["tolerance"] for x in c["fields"]), c["fields"]
assert u["counted"] == n and u["acked"] + u["already_counted"] == n and u["refused"] == 0, u
assert f == {"disconnects": n // 10, "lost_acks": n // 10, "slow": n // 20, "left_before_counted": 0}, f
assert r["throughput"]["updates_per_s"] > 0 and r["latency_ms"]["p50"] > 0
print("loadgen run: OK")
PY

# The check can fail: join an aggregation that already holds one update from someone
# else, so the result is not what this run sent.
CLI=("$CLIENT" --server="127.0.0.1:$ROOT")
"${CLI[@]}" create joined --type='<w=int64[4]>' --intrinsics=federated_sum >/dev/null
python3 - "$E2E_DIR/other.npy" <<'PY'
import struct, sys
header = "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }"
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
                              + struct.pack("<4q", 1, 2, 3, 4))
PY
"${CLI[@]}" submit joined --client_id=someone-else w="$E2E_DIR/other.npy" >/dev/null
rc=0
"$LOADGEN" --json --control="127.0.0.1:$ROOT" --aggregation_id=joined --clients=5 >"$E2E_DIR/joined.json" || rc=$?
cat "$E2E_DIR/joined.json"
[ "$rc" -eq 1 ] || { echo "expected exit code 1 for a wrong result, got $rc"; exit 1; }
python3 - "$E2E_DIR/joined.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["checks"][0]
assert r["passed"] is False and c["passed"] is False, r
assert c["contributions"] == 6 and c["expected_contributions"] == 5, c
print("wrong result detected: OK")
PY
echo "loadgen e2e: PASSED"
