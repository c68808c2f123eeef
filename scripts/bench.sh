#!/usr/bin/env bash
# Builds and runs fedagg's benchmarks (never part of the tests). Each figure is the median
# of repeated runs; the spread (stddev, cv) is printed beside it, and the ratio table at
# the end compares every reduction with the memory-bandwidth baseline over the same bytes.
#   scripts/bench.sh [--benchmark_filter=REGEX] [--benchmark_repetitions=N] ...
# Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/build.sh default fedagg_core_bench
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -m), $(date -u +%F)"
./build/bench/fedagg_core_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_min_time=0.5 "$@"
