#!/usr/bin/env bash
# fedagg's service benchmarks: real fedagg-server processes on loopback driven by
# fedagg-loadgen, whose own result check must pass for a figure to count. Each case prints
# one line "BENCH {json}" (scripts/bench.sh turns them into its summary table) after the
# load generator's report.
#   bench/service_bench.sh BUILD_DIR ingest [--streams=8] [--updates_1k=20000] [--updates_1m=1000] [--updates_64m=6]
#                                           [--root_flags='--ingest_window_mib=0 ...']
#   bench/service_bench.sh BUILD_DIR privacy [--streams=8] [--privacy_updates_1m=1000] [--privacy_updates_16m=60]
#   bench/service_bench.sh BUILD_DIR rounds [--rounds_small=20] [--rounds_large=5]
#   bench/service_bench.sh BUILD_DIR memory [--memory_updates=100,1000,10000] [--model_floats=4000000]
#                                           [--memory_streams=4] [--memory_batch_max_mib=64] [--root_flags=...]
#                                           [--memory_encoding=quantized:8]
#   bench/service_bench.sh BUILD_DIR partial [--partial_updates=4] [--partial_floats=16777216]
#   bench/service_bench.sh BUILD_DIR scale  [--scale_clients=10000] [--scale_concurrency=1000]
#   bench/service_bench.sh BUILD_DIR acks   [--acks_clients=400] [--acks_concurrency=16]
#   bench/service_bench.sh BUILD_DIR idle   [--idle_server=PATH]
#   bench/service_bench.sh BUILD_DIR python [--python_updates=80] [--python_threads=1,4]
#   bench/service_bench.sh BUILD_DIR table  [--table_scale=0.3] [--table_backends=cpu,thrust-omp]
#   bench/service_bench.sh BUILD_DIR results [--results_rounds=24] [--results_mib=256,0] [--results_pause_s=12]
# ingest:  N concurrent streams of 1 KiB, 1 MiB and 64 MiB updates through fedagg-server
#          (validation, batching, reduction) and through fedagg-raw-sink (a bare gRPC sink
#          receiving the same chunked messages); payload bytes/s, updates/s and the ratio.
# privacy: the same ingest with and without differential privacy (clip=1, z=1, so every
#          generated update is clipped: its norm computed and its values scaled), one after
#          the other at fresh roots, 1 MiB and 16 MiB float32 federated_mean updates; the
#          payload rates and their ratio (issue 48's goal: clipping costs <= 10%).
# rounds:  create -> N tiny contributions through a root and two intermediate aggregators
#          -> result, repeated; median and p99 latency per round for N = 10 and 1,000.
# memory:  peak RSS (VmHWM) of a root aggregating M updates of a 16 MB model from S concurrent
#          streams, at the server's --batch_max_mib, against the model size and the idle RSS;
#          with --memory_encoding, the updates in that value encoding (fedagg-loadgen
#          --encoding), and the root's ingest window (its --ingest_window_mib, read from its
#          log) beside, for the goal peak - idle <= accumulator + window.
# partial: peak RSS (VmHWM) of a root receiving one child aggregator's partial of a 64 MB
#          model (its final push at SEAL; M updates went to the child), against the model
#          size and the root's idle RSS. The root holds its own accumulator, the partial
#          decoded, and the chunks in flight.
# --root_flags: more flags for the root server of the ingest and memory cases (default
#          none: the server's defaults), e.g. to measure a baseline without the ingest window.
# scale:   10,000 logical clients through a root and two intermediate aggregators:
#          updates/s and each server's peak RSS.
# acks:    ack latency (p50, p99 per client) under a root with --checkpoint_dir, with the
#          default --checkpoint_interval and --forward_interval_ms: RECEIVED and DURABLE at
#          the root, and through one intermediate aggregator.
# python:  the Python client's payload rate (bench/python_client_rate.py: Connection.submit
#          of 16 MiB float32 updates from T threads over one channel) against
#          fedagg-loadgen's with T updates in flight over one channel, at one root with the
#          default flags, both results checked. Runs in .venv-frameworks (scripts/setup.sh),
#          the package installed from this tree.
# table:   scripts/service-table.sh on this machine: fedagg-loadgen, 16 channels, against
#          one root per backend and fedagg-raw-sink, five workloads (dense 16 MiB and 1 MiB,
#          sparse_sum and row_sparse_sum at 1%, ~4.8 KB updates) at --table_scale of the
#          GPU check's counts; one BENCH line per workload and backend (rate, the sink's,
#          the cpu backend's of the same row).
# results: the RSS of a root that keeps the results of two phases of R rounds one after
#          the other (2 updates each) of a 16 MiB float32 sum, with a pause between them
#          longer than the 10 s a new result is kept whatever the bound, at each value of
#          --retain_finished_mib given (0: no bound in bytes): after each phase, against its
#          idle RSS and the results' bytes.
# idle:    the RSS of a server that serves nothing yet, with the default flags
#          (--backend=auto), a second after it is ready; --idle_server measures another
#          binary (an older build) the same way.
set -euo pipefail
BUILD=$(cd "$1" && pwd); CASE=$2; shift 2
source "$(dirname "$0")/../tests/e2e/e2e_lib.sh"
SERVER=$BUILD/service/fedagg-server
LOADGEN=$BUILD/client_stub/fedagg-loadgen
SINK=$BUILD/bench/fedagg-raw-sink

