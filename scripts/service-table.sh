#!/usr/bin/env bash
# The service table of fedagg's GPU check: fedagg-loadgen clients on loopback (16 channels)
# against one root with the default flags, for each backend named, beside fedagg-raw-sink
# (the bare gRPC baseline), for five workloads: dense 16 MiB and 1 MiB updates,
# sparse_sum and row_sparse_sum at 1%, and small updates (a float32[1024] mean and 10 rows
# of a row-sparse table, ~4.8 KB), and 16 MiB dense updates sent quantized to 8 and 4 bits
# (the model bytes a node takes in against the sink's bytes of the same updates), and 16 MiB
# dense updates of a differentially private mean, each clipped (beside the plain row: what
# clipping costs with each backend, issue 48). Each row: the sink's rate, each backend's rate and its
# ratio to the sink, the goal of issue 22 and whether each device backend meets it (and
# is at least as fast as the cpu backend); every run's result is
# checked by fedagg-loadgen. Each server (the sink's too) serves --rounds aggregations one after
# the other, each of every update of the row, and the table gives the last round's rate: a
# node serves round after round, and a fresh process's first round also pays one-time
# costs (the first mappings of the ingest window, pinning them, a device's first kernel
# launches and handles), which a second table, of the first rounds, shows apart. After
# each backend run, the server's staging, pinning and update-buffer metrics, its peak
# RSS and its threads: how many, and CPU seconds by thread name (work serialized, or
# callbacks blocking), and each round's length.
# The GPU bundle's run.sh runs it (scripts/gpu-bundle.sh copies it beside run.sh); CI runs
# it small, with the cpu backend only (tests/e2e/gpu_bundle_test.sh).
#   service-table.sh BIN_DIR [--backends=cpu,cuda] [--scale=1] [--workloads=dense,small,...]
#                    [--server_cpus=0-3] [--server_flags='--heap_arenas=1 ...'] [--profile_dir=DIR]
#                    [--records=FILE] [--loadgens=1] [--rounds=2]
#   BIN_DIR: fedagg-server, fedagg-loadgen, fedagg-raw-sink; --scale multiplies the update
#   counts; --workloads keeps the rows whose name starts with one of the words (dense,
#   sparse, row_sparse, small); --server_cpus runs the servers (fedagg's and the sink) on
#   those CPUs only (taskset), to see how a row scales with the cores a node has;
#   --server_flags adds flags to every fedagg-server run (default: none, its defaults);
#   --profile_dir writes a CPU profile of each fedagg-server run there (gperftools'
#   libprofiler.so.0, found beside BIN_DIR in profiler/ or installed; read it with
#   google-pprof and the unstripped fedagg-server of the same build); --records appends
#   one JSON line per backend run to FILE (workload, measure, backend, the sink's rate and
#   the backend's, the cpu backend's of the same row, the same three of the first round,
#   whether the results checked out), as
#   bench/service_bench.sh's table case reads them; --rounds: aggregations per server
#   (1: the first round alone, as the tables before 2026-11-27's last ones); --loadgens runs that many
#   fedagg-loadgen processes at once, each with its share of the clients and of the
#   concurrency and an aggregation of its own, and sums their rates (one load generator
#   on 16 cores tops out near the sink's ~22,000 small updates a second).
# Exit status: 0 when every run's result checked out (goals missed are reported, not
# failed: they are benchmarks), 1 otherwise, 2 for a usage error or a program missing
# from BIN_DIR.
set -uo pipefail
BIN=${1:?usage: service-table.sh BIN_DIR [--backends=cpu,cuda] [--scale=1]}; shift
BACKENDS=cpu,cuda SCALE=1 ONLY="" PIN=() PROFILES="" SERVER_FLAGS=() RECORDS="" LOADGENS=1 ROUNDS=2
for arg in "$@"; do
  case $arg in
    --backends=*) BACKENDS=${arg#*=} ;;
    --scale=*) SCALE=${arg#*=} ;;
    --workloads=*) ONLY=${arg#*=} ;;
    --server_cpus=*) PIN=(taskset -c "${arg#*=}") ;;
    --server_flags=*) read -r -a SERVER_FLAGS <<<"${arg#*=}" ;;
    --profile_dir=*) PROFILES=$(mkdir -p "${arg#*=}" && cd "${arg#*=}" && pwd) ;;
    --records=*) RECORDS=${arg#*=} ;;
    --loadgens=*) LOADGENS=${arg#*=} ;;
    --rounds=*) ROUNDS=${arg#*=} ;;
    *) echo "service-table: unknown argument $arg" >&2; exit 2 ;;
  esac
