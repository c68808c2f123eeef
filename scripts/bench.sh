#!/usr/bin/env bash
# Builds and runs fedagg's benchmarks (never part of the tests), then prints one summary
# table with every figure beside its goal:
#   1. the core reduction against the memory-bandwidth baseline (bench/core_reduction_bench.cc;
#      medians of repeated runs, spread printed beside them);
#   2. the service benchmarks of bench/service_bench.sh: ingest against a bare gRPC sink,
#      round overhead through a root and two intermediate aggregators, peak memory per
#      aggregation, 10,000 logical clients. Each checks its own result.
#   scripts/bench.sh [--benchmark_filter=REGEX ...]  [--updates_1m=N --memory_updates=100,1000,10000 ...]
# Options starting with --benchmark_ go to the core benchmark, the others to
# bench/service_bench.sh (its header lists them). The default run takes a few minutes
# on 2 cores. Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."

core_args=() service_args=()
for arg in "$@"; do
  if [[ $arg == --benchmark_* ]]; then core_args+=("$arg"); else service_args+=("$arg"); fi
done

./scripts/setup.sh
./scripts/build.sh default fedagg_core_bench fedagg-server fedagg-loadgen fedagg-raw-sink
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -m), $(date -u +%F)"
OUT=$(mktemp -d /tmp/fedagg-bench.XXXXXX)
./build/bench/fedagg_core_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_min_time=0.5 --benchmark_out="$OUT/core.json" --benchmark_out_format=json "${core_args[@]}"
for case in ingest rounds memory scale; do
  echo "=== $case ==="
  ./bench/service_bench.sh build "$case" "${service_args[@]}" | tee -a "$OUT/service.log"
done
python3 bench/summary.py "$OUT/core.json" "$OUT/service.log"
echo "raw outputs: $OUT"
