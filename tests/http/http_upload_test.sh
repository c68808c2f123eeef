#!/usr/bin/env bash
# The HTTP path of fedagg-server (docs/PROTOCOL.md section 4a) without a browser:
# http_upload_test.py (the standard library and NumPy, /usr/bin/python3) against four
# servers on loopback, started with e2e_lib.sh's helpers:
#   root              --http_address on its --metrics_address (one listener for both)
#   intermediate      --parent=root, --http_address of its own
#   aux-root          bearer tokens, --upload_idle_timeout=2s, --max_streams_per_identity=4,
#                     --ingest_window_mib=1, --max_update_mib=4
#   aux-intermediate  --parent=aux-root, the same tokens, idle timeout and stream limit,
#                     --memory_budget_bytes=8388608
# Aggregations are created, sealed and read back with fedagg-client too.
# Usage: http_upload_test.sh FEDAGG_SERVER FEDAGG_CLIENT [--only=WORD ...]
set -euo pipefail
source "$(dirname "$0")/../e2e/e2e_lib.sh"
SERVER=$1 CLIENT=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)

# The ten ports of this test's block.
ROOT=$E2E_BASE;               ROOT_HTTP=$((E2E_BASE + 5))   # root: HTTP = metrics
MID=$((E2E_BASE + 1));        MID_METRICS=$((E2E_BASE + 6)); MID_HTTP=$((E2E_BASE + 2))
AUX=$((E2E_BASE + 3));        AUX_METRICS=$((E2E_BASE + 8)); AUX_HTTP=$((E2E_BASE + 4))
AUX_MID=$((E2E_BASE + 7));    AUX_MID_HTTP=$((E2E_BASE + 9))  # aux-intermediate: HTTP = metrics

printf 'token-a\ntoken-b\n' >"$E2E_DIR/tokens"
printf 'token-a\n' >"$E2E_DIR/token-a"

e2e_start_server "$SERVER" root "$ROOT" "$ROOT_HTTP" --http_address="127.0.0.1:$ROOT_HTTP"
e2e_start_server "$SERVER" intermediate "$MID" "$MID_METRICS" --parent="127.0.0.1:$ROOT" \
    --http_address="127.0.0.1:$MID_HTTP"
e2e_wait_port "$MID_HTTP"
e2e_start_server "$SERVER" aux-root "$AUX" "$AUX_METRICS" --http_address="127.0.0.1:$AUX_HTTP" \
    --auth_tokens_file="$E2E_DIR/tokens" --upload_idle_timeout=2s --max_streams_per_identity=4 \
    --ingest_window_mib=1 --max_update_mib=4
e2e_wait_port "$AUX_HTTP"
e2e_start_server "$SERVER" aux-intermediate "$AUX_MID" "$AUX_MID_HTTP" --parent="127.0.0.1:$AUX" \
    --parent_token_file="$E2E_DIR/token-a" --http_address="127.0.0.1:$AUX_MID_HTTP" \
    --auth_tokens_file="$E2E_DIR/tokens" --upload_idle_timeout=2s --max_streams_per_identity=4 \
    --memory_budget_bytes=8388608

cat >"$E2E_DIR/config.json" <<JSON
{
  "client": "$CLIENT",
  "tmp": "$E2E_DIR",
  "nodes": [
    {"name": "root", "role": "root", "grpc": $ROOT, "http": $ROOT_HTTP, "shared_metrics": true},
    {"name": "intermediate", "role": "intermediate", "root": "root", "grpc": $MID,
     "http": $MID_HTTP},
    {"name": "aux-root", "role": "root", "grpc": $AUX, "http": $AUX_HTTP, "token": "token-a",
     "other_token": "token-b", "token_file": "$E2E_DIR/token-a", "idle_timeout_s": 2},
    {"name": "aux-intermediate", "role": "intermediate", "root": "aux-root", "grpc": $AUX_MID,
     "http": $AUX_MID_HTTP, "token": "token-a", "other_token": "token-b",
     "token_file": "$E2E_DIR/token-a", "idle_timeout_s": 2, "shared_metrics": true}
  ]
}
JSON
/usr/bin/python3 "$HERE/http_upload_test.py" "$E2E_DIR/config.json" "$@"
