#!/usr/bin/env bash
# fedagg-client against a live server: create, submit from .npy files (dense and sparse),
# refusals with their exit codes, seal, watch, and the result written as .npy files that
# are read back and checked (npy / npy_read from e2e_lib.sh); the same with .npz archives.
# Usage: cli_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
PORT=$E2E_BASE
e2e_start_server "$SERVER" root "$PORT" $((PORT + 5))
cli() { "$CLIENT" --server="127.0.0.1:$PORT" "$@"; }

cli create r1 --type='<w=float32[3],tokens=int64[10]>' \
    --intrinsics=federated_mean,sparse_sum_sparse+counts --min_contributions=2
npy "$E2E_DIR/w1.npy" "<f4" "1,2,3";   npy "$E2E_DIR/w2.npy" "<f4" "3,4,5"
npy "$E2E_DIR/i1.npy" "<i8" "7,2";     npy "$E2E_DIR/v1.npy" "<i8" "10,20"
npy "$E2E_DIR/i2.npy" "<i8" "2";       npy "$E2E_DIR/v2.npy" "<i8" "5"
cli submit r1 --client_id=a w="$E2E_DIR/w1.npy" tokens.indices="$E2E_DIR/i1.npy" tokens.values="$E2E_DIR/v1.npy"
cli --json submit r1 --client_id=b w="$E2E_DIR/w2.npy" tokens.indices="$E2E_DIR/i2.npy" tokens.values="$E2E_DIR/v2.npy" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["contributions"] == 2, d'

# Refusals: the same client again (server: exit 1), a missing file (local: exit 2).
set +e
cli submit r1 --client_id=a w="$E2E_DIR/w1.npy" tokens.indices="$E2E_DIR/i1.npy" tokens.values="$E2E_DIR/v1.npy" 2>"$E2E_DIR/dup.err"
dup=$?
cli submit r1 --client_id=c w="$E2E_DIR/missing.npy" 2>"$E2E_DIR/missing.err"
missing=$?
set -e
echo "duplicate submit: exit $dup ($(cat "$E2E_DIR/dup.err"))"
echo "missing file: exit $missing ($(cat "$E2E_DIR/missing.err"))"
[ "$dup" = 1 ] && grep -q ALREADY_EXISTS "$E2E_DIR/dup.err"
[ "$missing" = 2 ] && grep -q "missing.npy" "$E2E_DIR/missing.err"

# Casts to the declared dtype (client_stub/dtype_cast.h): float64 values for the float32
# field, one of which (0.1) float32 cannot hold, are refused (exit 2) unless
# --allow_lossy_cast; the int32 sparse values go to the int64 field without asking.
cli create r3 --type='<w=float32[3],tokens=int64[10]>' --intrinsics=federated_sum,sparse_sum --min_contributions=1
npy "$E2E_DIR/w64.npy" "<f8" "0.1,2,3";  npy "$E2E_DIR/v32.npy" "<i4" "10,20"
set +e
cli submit r3 --client_id=a w="$E2E_DIR/w64.npy" tokens.indices="$E2E_DIR/i1.npy" tokens.values="$E2E_DIR/v32.npy" 2>"$E2E_DIR/lossy.err"
lossy=$?
set -e
echo "float64 for a float32 field: exit $lossy ($(cat "$E2E_DIR/lossy.err"))"
[ "$lossy" = 2 ] && grep -q "field 'w' values (w) is float64 but the field declares float32: element 0 (0.1) would become" "$E2E_DIR/lossy.err"
cli submit r3 --client_id=a --allow_lossy_cast w="$E2E_DIR/w64.npy" tokens.indices="$E2E_DIR/i1.npy" tokens.values="$E2E_DIR/v32.npy"
cli seal r3 && cli watch r3 | tail -n 1 | grep -q FINALIZED
cli result r3 --out="$E2E_DIR/out/r3"
/usr/bin/python3 - "$E2E_DIR/out/r3" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
w, tokens = np.load(f"{d}/w.npy"), np.load(f"{d}/tokens.npy")
print("r3:", w.tolist(), tokens.tolist())
assert w.dtype == np.float32 and w.tolist() == np.float32([0.1, 2, 3]).tolist()
assert tokens.tolist() == [0, 0, 20, 0, 0, 0, 0, 10, 0, 0]
PY

