#!/usr/bin/env bash
# The HTTP path's upload rate from a browser: a 16 MiB float32 update uploaded by headless
# Chromium (launched directly: no WebDriver or other automation attached) through nginx to
# one fedagg-server on loopback, in 1 MiB chunks and in one 16 MiB request, 5 runs each
# (alternating; each a new client of one federated_sum aggregation, timed in the page from
# its first request to the ack). The page (bench/browser/) reports each timing by POSTing
# JSON to a small collector (bench/browser/collector.py) behind the same nginx; then
# Chromium is stopped. For comparison, the native gRPC Submit of the same update by
# fedagg-client (timed around the whole process: its start, reading the .npy, connecting,
# sending). Prints median [min-max] seconds and MB/s (10^6 bytes a second) per way.
#   bench/browser_upload_bench.sh [BUILD_DIR] [--runs=5] [--mib=16]
# FEDAGG_BROWSER_ASSETS=source: nginx serves /fedagg.mjs from this tree rather than from
# the server's embedded copy (tests/browser/browser_lib.sh).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$REPO/build
RUNS=5 MIB=16
for arg in "$@"; do
  case $arg in
    --runs=*) RUNS=${arg#--runs=} ;;
    --mib=*) MIB=${arg#--mib=} ;;
    -*) echo "unknown option $arg" >&2; exit 2 ;;
    *) BUILD=$(cd "$arg" && pwd) ;;
  esac
done
SERVER=$BUILD/service/fedagg-server CLIENT=$BUILD/client_stub/fedagg-client
for binary in "$SERVER" "$CLIENT"; do
  [ -x "$binary" ] || { echo "$binary is missing: build it first (scripts/build.sh)" >&2; exit 1; }
done
source "$REPO/tests/browser/browser_lib.sh"
browser_require_tools chromium
source "$REPO/tests/e2e/e2e_lib.sh"

ROOT=$E2E_BASE LB=$((E2E_BASE + 2)) COLLECTOR=$((E2E_BASE + 3)) ROOT_HTTP=$((E2E_BASE + 7))
e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5)) --http_address="127.0.0.1:$ROOT_HTTP"
e2e_wait_port "$ROOT_HTTP"
RESULTS=$E2E_DIR/results.jsonl
: >"$RESULTS"
/usr/bin/python3 "$REPO/bench/browser/collector.py" "$COLLECTOR" "$RESULTS" >"$E2E_DIR/collector.log" 2>&1 &
E2E_PIDS+=($!)
e2e_wait_port "$COLLECTOR"
# One node: the "intermediates" nginx hashes uploads over are the root itself.
browser_start_nginx "$LB" "$ROOT_HTTP" "$ROOT_HTTP" "location /bench/ { alias $REPO/bench/browser/; types { text/html html; text/javascript mjs; } }
    location = /collect { proxy_pass http://127.0.0.1:$COLLECTOR; }"

ID=bench-browser FLOATS=$((MIB * 1048576 / 4))
"$CLIENT" --server="127.0.0.1:$ROOT" create "$ID" --type="<w=float32[$FLOATS]>" --intrinsics=federated_sum >/dev/null

# Chromium alone, in a session of its own so that its whole process group can be stopped.
setsid chromium --headless=new --disable-gpu --no-sandbox --no-first-run --disable-background-networking \
    --user-data-dir="$E2E_DIR/chromium-profile" \
    "http://127.0.0.1:$LB/bench/?aggregation=$ID&runs=$RUNS&mib=$MIB&chunk_kib=1024" >"$E2E_DIR/chromium.log" 2>&1 &
CHROMIUM=$!
E2E_PIDS+=($CHROMIUM)
for _ in $(seq 600); do
  grep -q '"done"' "$RESULTS" && break
  sleep 0.5
done
kill -- -"$CHROMIUM" 2>/dev/null || true
grep -q '"done"' "$RESULTS" || { echo "the bench page reported no end in 300 s; what it sent:" >&2; cat "$RESULTS" >&2; exit 1; }
if grep -q '"error"' "$RESULTS"; then
  echo "the bench page failed:" >&2; cat "$RESULTS" >&2; exit 1
fi

# The native path: fedagg-client submit of the same update as a .npy file.
/usr/bin/python3 - "$E2E_DIR/update.npy" "$FLOATS" <<'PY'
import sys
import numpy as np
np.save(sys.argv[1], ((np.arange(int(sys.argv[2])) % 1009) * 0.25 - 126).astype(np.float32))
PY
for run in $(seq "$RUNS"); do
  start=$(date +%s.%N)
  "$CLIENT" --server="127.0.0.1:$ROOT" submit "$ID" --client_id="grpc-$run" w="$E2E_DIR/update.npy" >/dev/null
  end=$(date +%s.%N)
  seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.6f", b - a }')
  echo "{\"kind\": \"grpc\", \"run\": $run, \"seconds\": $seconds, \"bytes\": $((FLOATS * 4))}" >>"$RESULTS"
done
COUNTED=$(e2e_contributions "$CLIENT" "$ROOT" "$ID")

/usr/bin/python3 - "$RESULTS" "$RUNS" "$COUNTED" <<'PY'
import json, statistics, sys
records = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
runs, counted = int(sys.argv[2]), int(sys.argv[3])
setup = next(r for r in records if r.get("kind") == "setup")
print(f"{setup['bytes'] / 1048576:g} MiB float32 update, {runs} runs each; {setup['userAgent']}")
print(f"  in the page: encodeUpdate {setup['encodeSeconds'] * 1000:.1f} ms, crc32c of the whole update "
      f"{setup['crcSeconds'] * 1000:.1f} ms ({setup['bytes'] / setup['crcSeconds'] / 1e6:.0f} MB/s)")

def line(label, rows):
    seconds = [r["seconds"] for r in rows]
    rates = [r["bytes"] / s / 1e6 for r, s in zip(rows, seconds)]
    print(f"  {label:<44} {statistics.median(seconds):6.3f} s [{min(seconds):.3f}-{max(seconds):.3f}]"
          f"   {statistics.median(rates):7.1f} MB/s [{min(rates):.1f}-{max(rates):.1f}]")
    return statistics.median(seconds)

median = {}
for mode in ("chunked", "whole"):
    rows = [r for r in records if r.get("kind") == "upload" and r["mode"] == mode]
    assert len(rows) == runs, f"{len(rows)} {mode} runs reported, expected {runs}"
    assert all(r["sent"] == r["bytes"] for r in rows), f"{mode}: bytes sent twice: {rows}"
    median[mode] = line(f"browser, {rows[0]['label']} ({rows[0]['writes']} writes)", rows)
median["grpc"] = line("gRPC Submit (fedagg-client, whole process)", [r for r in records if r.get("kind") == "grpc"])
print(f"  chunking costs {median['chunked'] / median['whole']:.2f}x one request (goal <= 2x); "
      f"the chunked browser upload runs at {median['grpc'] / median['chunked']:.0%} of gRPC Submit's rate "
      f"(goal >= 25%); medians")
assert counted == 3 * runs, f"the server counted {counted} updates, expected {3 * runs}"
print(f"  the server counted all {counted} updates")
PY
