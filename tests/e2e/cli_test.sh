#!/usr/bin/env bash
# fedagg-client against a live server: create, submit from .npy files (dense and sparse),
# refusals with their exit codes, seal, watch, and the result written as .npy files that
# are read back and checked (npy / npy_read from e2e_lib.sh).
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

cli seal r1
cli watch r1 | tail -n 1 | grep -q FINALIZED
cli --json status r1 | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["state"] == "FINALIZED" and d["contributions"] == "2", d'
mkdir -p "$E2E_DIR/out"
cli result r1 --out="$E2E_DIR/out"
w=$(npy_read "$E2E_DIR/out/w.npy"); idx=$(npy_read "$E2E_DIR/out/tokens.indices.npy")
vals=$(npy_read "$E2E_DIR/out/tokens.npy"); counts=$(npy_read "$E2E_DIR/out/tokens.counts.npy")
echo "w=$w tokens: indices=$idx values=$vals counts=$counts"
[ "$w" = "2,3,4" ] && [ "$idx" = "2,7" ] && [ "$vals" = "25,10" ] && [ "$counts" = "2,1" ]