done
for program in fedagg-server fedagg-loadgen fedagg-raw-sink; do
  [ -x "$BIN/$program" ] || { echo "service-table: no $program in $BIN" >&2; exit 2; }
done
LOGS=$(mktemp -d /tmp/fedagg-service-table.XXXXXX)
# The thrust-omp backend's OpenMP threads otherwise spin between reductions on the cores
# gRPC needs (docs/OPERATIONS.md); the other backends do not use OpenMP.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
PROFILER=""
if [ -n "$PROFILES" ]; then
  for candidate in "$BIN/../profiler/libprofiler.so.0" /usr/lib/x86_64-linux-gnu/libprofiler.so.0; do
    [ -f "$candidate" ] && { PROFILER=$(cd "$(dirname "$candidate")" && pwd)/libprofiler.so.0; break; }
  done
  [ -n "$PROFILER" ] || { echo "service-table: --profile_dir needs gperftools' libprofiler.so.0" >&2; exit 2; }
fi
count() { python3 -c "import sys; print(max(1, round(int(sys.argv[1]) * float(sys.argv[2]))))" "$1" "$SCALE"; }

# name | goal for device backends (ratio to the sink, on payload or, for small, updates/s;
# for the clipped row (differential privacy, issue 48; z = 0: the clipping alone, not the
# root's noise at finalization), 0.81 of the sink: clipping's goal is 90% of the same
# aggregation's ingest, the dense 16 MiB row's goal being 0.90 of the sink;
# for the encoded rows, the model bytes a node takes in, as float32, against the bytes the
# sink takes of the same encoded updates: issue 46's goal, which the table judges for the
# cpu backend too) | loadgen arguments
WORKLOADS=(
  "dense 16 MiB|0.90|payload|--type=<w=float32[4194304]> --intrinsics=federated_sum --clients=$(count 320) --concurrency=64"
  "dense 1 MiB|0.90|payload|--type=<w=float32[262144]> --intrinsics=federated_sum --clients=$(count 4000) --concurrency=128"
  "sparse_sum 1% of 16 Mi|0.70|payload|--type=<w=float32[16777216]> --intrinsics=sparse_sum --density=0.01 --clients=$(count 1600) --concurrency=128"
  "row_sparse_sum 1% of 262,144 x 64|0.70|payload|--type=<t=float32[262144,64]> --intrinsics=row_sparse_sum --density=0.01 --clients=$(count 2000) --concurrency=128"
  "dense 16 MiB clipped (DP)|0.81|payload|--type=<w=float32[4194304]> --intrinsics=federated_mean --privacy=clip=1,z=0,clients=$(count 320) --clients=$(count 320) --concurrency=64"
  "encoded 16 MiB quantized:8|3.0|model|--type=<w=float32[4194304]> --intrinsics=federated_sum --encoding=quantized:8 --clients=$(count 320) --concurrency=64"
  "encoded 16 MiB quantized:4|5.0|model|--type=<w=float32[4194304]> --intrinsics=federated_sum --encoding=quantized:4 --clients=$(count 320) --concurrency=64"
  "small (~4.8 KB)|0.80|updates|--type=<w=float32[1024],t=float32[100000,16]> --intrinsics=federated_mean,row_sparse_sum --density=1,0.0001 --clients=$(count 100000) --concurrency=1024"
)

http_get() {  # http_get PORT PATH: the body, with bash's /dev/tcp (no curl needed)
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
  sed '1,/^\r$/d' <&3
  exec 3<&-
}

