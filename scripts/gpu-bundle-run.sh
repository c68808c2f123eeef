#!/usr/bin/env bash
# run.sh of the GPU bundle (scripts/gpu-bundle.sh copies it there): on a machine with the
# NVIDIA driver and the CUDA 13 libraries, unpacks the programs and libraries of
# payload.tar.gz beside itself, runs fedagg's GPU check and writes one report:
#   1. every program finds its libraries (the bundle's lib/, then CUDA's own);
#   2. fedagg-selftest --backend=cuda: every intrinsic and dtype against the reference;
#   3. the cuda-labelled test binaries (fedagg_cuda_test, fedagg_cuda_conformance_test);
#   4. fedagg_gpu_bench: bandwidth figures against the device's own copies; then secure
#      aggregation's unmasking of 1,000 clients over 1M coordinates (30% dropped after
#      their masked input) with the masks expanded on the device, and on the host's cores
#      beside it (fedagg-secagg-unmask-bench, issue 49's goal: <= 1 s on the device);
#   5. a service round on the cuda plugin: a root with --backend=cuda and an intermediate
#      with --backend=auto (which must find the device and load the plugin), fedagg-demo's
#      clients through the intermediate, the result checked against the float64 reference;
#      then a secure aggregation through the same two (fedagg-loadgen, 200 clients in
#      cohorts of 100, 10% leaving before unmasking): the root unmasks on the device
#      (the cuda backend's mask adder), and the result must be the exact sum.
#   6. the service table (service-table.sh beside this script): fedagg-loadgen against the
#      cpu and cuda backends and the bare gRPC sink, five workloads, two rounds on each
#      server: the second's ratios and goals, then the first's apart;
#   7. how small updates scale with the node's cores: the small row again (cpu backend and
#      sink, 30,000 updates) with the servers on 2, 4 and 8 of the machine's CPUs, then on
#      all of them with four load generators at once;
#   8. where the servers' CPU goes on the rows where cuda trails cpu (dense 1 MiB, the
#      sparse rows; dense 16 MiB beside them): CPU profiles of the cpu and cuda servers
#      (gperftools, when the bundle carries it) in logs/profiles, read where the bundle was made
#      (docs/GPU.md, "On a machine with a GPU").
#   ./run.sh [REPORT]   (default: report.txt beside this script; logs in logs/)
# Exit status: 0 all passed, 1 something failed, 77 no usable CUDA device (the report says
# why, and nothing else is run).
set -uo pipefail
DIR=$(cd "$(dirname "$0")" && pwd)
REPORT=${1:-$DIR/report.txt}
LOGS=$DIR/logs
mkdir -p "$LOGS"
# The programs unpacked, and the libraries they load found (env.sh: scripts/gpu-bundle-env.sh).
source "$DIR/env.sh"

failed=0
say() { echo "$*" | tee -a "$REPORT"; }
step() {  # step NAME COMMAND...: runs it with its log in logs/NAME.log, reports PASS/FAIL
  local name=$1; shift
  if "$@" >"$LOGS/$name.log" 2>&1; then
    say "PASS $name"
  else
    say "FAIL $name (exit $?; logs/$name.log)"
    tail -n 20 "$LOGS/$name.log" | sed 's/^/    /' | tee -a "$REPORT"
    failed=1
  fi
}

: >"$REPORT"
say "fedagg GPU check, bundle of commit $(cat "$DIR/COMMIT" 2>/dev/null || echo unknown), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1 || echo 'nvidia-smi not found')"

