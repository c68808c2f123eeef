#!/usr/bin/env bash
# fedagg's HTTP path from a real browser: headless Chromium driven by Selenium
# (browser_test.py) through nginx to a root and an intermediate aggregator, both with
# --http_address: the example page's round with three pages, uploads cut by the network
# and resumed, every request of an upload sent three times, refusals (wrong offset, bad
# checksum, expired upload, oversized chunk), and a screenshot of the finished page.
# Skipped (exit 77) without chromium, chromium-driver or python3-selenium.
# Usage: browser_test.sh FEDAGG_SERVER [FEDAGG_CLIENT]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SERVER=$1
CLIENT=${2:-$(dirname "$SERVER")/../client_stub/fedagg-client}
source "$HERE/browser_lib.sh"
browser_require_tools selenium
source "$HERE/../e2e/e2e_lib.sh"

ROOT=$E2E_BASE INTERMEDIATE=$((E2E_BASE + 1)) LB=$((E2E_BASE + 2)) RELAY=$((E2E_BASE + 3)) RELAY_CONTROL=$((E2E_BASE + 4))
ROOT_HTTP=$((E2E_BASE + 7)) INTERMEDIATE_HTTP=$((E2E_BASE + 8))
# The root forgets an upload after 2 idle seconds (the expiry check talks to it directly);
# the intermediate, which the pages reach through nginx, keeps the default.
e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5)) --http_address="127.0.0.1:$ROOT_HTTP" --upload_idle_timeout=2s
e2e_start_server "$SERVER" intermediate "$INTERMEDIATE" $((INTERMEDIATE + 5)) --parent="127.0.0.1:$ROOT" \
    --http_address="127.0.0.1:$INTERMEDIATE_HTTP"
e2e_wait_port "$ROOT_HTTP"
e2e_wait_port "$INTERMEDIATE_HTTP"
browser_start_nginx "$LB" "$ROOT_HTTP" "$INTERMEDIATE_HTTP"
/usr/bin/python3 "$HERE/cut_relay.py" "$RELAY" "$LB" "$RELAY_CONTROL" >"$E2E_DIR/relay.log" 2>&1 &
E2E_PIDS+=($!)
e2e_wait_port "$RELAY"
e2e_wait_port "$RELAY_CONTROL"

/usr/bin/python3 "$HERE/browser_test.py" --client="$CLIENT" --root="127.0.0.1:$ROOT" \
    --intermediate="127.0.0.1:$INTERMEDIATE" --lb="http://127.0.0.1:$LB" --relay="http://127.0.0.1:$RELAY" \
    --relay_control="$RELAY_CONTROL" --root_http="http://127.0.0.1:$ROOT_HTTP" --dir="$E2E_DIR" \
    --js="$HERE/../../client_stub/js"
