#!/usr/bin/env bash
# fedagg's secure aggregation beside Flower 1.41's SecAgg+ (docs/BENCHMARKS.md, section
# 10b), on the same round: N clients, each a float32[P] update, summed securely, one round,
# with a fraction of the clients leaving. Alternating, RUNS times each at each dropout:
#   (a) bench/flower_secagg_app.py: a Flower simulation with SecAggPlusWorkflow and
#       secaggplus_mod (the pinned frameworks of .venv-frameworks, scripts/setup_frameworks.sh);
#   (b) a fresh fedagg root on loopback and fedagg-loadgen's N clients sending the update
#       discretized to 32 bits (scale 0.0001) as one cohort of N (--secure), checked exact.
# Both on the same graph: each client has min(DEGREE, N - 1) neighbours, threshold half of
# them plus one (fedagg's default). Dropouts leave after their masked input (--dropout_stage
# =unmask, fedagg-loadgen's --leave_before_unmasking) or before it (=input, --leave_before_input).
# Prints per dropout the median [min-max] of the round's wall time (Flower: its fit workflow,
# setup stage to aggregated parameters; fedagg: fedagg-loadgen's round_ms, create to result),
# of the server process's CPU seconds in the round (the clients' left out: they share the
# cores and dominate both rounds' wall time), of the server's peak memory (Flower: the peak
# RSS of its server process, ServerApp + SuperLink + simulation engine, and of its anonymous
# part; fedagg: VmHWM of the root's process), the masked vectors' bytes a parameter (Flower:
# the serialized arrays the server received; fedagg: the root's fedagg_payload_bytes_total,
# the update chunks' bytes; neither counts the key and share messages), and issue 49's
# goals. Every client and the server share the machine's cores in both cases.
# --ingest_window_mib=M and --stream_window_kib=K give the root that ingest window and
# per-stream HTTP/2 window (defaults: the server's own, auto and 1024).
#   bench/flower_secagg_bench.sh [BUILD_DIR] [--runs=3] [--clients=100] [--parameters=1000000]
#                                [--dropouts=0,0.3] [--dropout_stage=unmask] [--degree=64]
#                                [--ingest_window_mib=auto] [--stream_window_kib=1024]
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$REPO/build RUNS=3 CLIENTS=100 PARAMETERS=1000000 DROPOUTS=0,0.3 STAGE=unmask DEGREE=64 WINDOW=auto STREAM_WINDOW=1024
for arg in "$@"; do
  case $arg in
    --runs=*) RUNS=${arg#*=} ;; --clients=*) CLIENTS=${arg#*=} ;; --parameters=*) PARAMETERS=${arg#*=} ;;
    --dropouts=*) DROPOUTS=${arg#*=} ;; --dropout_stage=*) STAGE=${arg#*=} ;; --degree=*) DEGREE=${arg#*=} ;;
    --ingest_window_mib=*) WINDOW=${arg#*=} ;; --stream_window_kib=*) STREAM_WINDOW=${arg#*=} ;;
    -*) echo "unknown option $arg" >&2; exit 2 ;;
    *) BUILD=$(cd "$arg" && pwd) ;;
  esac
done
SERVER=$BUILD/service/fedagg-server LOADGEN=$BUILD/client_stub/fedagg-loadgen PYTHON=$REPO/.venv-frameworks/bin/python
for binary in "$SERVER" "$LOADGEN"; do
  [ -x "$binary" ] || { echo "$binary is missing: build it first (scripts/build.sh)" >&2; exit 1; }
done
[ -x "$PYTHON" ] || "$REPO/scripts/setup_frameworks.sh"
case $STAGE in
  unmask) leave=--leave_before_unmasking ;; input) leave=--leave_before_input ;;
  *) echo "--dropout_stage is unmask or input" >&2; exit 2 ;;
esac
source "$REPO/tests/e2e/e2e_lib.sh"
PORT=$E2E_BASE METRICS=$((E2E_BASE + 5))
export RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0 RAY_DISABLE_USAGE_STATS=1 FLWR_TELEMETRY_ENABLED=0
echo "machine: $(nproc) cores shared by all $CLIENTS clients and the server in both cases, $(date -u +%F)," \
     "$(git -C "$REPO" log --oneline -1 | cut -c1-7); fedagg root --ingest_window_mib=$WINDOW --stream_window_kib=$STREAM_WINDOW"