server_threads() {  # server_threads PID: its peak RSS, thread count and CPU seconds by thread name
  python3 - "$1" <<'PY'
import collections, glob, os, re, sys
def cpu_seconds(stat_text):  # utime + stime of a /proc stat line
    fields = stat_text[stat_text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
seconds, threads = collections.Counter(), collections.Counter()
for stat in glob.glob(f"/proc/{sys.argv[1]}/task/*/stat"):
    try:
        text = open(stat).read()
    except OSError:
        continue
    name = re.sub(r"[-_ ]?\d+$", "", text[text.index("(") + 1:text.rindex(")")])
    seconds[name] += cpu_seconds(text)
    threads[name] += 1
total = cpu_seconds(open(f"/proc/{sys.argv[1]}/stat").read())  # exited threads included
peak = next((line.split()[1] for line in open(f"/proc/{sys.argv[1]}/status") if line.startswith("VmHWM:")), "?")
print(f"peak RSS {int(peak) / 1024:.0f} MiB, " if peak != "?" else "", end="")
print(f"threads {sum(threads.values())} live, CPU seconds {total:.2f} (live threads by name: " +
      ", ".join(f"{n} x{threads[n]} {s:.2f}" for n, s in seconds.most_common()) + ")")
PY
}

run() {  # run NAME metrics|- LOADGEN_ARGS SERVER_COMMAND...: prints "rate updates_per_s passed
        #   first_rate first_updates_per_s model_ratio" (the last round's rates, then the
        #   first's; model_ratio: an update's model bytes over its wire bytes)
  local name=$1 metrics=$2 args=$3; shift 3
  local profile=()
  if [ -n "$PROFILES" ] && [ "$(basename "$1")" = fedagg-server ]; then
    profile=(env "LD_PRELOAD=$PROFILER" "CPUPROFILE=$PROFILES/$name.prof" CPUPROFILE_FREQUENCY=500)
  fi
  # Port 0: the server takes a free port and prints it (and fedagg-server its metrics
  # port), so that runs beside other servers, as CI's tests in parallel, never collide.
  "${PIN[@]}" "${profile[@]}" "$@" --listen=127.0.0.1:0 >"$LOGS/$name.server.log" 2>&1 &
  local server=$! port="" metrics_port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$LOGS/$name.server.log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "service-table: $name did not start:" >&2
    cat "$LOGS/$name.server.log" >&2
    kill "$server" 2>/dev/null; wait "$server" 2>/dev/null
    echo 0 0 no 0 0 1
    return
  fi
  [ "$metrics" = - ] || metrics_port=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$LOGS/$name.server.log" | head -n 1)
  # LOADGENS processes, each with its share of the clients and of the concurrency, an
  # aggregation of its own and 16 channels, started together.
  local loadgens=() i
  for i in $(seq "$LOADGENS"); do
    local share
    share=$(python3 -c "
import re, sys
args, n = sys.argv[1], int(sys.argv[2])
print(re.sub(r'--(clients|concurrency)=(\d+)', lambda m: f'--{m.group(1)}={max(1, int(m.group(2)) // n)}', args))" \
        "$args" "$LOADGENS")
    # shellcheck disable=SC2086
    timeout 300 "$BIN/fedagg-loadgen" --control="127.0.0.1:$port" --channels=16 --id_prefix="loadgen$i" \
        --rounds="$ROUNDS" --json $share \
        >"$LOGS/$name.$i.json" 2>"$LOGS/$name.$i.err" &
    loadgens+=($!)
  done
  wait "${loadgens[@]}"
  if [ -n "$metrics_port" ]; then
    http_get "$metrics_port" /metrics | grep -E '^fedagg_(staging|pinned_host|host_pin|update_buffer)' | grep -v '_bucket' >"$LOGS/$name.staging" || true
    server_threads "$server" >>"$LOGS/$name.staging"
    # The rounds' lengths, to read the CPU and staging seconds above against.
    python3 -c "
import json, sys
runs = [json.load(open(p))['round_throughput'] for p in sys.argv[1:]]
print('load generator seconds per round ' + ', '.join(f'{max(r[k][\"seconds\"] for r in runs):.2f}' for k in range(len(runs[0]))))" \
        "$LOGS/$name".*.json >>"$LOGS/$name.staging" 2>/dev/null || true
  fi
  kill "$server" 2>/dev/null; wait "$server" 2>/dev/null
  # Per round, the load generators' sums over the longest one's time (they start together).
  python3 - "$LOGS/$name".*.json <<'PY'
import json, sys
def rates(rounds):
    seconds = max(r["seconds"] for r in rounds)
    return (sum(r["payload_bytes_per_s"] * r["seconds"] for r in rounds) / seconds,
            sum(r["updates_per_s"] * r["seconds"] for r in rounds) / seconds)
try:
    runs = [json.load(open(path)) for path in sys.argv[1:]]
    last, first = rates([r["round_throughput"][-1] for r in runs]), rates([r["round_throughput"][0] for r in runs])
    ratio = runs[0]["model_bytes_per_update"] / max(1, runs[0]["payload_bytes_per_update"])
    print(*last, "yes" if all(r["passed"] for r in runs) else "no", *first, ratio)
except Exception:
    print(0, 0, "no", 0, 0, 1)
PY
}

figure() {  # figure MEASURE VALUE [SINK]: "1,234 MB/s" or "1,234 upd/s", and its % of SINK
  python3 -c "
import sys
m, v, s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 0
text = f'{v:,.0f} upd/s' if m == 'updates' else f'{v / 1e6:,.0f} MB/s' + (' of model' if m == 'model' and s else '')
print(f'{text} ({100 * v / s:.0f}%)' if s else text)" "$@"
}

failed=0 first_rows=()
header="| workload | sink | $(sed 's/,/ | /g' <<<"$BACKENDS") | goal |
|---|---|$(sed 's/[^,]*/---|/g; s/,//g' <<<"$BACKENDS")---|"
echo "$header"
for workload in "${WORKLOADS[@]}"; do
  IFS='|' read -r name goal measure args <<<"$workload"
  if [ -n "$ONLY" ]; then
    keep=no
    for word in ${ONLY//,/ }; do [[ $name == "$word"* ]] && keep=yes; done
    [ "$keep" = yes ] || continue
  fi
  slug=$(tr 'A-Z' 'a-z' <<<"$name" | tr -cs 'a-z0-9' '_')
  read -r sink_rate sink_ups sink_ok sink_first_rate sink_first_ups _ < <(run "$slug-sink" - "--sink $args" "$BIN/fedagg-raw-sink")
  [ "$sink_ok" = yes ] || failed=1
  if [ "$measure" = updates ]; then sink=$sink_ups sink_first=$sink_first_ups; else sink=$sink_rate sink_first=$sink_first_rate; fi
  row="| $name | $(figure "$measure" "$sink")" first_row="| $name | $(figure "$measure" "$sink_first")"
  verdicts="" cpu_value="" cpu_first=""
  for backend in ${BACKENDS//,/ }; do
    read -r rate ups ok first_rate first_ups model_ratio < <(run "$slug-$backend" metrics "$args" "$BIN/fedagg-server" \
        --backend="$backend" "${SERVER_FLAGS[@]}")
    [ "$ok" = yes ] || failed=1
    if [ "$measure" = updates ]; then
      value=$ups first=$first_ups
    elif [ "$measure" = model ]; then
      read -r value first < <(python3 -c "import sys; r = float(sys.argv[3]); print(float(sys.argv[1]) * r, float(sys.argv[2]) * r)" \
                                  "$rate" "$first_rate" "$model_ratio")
    else
      value=$rate first=$first_rate
    fi
    row+=" | $(figure "$measure" "$value" "$sink")$([ "$ok" = yes ] || echo ' RESULT CHECK FAILED')"
    first_row+=" | $(figure "$measure" "$first" "$sink_first")"
    if [ -n "$RECORDS" ]; then
      python3 -c "
import json, sys
name, measure, backend, ok = sys.argv[1:5]
sink, value, cpu, first_sink, first_value, first_cpu = (float(x) if x else None for x in sys.argv[5:])
print(json.dumps({'workload': name, 'measure': measure, 'backend': backend, 'sink': sink, 'value': value,
                  'cpu': cpu, 'first_round_sink': first_sink, 'first_round_value': first_value,
                  'first_round_cpu': first_cpu, 'rounds': $ROUNDS, 'checked': ok == 'yes'}))" \
        "$name" "$measure" "$backend" "$ok" "$sink" "$value" "$cpu_value" "$sink_first" "$first" "$cpu_first" >>"$RECORDS"
    fi
    if [ "$measure" = model ]; then
      verdicts+=" $backend $(python3 -c "
import sys
v, s, goal = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print('met' if s and v / s >= goal else 'missed')" "$value" "$sink" "$goal")"
    fi
    if [ "$backend" = cpu ]; then
      cpu_value=$value cpu_first=$first
    elif [ "$backend" != thrust-omp ] && [ "$measure" != model ]; then
      verdicts+=" $backend $(python3 -c "
import sys
v, s, goal, cpu = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
verdict = 'met' if s and v / s >= goal else 'missed'
print(verdict + (f', {\"at least\" if v >= float(cpu) else \"below\"} cpu' if cpu else ''))" "$value" "$sink" "$goal" "$cpu_value")"
    fi
  done
  echo "$row | >= $(python3 -c "print(f'{100 * float(\"$goal\"):.0f}')")% of the sink$([ "$measure" = model ] && echo "'s bytes in model bytes"):${verdicts:- (device backends only)} |"
  first_rows+=("$first_row | (reported) |")
done
if [ "$ROUNDS" -gt 1 ]; then
  echo "first rounds (each server fresh, its one-time costs included):"
  echo "$header"
  printf '%s\n' "${first_rows[@]}"
fi
for staging in "$LOGS"/*.staging; do
  [ -s "$staging" ] || continue
  echo "staging metrics after $(basename "$staging" .staging):"
  sed 's/^/    /' "$staging"
done
echo "logs: $LOGS"
exit "$failed"