declare -A OPT=([streams]=8 [updates_1k]=20000 [updates_1m]=1000 [updates_64m]=6 [rounds_small]=20 [rounds_large]=5
                [memory_updates]=100,1000,10000 [model_floats]=4000000 [memory_streams]=4 [memory_batch_max_mib]=64 [memory_encoding]= [root_flags]= [partial_updates]=4 [partial_floats]=16777216 [scale_clients]=10000 [scale_concurrency]=1000 [acks_clients]=400 [acks_concurrency]=16 [idle_server]= [python_updates]=80 [python_threads]=1,4 [table_scale]=0.3 [table_backends]=cpu,thrust-omp [results_rounds]=24 [results_mib]=256,0 [results_pause_s]=12 [privacy_updates_1m]=1000 [privacy_updates_16m]=60)
for arg in "$@"; do
  key=${arg#--}; key=${key%%=*}
  [ -n "${OPT[$key]+set}" ] && [[ $arg == --*=* ]] || { echo "unknown option $arg" >&2; exit 2; }
  OPT[$key]=${arg#*=}
done

PORT=$E2E_BASE
next_port() { PORT=$((PORT + 1)); }
rss_kib() { awk -v key="$2:" '$1 == key {print $2}' "/proc/$1/status"; }  # rss_kib PID VmHWM|VmRSS
stop_all() { kill "${E2E_PIDS[@]}" 2>/dev/null || true; wait "${E2E_PIDS[@]}" 2>/dev/null || true; E2E_PIDS=(); }
start_root() {  # start_root [flags...]; sets ROOT and ROOT_PID
  next_port; ROOT=$PORT; next_port
  e2e_start_server "$SERVER" "root-$ROOT" "$ROOT" "$PORT" "$@"; ROOT_PID=${E2E_PIDS[-1]}
}
start_tree() {  # start_tree: a root and two intermediate aggregators; sets MIDS and MID_PIDS
  start_root
  MIDS=(); MID_PIDS=()
  for name in a b; do
    next_port; local port=$PORT; next_port
    e2e_start_server "$SERVER" "mid-$name-$port" "$port" "$PORT" --parent="127.0.0.1:$ROOT" --forward_interval_ms=100
    MIDS+=("127.0.0.1:$port"); MID_PIDS+=("${E2E_PIDS[-1]}")
  done
}
loadgen() {  # loadgen OUT.json [flags...]: the run's JSON report, printed too; fails the bench when the check fails
  local out=$1; shift
  if ! "$LOADGEN" --json "$@" >"$out"; then cat "$out"; echo "fedagg-loadgen failed: no figure" >&2; exit 1; fi
  cat "$out"
}
emit() { echo "BENCH $1"; }  # emit JSON

case $CASE in
ingest)
  for size in 1k 1m 64m; do
    case $size in
      1k)  floats=256;      updates=${OPT[updates_1k]};  streams=${OPT[streams]}; distinct=8 ;;
      1m)  floats=262144;   updates=${OPT[updates_1m]};  streams=${OPT[streams]}; distinct=8 ;;
      64m) floats=16777216; updates=${OPT[updates_64m]}; streams=2;               distinct=2 ;;
    esac
    args=(--clients="$updates" --concurrency="$streams" --channels="$streams" --distinct_updates=$distinct
          --type="<w=float32[$floats]>" --intrinsics=federated_sum)
    start_root ${OPT[root_flags]}
    loadgen "$E2E_DIR/fedagg-$size.json" --control="127.0.0.1:$ROOT" "${args[@]}"
    stop_all
    next_port; sink_port=$PORT
    "$SINK" --listen="127.0.0.1:$sink_port" 2>"$E2E_DIR/sink.log" & E2E_PIDS+=($!)
    e2e_wait_port "$sink_port"
    loadgen "$E2E_DIR/sink-$size.json" --sink --servers="127.0.0.1:$sink_port" "${args[@]}"
    stop_all
    emit "$(python3 - "$E2E_DIR/fedagg-$size.json" "$E2E_DIR/sink-$size.json" "$size" "$streams" "${OPT[root_flags]}" <<'PY'