for run in $(seq "$RUNS"); do
  for dropout in ${DROPOUTS//,/ }; do
    (cd "$E2E_DIR" && timeout 3600 "$PYTHON" "$REPO/bench/flower_secagg_app.py" --clients="$CLIENTS" \
        --parameters="$PARAMETERS" --dropout="$dropout" --dropout_stage="$STAGE" --degree="$DEGREE" \
        --report="$E2E_DIR/flower-$dropout-$run.json" >"$E2E_DIR/flower-$dropout-$run.log" 2>&1) \
      || { tail -n 30 "$E2E_DIR/flower-$dropout-$run.log"; exit 1; }
    e2e_start_server "$SERVER" "root-$dropout-$run" "$PORT" "$METRICS" --ingest_window_mib="$WINDOW" \
        --stream_window_kib="$STREAM_WINDOW"
    pid=${E2E_PIDS[-1]}
    fault=()
    [ "$dropout" != 0 ] && fault=("$leave=$dropout")
    "$LOADGEN" --json --control="127.0.0.1:$PORT" --clients="$CLIENTS" --concurrency="$CLIENTS" \
        --type="<w=float32[$PARAMETERS]>" --encoding=discretized:32@0.0001 --id_prefix="secagg-$dropout-$run" \
        --secure="cohort=$CLIENTS,degree=$DEGREE,timeout_ms=30000" "${fault[@]}" >"$E2E_DIR/fedagg-$dropout-$run.json"
    awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" >"$E2E_DIR/fedagg-$dropout-$run.hwm"
    awk '{print $14 + $15}' "/proc/$pid/stat" >"$E2E_DIR/fedagg-$dropout-$run.cpu"  # clock ticks (100 a second)
    curl -s "127.0.0.1:$METRICS/metrics" | awk '/^fedagg_payload_bytes_total / {print $2}' >"$E2E_DIR/fedagg-$dropout-$run.bytes"
    kill "$pid"; wait "$pid" || true
    echo "dropout $dropout run $run done" >&2
  done
done
/usr/bin/python3 - "$E2E_DIR" "$DROPOUTS" "$RUNS" "$CLIENTS" "$PARAMETERS" "$STAGE" <<'PY'
import json, statistics, sys
d, dropouts, runs, clients, parameters, stage = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), *sys.argv[4:]
def show(values, digits=2):
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"
print(f"{clients} clients x float32[{parameters}], one secure round, dropouts leave at '{stage}'; "
      f"median [min-max] of {runs} runs; all clients and the server on the same cores")
for dropout in dropouts:
    flower = [json.load(open(f"{d}/flower-{dropout}-{r}.json")) for r in range(1, runs + 1)]
    fedagg = [json.load(open(f"{d}/fedagg-{dropout}-{r}.json")) for r in range(1, runs + 1)]
    hwm = [int(open(f"{d}/fedagg-{dropout}-{r}.hwm").read()) / 1024 for r in range(1, runs + 1)]
    assert all(r["passed"] for r in fedagg), "a fedagg run failed its check"
    f_round = [r["round_s"] for r in flower]
    a_round = [r["round_ms"]["median"] / 1000 for r in fedagg]
    f_rss = [r["peak_rss_kib"] / 1024 for r in flower]
    f_anon = [r["peak_anon_kib"] / 1024 for r in flower]
    wire = [r["wire_bytes_per_parameter"] for r in flower]
    a_wire = [float(open(f"{d}/fedagg-{dropout}-{r}.bytes").read()) / (r_["updates"]["counted"] * int(parameters))
              for r, r_ in zip(range(1, runs + 1), fedagg)]
    round_ratio = statistics.median(a_round) / statistics.median(f_round)
    mem_ratio = statistics.median(hwm) / statistics.median(f_rss)
    print(f"dropout {dropout} (Flower: {flower[0]['dropped']} dropped, num_shares {flower[0]['num_shares']}, "
          f"threshold {flower[0]['threshold']}; Flower's aggregate within {max(r['max_abs_error'] for r in flower):.1e} of the exact mean)")
    print(f"  round s:          Flower {show(f_round)}  fedagg {show(a_round)}  ratio {round_ratio:.3f} "
          f"(goal <= 0.05: {'met' if round_ratio <= 0.05 else 'missed'})")
    f_cpu = [r["server_cpu_s"] for r in flower]
    a_cpu = [int(open(f"{d}/fedagg-{dropout}-{r}.cpu").read()) / 100 for r in range(1, runs + 1)]
    print(f"  server CPU s:     Flower {show(f_cpu)}  fedagg {show(a_cpu)}  ratio "
          f"{statistics.median(a_cpu) / statistics.median(f_cpu):.3f} (the server process's own, clients left out)")
    print(f"  server peak MiB:  Flower RSS {show(f_rss, 0)} (anonymous {show(f_anon, 0)})  fedagg VmHWM {show(hwm, 0)}"
          f"  ratio {mem_ratio:.3f} (goal <= 0.1: {'met' if mem_ratio <= 0.1 else 'missed'})")
    print(f"  wire bytes/param: Flower {show(wire, 4)} (int64 masked vectors, serialized)  fedagg {show(a_wire, 4)}"
          f" (update chunk bytes received, fedagg_payload_bytes_total)  (goal <= 4: {'met' if max(a_wire) <= 4 else 'missed'})")
PY