# A deterministic aggregation sums exactly: 1e8 + 1 - 1e8 is 1 (a float32 accumulator,
# adding in this order, loses the 1).
cli create r-det --type='<x=float32[1]>' --intrinsics=federated_sum --deterministic
npy "$E2E_DIR/big.npy" "<f4" "100000000"; npy "$E2E_DIR/one.npy" "<f4" "1"; npy "$E2E_DIR/minus.npy" "<f4" "-100000000"
cli submit r-det --client_id=a x="$E2E_DIR/big.npy"
cli submit r-det --client_id=b x="$E2E_DIR/one.npy"
cli submit r-det --client_id=c x="$E2E_DIR/minus.npy"
cli seal r-det && cli watch r-det | tail -n 1 | grep -q FINALIZED
cli result r-det --out="$E2E_DIR/out/r-det"
det=$(npy_read "$E2E_DIR/out/r-det/x.npy")
echo "deterministic 1e8 + 1 - 1e8: $det"
[ "$det" = 1 ]

cli seal r1
cli watch r1 | tail -n 1 | grep -q FINALIZED
cli --json status r1 | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["state"] == "FINALIZED" and d["contributions"] == "2", d'
# --out names a directory that does not exist yet: it is created.
cli result r1 --out="$E2E_DIR/out/r1"
w=$(npy_read "$E2E_DIR/out/r1/w.npy"); idx=$(npy_read "$E2E_DIR/out/r1/tokens.indices.npy")
vals=$(npy_read "$E2E_DIR/out/r1/tokens.npy"); counts=$(npy_read "$E2E_DIR/out/r1/tokens.counts.npy")
echo "w=$w tokens: indices=$idx values=$vals counts=$counts"
[ "$w" = "2,3,4" ] && [ "$idx" = "2,7" ] && [ "$vals" = "25,10" ] && [ "$counts" = "2,1" ]

# .npz: one numpy.savez archive carries every field of an update (members FIELD,
# FIELD.indices, FIELD.values); the result is written as one archive and read back with
# NumPy; a numpy.savez_compressed archive is refused as local input (exit 2).
cli create r2 --type='<w=float32[3],tokens=int64[10]>' \
    --intrinsics=federated_mean,sparse_sum_sparse+counts --min_contributions=2
/usr/bin/python3 - "$E2E_DIR" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
u1 = {"w": np.float32([1, 2, 3]), "tokens.indices": np.int64([7, 2]), "tokens.values": np.int64([10, 20])}
u2 = {"w": np.float32([3, 4, 5]), "tokens.indices": np.int64([2]), "tokens.values": np.int64([5])}
np.savez(f"{d}/u1.npz", **u1)
np.savez(f"{d}/u2.npz", **u2)
np.savez_compressed(f"{d}/u2z.npz", **u2)
PY
cli submit r2 --client_id=a "$E2E_DIR/u1.npz"
set +e
cli submit r2 --client_id=b "$E2E_DIR/u2z.npz" 2>"$E2E_DIR/compressed.err"
compressed=$?
set -e
echo "compressed .npz: exit $compressed ($(cat "$E2E_DIR/compressed.err"))"
[ "$compressed" = 2 ] && grep -q "numpy.savez_compressed" "$E2E_DIR/compressed.err"
cli submit r2 --client_id=b "$E2E_DIR/u2.npz"
cli seal r2
cli watch r2 | tail -n 1 | grep -q FINALIZED
# An archive in a directory that does not exist: refused locally (exit 2), saying so.
set +e
cli result r2 --out="$E2E_DIR/nowhere/r2.npz" 2>"$E2E_DIR/nowhere.err"
nowhere=$?
set -e
echo "archive in a missing directory: exit $nowhere ($(cat "$E2E_DIR/nowhere.err"))"
[ "$nowhere" = 2 ] && grep -q "NOT_FOUND.*nowhere/r2.npz.*create its directory first" "$E2E_DIR/nowhere.err"
cli result r2 --out="$E2E_DIR/r2.npz"
/usr/bin/python3 - "$E2E_DIR/r2.npz" <<'PY'
import sys
import numpy as np
with np.load(sys.argv[1]) as r:
    print("r2.npz:", {k: r[k].tolist() for k in r.files})
    assert sorted(r.files) == ["tokens", "tokens.counts", "tokens.indices", "w"], r.files
    assert r["w"].dtype == np.float32 and r["w"].tolist() == [2, 3, 4]
    assert r["tokens.indices"].tolist() == [2, 7] and r["tokens"].tolist() == [25, 10]
    assert r["tokens.counts"].tolist() == [2, 1]