import json, sys
f, s = (json.load(open(p)) for p in sys.argv[1:3])
ft, st = f["throughput"], s["throughput"]
print(json.dumps({"bench": "ingest", "size": sys.argv[3], "streams": int(sys.argv[4]), "root_flags": sys.argv[5],
                  "updates": f["updates"]["counted"], "update_bytes": f["payload_bytes_per_update"],
                  "fedagg_bytes_per_s": ft["payload_bytes_per_s"], "fedagg_updates_per_s": ft["updates_per_s"],
                  "sink_bytes_per_s": st["payload_bytes_per_s"], "sink_updates_per_s": st["updates_per_s"],
                  "ratio": ft["payload_bytes_per_s"] / st["payload_bytes_per_s"], "checked": f["passed"]}))
PY
)"
  done ;;
privacy)
  for size in 1m 16m; do
    case $size in
      1m)  floats=262144;  updates=${OPT[privacy_updates_1m]} ;;
      16m) floats=4194304; updates=${OPT[privacy_updates_16m]} ;;
    esac
    args=(--clients="$updates" --concurrency="${OPT[streams]}" --channels="${OPT[streams]}" --distinct_updates=8
          --type="<w=float32[$floats]>" --intrinsics=federated_mean)
    for mode in plain private; do
      privacy=(); [ "$mode" = private ] && privacy=(--privacy="clip=1,z=1,clients=$updates")
      start_root ${OPT[root_flags]}
      loadgen "$E2E_DIR/$mode-$size.json" --control="127.0.0.1:$ROOT" "${args[@]}" "${privacy[@]}"
      stop_all
    done
    emit "$(python3 - "$E2E_DIR/plain-$size.json" "$E2E_DIR/private-$size.json" "$size" "${OPT[streams]}" <<'PY'
import json, sys
plain, private = (json.load(open(p)) for p in sys.argv[1:3])
pt, qt = plain["throughput"], private["throughput"]
print(json.dumps({"bench": "privacy", "size": sys.argv[3], "streams": int(sys.argv[4]),
                  "updates": plain["updates"]["counted"], "update_bytes": plain["payload_bytes_per_update"],
                  "plain_bytes_per_s": pt["payload_bytes_per_s"], "private_bytes_per_s": qt["payload_bytes_per_s"],
                  "ratio": qt["payload_bytes_per_s"] / pt["payload_bytes_per_s"],
                  "checked": plain["passed"] and private["passed"]}))
