#!/usr/bin/env bash
# Secure aggregation (docs/SEMANTICS.md section 13) through a root and two intermediate
# aggregators on loopback, with the programs people run:
#  1. fedagg-loadgen: 400 clients in cohorts of up to 50 at the intermediates, 5-7% leaving
#     at each stage (before sharing, before their masked update, before unmasking); its
#     check holds the root's unmasked result to the exact sum of the counted clients'
#     discretized updates, and the contributions to the clients that did not leave before
#     their update counted;
#  2. the same through nginx balancing by connection (docker/nginx.conf's way);
#  3. fedagg-client: `create --secure` and four concurrent `submit`s to the root (a root
#     that takes clients itself runs their cohort, and finalizes once it is complete), the
#     result equal to the NumPy sum of their whole-step values;
#  4. a spec that cannot be secure is refused at creation (exit 1, INVALID_ARGUMENT).
# Usage: secure_tree_test.sh FEDAGG_SERVER FEDAGG_LOADGEN FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 LOADGEN=$2 CLIENT=$3
e2e_start_tree "$SERVER"

N=400
"$LOADGEN" --json --control="127.0.0.1:$ROOT" --servers="127.0.0.1:$I1,127.0.0.1:$I2" \
    --clients=$N --concurrency=$N --channels=2 --type='<w=float32[2000],b=float32[10]>' \
    --intrinsics='federated_sum,federated_mean' --encoding='discretized:32@0.001' \
    --secure='cohort=50,min=10,timeout_ms=30000' \
    --leave_before_sharing=0.05 --leave_before_input=0.06 --leave_before_unmasking=0.07 >"$E2E_DIR/run.json"
cat "$E2E_DIR/run.json"
python3 - "$E2E_DIR/run.json" $N <<'PY'
import json, sys
r, n = json.load(open(sys.argv[1])), int(sys.argv[2])
assert r["passed"] is True, "the load generator's check did not pass"
# The load generator's picks (workload.cc): client i is picked for fraction f when
# floor((i + 1) f) > floor(i f); one picked twice leaves at the earlier stage.
picks = lambda f, i: int((i + 1) * f) > int(i * f)
left = sum(1 for i in range(n) if picks(0.05, i) or picks(0.06, i))
assert r["faults"]["left_before_counted"] == left, (r["faults"], left)
c = r["checks"][0]
assert c["contributions"] == n - left == c["expected_contributions"], c
print("secure loadgen run through the tree: OK,", c["contributions"], "updates unmasked at the root")
PY

# Through nginx balancing by connection (as docker/nginx.conf does): each client's cohort
# stream and masked update reach one intermediate.
LB=$((E2E_BASE + 9))
E2E_NGINX_BY_CONNECTION=1 e2e_start_nginx "$LB" "$I1" "$I2"
"$LOADGEN" --json --control="127.0.0.1:$ROOT" --servers="127.0.0.1:$LB" --clients=100 --concurrency=100 --channels=4 \
    --type='<w=float32[1000]>' --encoding='discretized:32@0.001' --secure='cohort=25,min=5,timeout_ms=30000' \
    --id_prefix=through-nginx >"$E2E_DIR/nginx.json"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['passed'] is True, r; print('secure through nginx: OK')" \
    "$E2E_DIR/nginx.json"

# fedagg-client: four clients of one cohort at the root.
"$CLIENT" --server="127.0.0.1:$ROOT" create cli-secure --type='<w=float32[6]>' --intrinsics=federated_sum \
    --encoding='discretized:16@0.5' --secure='cohort=4,timeout_ms=30000' --min_contributions=4
/usr/bin/python3 - "$E2E_DIR" <<'PY'  # Debian's python3-numpy
import numpy as np, sys
for c in range(4):
    np.save(f"{sys.argv[1]}/u{c}.npy", (np.arange(6, dtype=np.float32) - 2 + c) * np.float32(0.5))
PY
pids=()
for c in 0 1 2 3; do
  "$CLIENT" --server="127.0.0.1:$ROOT" --client_id="cli-$c" submit cli-secure "w=$E2E_DIR/u$c.npy" \
      >"$E2E_DIR/submit-$c.txt" 2>&1 &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
cat "$E2E_DIR"/submit-*.txt
[ "$failed" -eq 0 ]
"$CLIENT" --server="127.0.0.1:$ROOT" seal cli-secure >/dev/null
"$CLIENT" --server="127.0.0.1:$ROOT" result cli-secure --out="$E2E_DIR/result.npz"
/usr/bin/python3 - "$E2E_DIR" <<'PY'
import numpy as np, sys
d = sys.argv[1]
expected = sum(np.load(f"{d}/u{c}.npy").astype(np.float64) for c in range(4))
got = np.load(f"{d}/result.npz")["w"]
assert np.array_equal(got, expected.astype(np.float32)), (got, expected)
print("fedagg-client secure submits at the root: OK", got)
PY

set +e
"$CLIENT" --server="127.0.0.1:$ROOT" create not-secure-able --type='<w=float32[6]>' --intrinsics=federated_sum \
    --secure=on >"$E2E_DIR/refused.txt" 2>&1
rc=$?
set -e
cat "$E2E_DIR/refused.txt"
[ "$rc" -eq 1 ] && grep -q "DISCRETIZED" "$E2E_DIR/refused.txt"
echo "secure aggregation through the tree: OK"
