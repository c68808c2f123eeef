#!/usr/bin/env bash
# What a secure aggregation costs the node its clients reach, beside a plain discretized
# one: a root and one intermediate (the leaf) on loopback; fedagg-loadgen sends N updates
# of one float32[D] federated_sum discretized to 32 bits through the leaf, plainly and as
# a secure aggregation (cohorts of 100, degree 8), alternating, RUNS times each; each run
# is checked (the root's result against the exact sum). Reports the leaf's and the root's
# CPU seconds per run (from /proc, so the clients' own masking on the same machine is left
# out) and the round's wall time, median [min-max], and the leaf's plain/secure CPU ratio:
# the secure ingest's share of the plain one's at the leaf.
#   bench/secure_ingest_bench.sh [BUILD_DIR] [--runs=3] [--clients=200] [--coordinates=1000000]
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$REPO/build RUNS=3 CLIENTS=200 COORDINATES=1000000
for arg in "$@"; do
  case $arg in
    --runs=*) RUNS=${arg#--runs=} ;;
    --clients=*) CLIENTS=${arg#--clients=} ;;
    --coordinates=*) COORDINATES=${arg#--coordinates=} ;;
    -*) echo "unknown option $arg" >&2; exit 2 ;;
    *) BUILD=$(cd "$arg" && pwd) ;;
  esac
done
SERVER=$BUILD/service/fedagg-server LOADGEN=$BUILD/client_stub/fedagg-loadgen
for binary in "$SERVER" "$LOADGEN"; do
  [ -x "$binary" ] || { echo "$binary is missing: build it first (scripts/build.sh)" >&2; exit 1; }
done
source "$REPO/tests/e2e/e2e_lib.sh"
ROOT=$E2E_BASE LEAF=$((E2E_BASE + 1))
e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5))
e2e_start_server "$SERVER" leaf "$LEAF" $((LEAF + 5)) --parent="127.0.0.1:$ROOT"
cpu() { awk '{print $14 + $15}' "/proc/$(pgrep -f "fedagg-server.*--listen=127.0.0.1:$1 ")/stat"; }
for run in $(seq "$RUNS"); do
  for mode in plain secure; do
    secure=()
    [ "$mode" = secure ] && secure=(--secure=cohort=100,degree=8,timeout_ms=30000)
    leaf0=$(cpu "$LEAF") root0=$(cpu "$ROOT")
    "$LOADGEN" --json --control="127.0.0.1:$ROOT" --servers="127.0.0.1:$LEAF" --clients="$CLIENTS" \
        --concurrency="$CLIENTS" --type="<w=float32[$COORDINATES]>" --encoding=discretized:32@0.0001 \
        --id_prefix="$mode-$run" "${secure[@]}" >"$E2E_DIR/$mode-$run.json"
    echo "$mode $(( $(cpu "$LEAF") - leaf0 )) $(( $(cpu "$ROOT") - root0 )) $E2E_DIR/$mode-$run.json" >>"$E2E_DIR/runs.txt"
  done
done
/usr/bin/python3 - "$E2E_DIR/runs.txt" "$CLIENTS" "$COORDINATES" <<'PY'
import json, statistics, sys
runs = {"plain": [], "secure": []}
for line in open(sys.argv[1]):
    mode, leaf, root, path = line.split()
    report = json.load(open(path))
    assert report["passed"], path
    runs[mode].append((int(leaf) / 100, int(root) / 100, report["round_ms"]["median"] / 1000))
def show(values):
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"
print(f"{sys.argv[2]} updates of float32[{sys.argv[3]}], discretized to 32 bits, through one leaf (CPU seconds, wall s):")
for mode, rows in runs.items():
    print(f"  {mode:6} leaf cpu {show([r[0] for r in rows])}  root cpu {show([r[1] for r in rows])}  round {show([r[2] for r in rows])}")
ratios = [p[0] / s[0] for p, s in zip(runs["plain"], runs["secure"])]
print(f"  leaf: plain / secure CPU = {statistics.median([r[0] for r in runs['plain']]) / statistics.median([r[0] for r in runs['secure']]):.0%}"
      f" of the medians; per pair [{min(ratios):.0%}-{max(ratios):.0%}]")
PY