PY
)"
  done ;;
rounds)
  start_tree
  for n in 10 1000; do
    rounds=${OPT[rounds_small]}; [ "$n" -ge 1000 ] && rounds=${OPT[rounds_large]}
    loadgen "$E2E_DIR/rounds-$n.json" --control="127.0.0.1:$ROOT" --servers="$(IFS=,; echo "${MIDS[*]}")" \
        --clients="$n" --rounds="$rounds" --concurrency=256 --type='<w=float32[16]>' --intrinsics=federated_sum
    emit "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({"bench": "rounds", "clients": r["clients_per_round"], "rounds": r["rounds"], "median_ms": r["round_ms"]["median"], "p99_ms": r["round_ms"]["p99"], "checked": r["passed"]}))' "$E2E_DIR/rounds-$n.json")"
  done
  stop_all ;;
memory)
  IFS=, read -ra ms <<<"${OPT[memory_updates]}"
  for m in "${ms[@]}"; do
    start_root --batch_max_mib="${OPT[memory_batch_max_mib]}" ${OPT[root_flags]}
    idle=$(rss_kib "$ROOT_PID" VmRSS)
    loadgen "$E2E_DIR/memory-$m.json" --control="127.0.0.1:$ROOT" --clients="$m" \
        --concurrency="${OPT[memory_streams]}" --channels="$(( OPT[memory_streams] < 2 ? 1 : 2 ))" \
        --distinct_updates=2 --type="<w=float32[${OPT[model_floats]}]>" --intrinsics=federated_sum \
        --encoding="${OPT[memory_encoding]}"
    peak=$(rss_kib "$ROOT_PID" VmHWM)
    window_mib=$(sed -n 's/.*ingest window \([0-9]*\) MiB.*/\1/p' "$E2E_DIR/root-$ROOT.log" | head -n 1)
    stop_all
    emit "$(python3 -c 'import json,sys; m,idle,peak,model,streams,batch=map(int,sys.argv[1:7]); r=json.load(open(sys.argv[7])); print(json.dumps({"bench": "memory", "updates": m, "model_bytes": model, "streams": streams, "batch_max_mib": batch, "root_flags": sys.argv[8], "encoding": sys.argv[9] or "plain", "payload_bytes_per_update": r["payload_bytes_per_update"], "ingest_window_bytes": int(sys.argv[10] or 0) << 20, "idle_rss_bytes": idle*1024, "peak_rss_bytes": peak*1024, "peak_over_idle_in_models": (peak-idle)*1024/model, "checked": r["passed"]}))' \
        "$m" "$idle" "$peak" $((OPT[model_floats] * 4)) "${OPT[memory_streams]}" "${OPT[memory_batch_max_mib]}" "$E2E_DIR/memory-$m.json" "${OPT[root_flags]}" "${OPT[memory_encoding]}" "$window_mib")"
  done ;;
partial)
  start_root
  next_port; mid=$PORT; next_port
  e2e_start_server "$SERVER" "mid-$mid" "$mid" "$PORT" --parent="127.0.0.1:$ROOT" --forward_interval_ms=600000
  idle=$(rss_kib "$ROOT_PID" VmRSS)
  loadgen "$E2E_DIR/partial.json" --control="127.0.0.1:$ROOT" --servers="127.0.0.1:$mid" \
      --clients="${OPT[partial_updates]}" --concurrency=2 --channels=1 --distinct_updates=2 \
      --type="<w=float32[${OPT[partial_floats]}]>" --intrinsics=federated_sum
  peak=$(rss_kib "$ROOT_PID" VmHWM)
  stop_all
  emit "$(python3 -c 'import json,sys; m,idle,peak,model=map(int,sys.argv[1:5]); print(json.dumps({"bench": "partial", "updates": m, "model_bytes": model, "idle_rss_bytes": idle*1024, "peak_rss_bytes": peak*1024, "peak_over_idle_in_models": (peak-idle)*1024/model, "checked": json.load(open(sys.argv[5]))["passed"]}))' \
      "${OPT[partial_updates]}" "$idle" "$peak" $((OPT[partial_floats] * 4)) "$E2E_DIR/partial.json")" ;;