PY

# Sparse is transparent (client_stub/encoding_conversion.h): any field takes a dense array,
# an indices/values pair or a row_ids/rows pair, and is sent as it declares. Client a sends
# the dense field as a COO pair with a repeat, the row-sparse one and the sparse_mean one
# dense; client b the row-sparse field as rows, the sparse_mean field as rows of one element
# (an explicit 0 counts as touched). Refused locally (exit 2): two forms for one field, and
# a name that is no field's.
cli create r4 --type='<w=float32[4],emb=float32[3,2],ids=float32[5],grid=float32[2,2]>' \
    --intrinsics=federated_sum,row_sparse_sum+counts,sparse_mean,sparse_sum+counts --min_contributions=2
/usr/bin/python3 - "$E2E_DIR" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
np.save(f"{d}/a_w_i.npy", np.int64([3, 0, 3])); np.save(f"{d}/a_w_v.npy", np.float32([1, 2, 4]))
np.save(f"{d}/a_emb.npy", np.float32([[0, 0], [1, 2], [0, 0]]))
np.save(f"{d}/a_ids.npy", np.float32([0, 3, 0, 0, 6]))
np.save(f"{d}/a_grid.npy", np.float32([[1, 0], [0, 2]]))
np.savez(f"{d}/b.npz", **{"w": np.float32([1, 1, 1, 1]), "emb.row_ids": np.int64([2]),
                          "emb.rows": np.float32([[5, 6]]), "ids.row_ids": np.int64([1, 4]),
                          "ids.rows": np.float32([5, 0]), "grid.indices": np.int64([3]),
                          "grid.values": np.float32([1])})
PY
set +e
cli submit r4 --client_id=a w="$E2E_DIR/a_w_v.npy" w.indices="$E2E_DIR/a_w_i.npy" w.values="$E2E_DIR/a_w_v.npy" \
    emb="$E2E_DIR/a_emb.npy" ids="$E2E_DIR/a_ids.npy" grid="$E2E_DIR/a_grid.npy" 2>"$E2E_DIR/twice.err"
twice=$?
set -e
echo "a field given twice: exit $twice ($(cat "$E2E_DIR/twice.err"))"
[ "$twice" = 2 ] && grep -q "field 'w' is given both as w and as w.values; give one" "$E2E_DIR/twice.err"
set +e
cli submit r4 --client_id=a w.indices="$E2E_DIR/a_w_i.npy" w.values="$E2E_DIR/a_w_v.npy" \
    emb="$E2E_DIR/a_emb.npy" ids="$E2E_DIR/a_ids.npy" grid="$E2E_DIR/a_grid.npy" id="$E2E_DIR/a_ids.npy" \
    2>"$E2E_DIR/typo.err"
typo=$?
set -e
echo "a name of no field: exit $typo ($(cat "$E2E_DIR/typo.err"))"
[ "$typo" = 2 ] && grep -q "'id' names no field of aggregation 'r4'" "$E2E_DIR/typo.err"
cli submit r4 --client_id=a w.indices="$E2E_DIR/a_w_i.npy" w.values="$E2E_DIR/a_w_v.npy" \
    emb="$E2E_DIR/a_emb.npy" ids="$E2E_DIR/a_ids.npy" grid="$E2E_DIR/a_grid.npy"
cli submit r4 --client_id=b "$E2E_DIR/b.npz"
cli seal r4 && cli watch r4 | tail -n 1 | grep -q FINALIZED
cli result r4 --out="$E2E_DIR/r4.npz"
/usr/bin/python3 - "$E2E_DIR/r4.npz" <<'PY'
import sys
import numpy as np
with np.load(sys.argv[1]) as r:
    print("r4.npz:", {k: r[k].tolist() for k in r.files})
    assert r["w"].tolist() == [3, 1, 1, 6]
    assert r["emb"].tolist() == [[0, 0], [1, 2], [5, 6]]
    assert r["ids"].tolist() == [0, 4, 0, 0, 3]
    assert r["grid"].tolist() == [[1, 0], [0, 3]]
    # Counts as the Python package gives them: per coordinate in the field's shape, per row.
    assert r["grid.counts"].shape == (2, 2) and r["grid.counts"].tolist() == [[1, 0], [0, 2]]
    assert r["emb.counts"].shape == (3,) and r["emb.counts"].tolist() == [0, 1, 1]
PY