# 1. Libraries: each program finds every one, and those the bundle carries come from it.
for program in "$DIR"/bin/*; do
  resolved=$(ldd "$program" 2>&1)
  missing=$(awk '/not found/ {print $1}' <<<"$resolved" | tr '\n' ' ')
  elsewhere=$(awk -v lib="$DIR/lib" '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<<"$resolved" |
              while read -r name path; do
                [ -f "$DIR/lib/$name" ] && [ "$path" != "$DIR/lib/$name" ] && echo -n "$name ($path) "
              done)
  if [ -n "$missing" ]; then
    say "FAIL libraries of $(basename "$program"): not found: $missing(LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
    failed=1
  fi
  if [ -n "$elsewhere" ]; then
    say "FAIL libraries of $(basename "$program"): loaded from outside the bundle: $elsewhere"
    failed=1
  fi
done
[ "$failed" = 0 ] && say "PASS libraries: every program finds its libraries, the bundle's from the bundle"
if [ "$failed" != 0 ]; then say "RESULT: FAIL"; exit 1; fi

# 2. Selftest; 77 means no usable device.
"$DIR/bin/fedagg-selftest" --backend=cuda >"$LOGS/selftest.log" 2>&1
rc=$?
if [ "$rc" = 77 ]; then
  say "NO DEVICE: $(tail -n 1 "$LOGS/selftest.log")"
  say "RESULT: NO DEVICE (nothing else was run)"
  exit 77
fi
if [ "$rc" = 0 ]; then say "PASS selftest"; else say "FAIL selftest (exit $rc; logs/selftest.log)"; failed=1; fi
sed 's/^/    /' "$LOGS/selftest.log" >>"$REPORT"

# 3. The cuda-labelled tests.
step cuda_test "$DIR/bin/fedagg_cuda_test"
step cuda_conformance_test "$DIR/bin/fedagg_cuda_conformance_test"

# 4. The GPU benchmark: its figures go in the report.
step gpu_bench "$DIR/bin/fedagg_gpu_bench"
grep -E "GB/s|%|BM_| ms|indices|pinned" "$LOGS/gpu_bench.log" | sed 's/^/    /' >>"$REPORT"
step secagg_unmask_cuda "$DIR/bin/fedagg-secagg-unmask-bench" --masks=cuda
step secagg_unmask_cpu "$DIR/bin/fedagg-secagg-unmask-bench" --masks=cpu
grep -h "^cohort\|^unmasking" "$LOGS/secagg_unmask_cuda.log" "$LOGS/secagg_unmask_cpu.log" | sed 's/^/    /' >>"$REPORT"

# 5. A service round on the cuda backend, checked against the reference by fedagg-demo.
service_round() {
  local root=$((20000 + RANDOM % 20000)) pids=() rc=0
  "$DIR/bin/fedagg-server" --listen="127.0.0.1:$root" --metrics_address= --backend=cuda >"$LOGS/root.log" 2>&1 &
  pids+=($!)
  "$DIR/bin/fedagg-server" --listen="127.0.0.1:$((root + 1))" --metrics_address= --backend=auto \
      --parent="127.0.0.1:$root" --node_id=intermediate >"$LOGS/intermediate.log" 2>&1 &
  pids+=($!)
  sleep 2
  grep -h "reduction backend" "$LOGS/root.log" "$LOGS/intermediate.log"
  "$DIR/bin/fedagg-demo" --root="127.0.0.1:$root" --intermediates="127.0.0.1:$((root + 1))" --clients=50 || rc=$?
  "$DIR/bin/fedagg-loadgen" --control="127.0.0.1:$root" --servers="127.0.0.1:$((root + 1))" --clients=200 \
      --concurrency=200 --type='<w=float32[100000]>' --encoding=discretized:32@0.0001 \
      --secure=cohort=100,timeout_ms=30000 --leave_before_unmasking=0.1 --json >"$LOGS/secure_round.json" || rc=$?
  grep -q '"passed": true' "$LOGS/secure_round.json" && echo "secure round unmasked on the device: exact" ||
    { echo "the secure round failed its check"; rc=1; }
  kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  grep -q "reduction backend cuda" "$LOGS/root.log" || { echo "the root did not reduce on the cuda backend"; rc=1; }
  grep -q "reduction backend cuda: --backend=auto found a CUDA device" "$LOGS/intermediate.log" ||
    { echo "--backend=auto did not choose the cuda plugin"; rc=1; }
  return "$rc"
}
step service_round service_round
grep -E "FINALIZED|check against|reduction backend|secure round" "$LOGS/service_round.log" | sed 's/^/    /' >>"$REPORT"

# 6. The service table: its figures go in the report.
step service_table "$DIR/service-table.sh" "$DIR/bin" --backends=cpu,cuda
grep -E "^\||^first rounds|^staging|^    fedagg|^    threads|^    peak|^    load generator" "$LOGS/service_table.log" >>"$REPORT"

# 7. Small updates against the servers' cores (docs/SCALING.md, assumption A).
# The table's small row (its second round's; the first rounds' table follows it). awk reads
# to the end: a reader that stops early (grep -m 1) kills the table with SIGPIPE.
first_small_row() { awk '/^\| small/ && !printed {print; printed = 1}'; }
scaling() {
  local cpus
  for cpus in 0-1 0-3 0-7; do
    echo "servers on CPUs $cpus:"
    "$DIR/service-table.sh" "$DIR/bin" --backends=cpu --workloads=small --scale=0.3 --server_cpus="$cpus" | first_small_row
  done
  # One load generator tops out near the sink's rate: four, each with its own aggregation.
  echo "servers on every CPU, 4 load generators:"
  "$DIR/service-table.sh" "$DIR/bin" --backends=cpu --workloads=small --scale=0.3 --loadgens=4 | first_small_row
}
step small_scaling scaling
grep -E "^servers on|^\| small" "$LOGS/small_scaling.log" >>"$REPORT"

# 8. CPU profiles of the cpu and cuda servers on the dense and sparse rows.
profiles() {
  "$DIR/service-table.sh" "$DIR/bin" --backends=cpu,cuda --workloads=dense,sparse,row_sparse \
      --profile_dir="$LOGS/profiles" ||
    return
  # What reading them elsewhere needs (scripts/gpu-profiles.sh): this machine's C library
  # (memcpy and friends are its own), the bundle's commit and where it lay.
  cp -L "$(ldd "$DIR/bin/fedagg-server" | awk '$1 == "libc.so.6" {print $3}')" "$LOGS/profiles/libc.so.6"
  cp "$DIR/COMMIT" "$LOGS/profiles/COMMIT"
  echo "$DIR" >"$LOGS/profiles/bundle-dir"
}
if [ -f "$DIR/profiler/libprofiler.so.0" ]; then
  step profiles profiles
  grep -E "^\||^first rounds" "$LOGS/profiles.log" | grep -v -e '^| workload' -e '^|---' | sed 's/^/    /' >>"$REPORT"
else
  say "SKIP profiles: the bundle carries no libprofiler.so.0"
fi

if [ "$failed" = 0 ]; then say "RESULT: PASS"; exit 0; fi
say "RESULT: FAIL"
exit 1