scale)
  start_tree
  loadgen "$E2E_DIR/scale.json" --control="127.0.0.1:$ROOT" --servers="$(IFS=,; echo "${MIDS[*]}")" \
      --clients="${OPT[scale_clients]}" --concurrency="${OPT[scale_concurrency]}" --channels=4 \
      --type='<w=float32[1024],emb=float32[10000,16]>' --intrinsics=federated_mean,row_sparse_sum --density=1,0.001
  emit "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({"bench": "scale", "clients": r["clients_per_round"], "updates_per_s": r["throughput"]["updates_per_s"], "payload_bytes_per_s": r["throughput"]["payload_bytes_per_s"], "latency_p99_ms": r["latency_ms"]["p99"], "root_peak_rss_bytes": int(sys.argv[2])*1024, "intermediate_peak_rss_bytes": [int(x)*1024 for x in sys.argv[3:]], "checked": r["passed"]}))' \
      "$E2E_DIR/scale.json" "$(rss_kib "$ROOT_PID" VmHWM)" "$(rss_kib "${MID_PIDS[0]}" VmHWM)" "$(rss_kib "${MID_PIDS[1]}" VmHWM)")"
  stop_all ;;
acks)
  start_root --checkpoint_dir="$E2E_DIR/checkpoints-$PORT" --checkpoint_interval=1s
  next_port; mid=$PORT; next_port
  e2e_start_server "$SERVER" "mid-$mid" "$mid" "$PORT" --parent="127.0.0.1:$ROOT" --forward_interval_ms=1000 --child_grace_ms=10000
  for at in root intermediate; do
    server="127.0.0.1:$ROOT"; [ "$at" = intermediate ] && server="127.0.0.1:$mid"
    for level in received durable; do
      loadgen "$E2E_DIR/acks-$at-$level.json" --control="127.0.0.1:$ROOT" --servers="$server" \
          --clients="${OPT[acks_clients]}" --concurrency="${OPT[acks_concurrency]}" --channels=2 \
          --type='<w=float32[16]>' --intrinsics=federated_sum --durable=$([ "$level" = durable ] && echo true || echo false)
      emit "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({"bench": "acks", "at": sys.argv[2], "level": sys.argv[3], "clients": r["clients_per_round"], "concurrency": int(sys.argv[4]), "p50_ms": r["latency_ms"]["p50"], "p99_ms": r["latency_ms"]["p99"], "checked": r["passed"]}))' \
          "$E2E_DIR/acks-$at-$level.json" "$at" "$level" "${OPT[acks_concurrency]}")"
    done
  done
  stop_all ;;
