#!/usr/bin/env bash
# Secure aggregation at scale (docs/BENCHMARKS.md, section 10c): N fedagg-loadgen clients
# (default 10,000) through a root and two intermediates on loopback, in cohorts of up to
# COHORT at the intermediates, with clients leaving at every stage (default 10% before
# sharing, 10% before their masked update, 10% before unmasking: 30% in all). The load
# generator runs CONCURRENCY clients at once (a thread each), so cohorts form wave after
# wave; its check holds the root's unmasked result to the exact sum of the counted
# clients' discretized updates. The root waits --child_grace_ms (fedagg-server's default,
# 10 s) for its intermediates after the seal. Prints the load generator's report, the round's wall time
# and the root's and intermediates' CPU seconds and peak memory. One run: a scale check,
# not a timing comparison.
#   bench/secure_scale_bench.sh [BUILD_DIR] [--clients=10000] [--cohort=500] [--concurrency=1000]
#                               [--coordinates=1000] [--leave=0.1] [--degree=64] [--child_grace_ms=10000]
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$REPO/build CLIENTS=10000 COHORT=500 CONCURRENCY=1000 COORDINATES=1000 LEAVE=0.1 DEGREE=64 GRACE_MS=10000
for arg in "$@"; do
  case $arg in
    --clients=*) CLIENTS=${arg#*=} ;; --cohort=*) COHORT=${arg#*=} ;; --concurrency=*) CONCURRENCY=${arg#*=} ;;
    --coordinates=*) COORDINATES=${arg#*=} ;; --leave=*) LEAVE=${arg#*=} ;; --degree=*) DEGREE=${arg#*=} ;;
    --child_grace_ms=*) GRACE_MS=${arg#*=} ;;
    -*) echo "unknown option $arg" >&2; exit 2 ;;
    *) BUILD=$(cd "$arg" && pwd) ;;
  esac
done
SERVER=$BUILD/service/fedagg-server LOADGEN=$BUILD/client_stub/fedagg-loadgen
for binary in "$SERVER" "$LOADGEN"; do
  [ -x "$binary" ] || { echo "$binary is missing: build it first (scripts/build.sh)" >&2; exit 1; }
done
source "$REPO/tests/e2e/e2e_lib.sh"
ROOT=$E2E_BASE I1=$((E2E_BASE + 1)) I2=$((E2E_BASE + 2))
e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5)) --child_grace_ms="$GRACE_MS"
e2e_start_server "$SERVER" intermediate-1 "$I1" $((I1 + 5)) --parent="127.0.0.1:$ROOT"
e2e_start_server "$SERVER" intermediate-2 "$I2" $((I2 + 5)) --parent="127.0.0.1:$ROOT"
echo "machine: $(nproc) cores, $(date -u +%F), $(git -C "$REPO" log --oneline -1 | cut -c1-7); $CLIENTS clients," \
     "cohorts of up to $COHORT (degree $DEGREE), $CONCURRENCY at once, float32[$COORDINATES], $LEAVE leaving at each stage"
"$LOADGEN" --json --control="127.0.0.1:$ROOT" --servers="127.0.0.1:$I1,127.0.0.1:$I2" --clients="$CLIENTS" \
    --concurrency="$CONCURRENCY" --channels=4 --type="<w=float32[$COORDINATES]>" --encoding=discretized:32@0.001 \
    --secure="cohort=$COHORT,min=10,degree=$DEGREE,timeout_ms=30000" --leave_before_sharing="$LEAVE" \
    --leave_before_input="$LEAVE" --leave_before_unmasking="$LEAVE" >"$E2E_DIR/run.json" \
  || { echo "fedagg-loadgen failed; its report:" >&2; cat "$E2E_DIR/run.json" >&2; }
for port in "$ROOT" "$I1" "$I2"; do
  pid=$(pgrep -f "fedagg-server.*--listen=127.0.0.1:$port ")
  echo "node :$port  CPU $(awk '{printf "%.1f", ($14 + $15) / 100}' "/proc/$pid/stat") s" \
       " peak $(awk '/^VmHWM:/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status") MiB"
done
/usr/bin/python3 - "$E2E_DIR/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["checks"][0] if r.get("checks") else {"contributions": None, "expected_contributions": None}
print(f"passed: {r['passed']}; round {r['round_ms']['median'] / 1000:.1f} s; contributions {c['contributions']} "
      f"(expected {c['expected_contributions']}); left before counted {r['faults']['left_before_counted']}")
sys.exit(0 if r["passed"] else 1)
PY