python)
  here=$(cd "$(dirname "$0")" && pwd)
  venv=$here/../.venv-frameworks
  [ -x "$venv/bin/python" ] || { echo "python case: no $venv (scripts/setup.sh makes it)" >&2; exit 1; }
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-index --no-deps --no-build-isolation \
      --force-reinstall "$here/../client_stub/python" >"$E2E_DIR/pip.log" 2>&1 || { cat "$E2E_DIR/pip.log"; exit 1; }
  start_root
  for threads in ${OPT[python_threads]//,/ }; do
    (cd "$E2E_DIR" && "$venv/bin/python" "$here/python_client_rate.py" "127.0.0.1:$ROOT" \
        "${OPT[python_updates]}" "$threads") >"$E2E_DIR/python-$threads.json"
    cat "$E2E_DIR/python-$threads.json"
    loadgen "$E2E_DIR/loadgen-$threads.json" --control="127.0.0.1:$ROOT" --clients="${OPT[python_updates]}" \
        --concurrency="$threads" --channels=1 --type='<w=float32[4194304]>' --intrinsics=federated_sum
    emit "$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); l=json.load(open(sys.argv[2])); lb=l["throughput"]["payload_bytes_per_s"]; print(json.dumps({"bench": "python", "threads": p["threads"], "updates": p["updates"], "python_bytes_per_s": p["bytes_per_s"], "loadgen_bytes_per_s": lb, "ratio": p["bytes_per_s"] / lb, "checked": p["checked"] and l["passed"]}))' \
        "$E2E_DIR/python-$threads.json" "$E2E_DIR/loadgen-$threads.json")"
  done
  stop_all ;;
idle)
  server=${OPT[idle_server]:-$SERVER}
  next_port; port=$PORT; next_port
  e2e_start_server "$server" "idle-$port" "$port" "$PORT"
  sleep 1
  emit "$(python3 -c 'import json,sys; print(json.dumps({"bench": "idle", "server": sys.argv[1], "backend": sys.argv[2], "rss_bytes": int(sys.argv[3]) * 1024, "checked": True}))' \
      "$server" "$(sed -n 's/^fedagg-server: reduction backend \([a-z-]*\).*/\1/p' "$E2E_DIR/idle-$port.log")" \
      "$(rss_kib "${E2E_PIDS[-1]}" VmRSS)")"
  stop_all ;;
table)
  mkdir -p "$E2E_DIR/bin"
  ln -sf "$SERVER" "$LOADGEN" "$SINK" "$E2E_DIR/bin/"
  # The table's own failures (a result that did not check out) are in its records.
  "$(dirname "$0")/../scripts/service-table.sh" "$E2E_DIR/bin" --backends="${OPT[table_backends]}" \
      --scale="${OPT[table_scale]}" --records="$E2E_DIR/table.jsonl" || true
  [ -s "$E2E_DIR/table.jsonl" ] || { echo "service-table.sh measured nothing" >&2; exit 1; }
  while read -r record; do
    emit "$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r.update(bench="table", scale=float(sys.argv[2])); print(json.dumps(r))' \
        "$record" "${OPT[table_scale]}")"
  done <"$E2E_DIR/table.jsonl" ;;
results)
  for mib in ${OPT[results_mib]//,/ }; do
    start_root --retain_finished_mib="$mib"
    idle=$(rss_kib "$ROOT_PID" VmRSS)
    rss=()
    for phase in 1 2; do
      [ "$phase" = 2 ] && sleep "${OPT[results_pause_s]}"
      loadgen "$E2E_DIR/results-$mib-$phase.json" --control="127.0.0.1:$ROOT" --clients=2 --concurrency=2 \
          --channels=1 --rounds="${OPT[results_rounds]}" --id_prefix="phase$phase" --type='<w=float32[4194304]>' \
          --intrinsics=federated_sum
      rss+=("$(rss_kib "$ROOT_PID" VmRSS)")
    done
    emit "$(python3 -c 'import json,sys; mib,rounds,pause,idle,rss1,rss2,peak=map(int,sys.argv[1:8]); print(json.dumps({"bench": "results", "retain_finished_mib": mib, "rounds_per_phase": rounds, "pause_s": pause, "result_bytes": 4194304 * 4, "idle_rss_bytes": idle*1024, "rss_after_phase_1_bytes": rss1*1024, "rss_after_phase_2_bytes": rss2*1024, "peak_rss_bytes": peak*1024, "checked": all(json.load(open(p))["passed"] for p in sys.argv[8:])}))' \
        "$mib" "${OPT[results_rounds]}" "${OPT[results_pause_s]}" "$idle" "${rss[0]}" "${rss[1]}" "$(rss_kib "$ROOT_PID" VmHWM)" \
        "$E2E_DIR/results-$mib-1.json" "$E2E_DIR/results-$mib-2.json")"
    stop_all
  done ;;
*) echo "unknown case '$CASE': ingest, rounds, memory, partial, scale, acks, idle, python, table or results" >&2; exit 2 ;;
esac
