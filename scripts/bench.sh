#!/usr/bin/env bash
# Builds and runs fedagg's benchmarks (never part of the tests), then prints one summary
# table with every figure beside its goal:
#   1. the core reduction against the memory-bandwidth baseline (bench/core_reduction_bench.cc;
#      medians of 5 repetitions, spread printed beside them); then, printed as it runs, the
#      counted client ids' memory and checkpoint cost (bench/counted_ids_bench.cc);
#   2. the service benchmarks of bench/service_bench.sh: ingest against a bare gRPC sink, ingest with
#      differential privacy's clipping against the same without it,
#      round overhead through a root and two intermediate aggregators, peak memory per
#      aggregation (at the default flags, with one stream and one update per batch, and
#      with updates sent quantized at 8 and 4 bits, against the accumulator and the window),
#      peak memory of a root receiving a child aggregator's partial, 10,000 logical clients,
#      and the service table (scripts/service-table.sh at 0.3 of its counts: the cpu and
#      thrust-omp backends against the sink on five workloads). Each case runs --repeat
#      times (default 3); the table shows the median and [min-max]. Each run checks its
#      own result.
#   3. the peers (bench/peers_bench.sh): Flower's and NVIDIA FLARE's aggregation functions
#      against fedagg's CPU backend and the fedagg service, on the same updates. Its first
#      run installs flwr and nvflare into build/peers from the package index.
#   4. the peers as services (bench/peers_service_bench.sh): an NVIDIA FLARE server and
#      clients, a Flower SuperLink and SuperNodes, and fedagg servers, each over its own
#      transport, N clients sending the same updates; its own table (round time, server
#      memory, goals), printed after the summary.
#   5. the accuracy of the value encodings (bench/encoding_accuracy.sh): fedagg's quantized:1,
#      :2, :4, :8 against NVIDIA FLARE's and TFF's quantizers on test vectors and on a real
#      model's deltas, --repeat runs (seeds 1..N, about a minute each); its own table
#      (median [min-max], goals), printed after the summary, and its picture in the raw
#      outputs. Installs Debian's python3-sklearn and python3-matplotlib if missing. The
#      service table's encoded rows are drawn too (bench/encoding_speed_picture.py).
#   6. DP-FedAvg's model quality (bench/dp_fedavg_quality.sh): digits, 100 clients, epsilon 8,
#      through fedagg beside NumPy with TFF's formulas and Flower's DP wrapper's code, 10 seeds
#      (about a minute); its row in the summary.
#   7. the HTTP path from a browser (bench/browser_upload_bench.sh): a 16 MiB update from
#      headless Chromium through nginx in 1 MiB chunks and in one request, beside
#      fedagg-client's gRPC Submit; its lines after the summary (a few seconds).
#   8. secure aggregation at the node its clients reach (bench/secure_ingest_bench.sh): the
#      leaf's and the root's CPU for plain and secure discretized updates, at 4 MB and 400 kB
#      (about a minute).
#   scripts/bench.sh [--repeat=N] [--benchmark_filter=REGEX ...]  [--updates_1m=N --memory_updates=100,1000,10000 ...]
# Options starting with --benchmark_ go to the core benchmark, --peers_service_* (without
# the prefix, e.g. --peers_service_quick, --peers_service_clients=100,1000) to the peers
# as services, --peers_* (without the prefix) to the peer comparison, the others to
# bench/service_bench.sh (its header lists them). The default run took 27 and 30 minutes
# on 2 cores (`time ./scripts/bench.sh`, two runs on 2026-11-29, docs/BENCHMARKS.md's
# summary), the peers as services about 11 of them; step 5, added since, about 3 more.
# Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."

core_args=() service_args=() peer_args=() peer_service_args=() repeat=3
for arg in "$@"; do
  case $arg in
    --benchmark_*) core_args+=("$arg") ;;
    --peers_service_*) peer_service_args+=("--${arg#--peers_service_}") ;;
    --peers_*) peer_args+=("--${arg#--peers_}") ;;
    --repeat=*) repeat=${arg#--repeat=} ;;
    *) service_args+=("$arg") ;;
  esac
done

./scripts/setup.sh
# What bench/encoding_accuracy.py needs beyond setup.sh's packages (bench only, not the tests).
./scripts/install_packages.sh bench python3-sklearn python3-matplotlib
./scripts/build.sh default fedagg_core_bench fedagg_rounds_bench fedagg-server fedagg-loadgen fedagg-raw-sink \
    fedagg-backend-round
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -m), $(date -u +%F)"
OUT=$(mktemp -d /tmp/fedagg-bench.XXXXXX)
./build/bench/fedagg_core_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_min_time=0.5 --benchmark_out="$OUT/core.json" --benchmark_out_format=json "${core_args[@]}"
./build/bench/fedagg_rounds_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
for run in $(seq "$repeat"); do
  for case in ingest privacy rounds memory partial scale idle python table; do
    echo "=== $case, run $run of $repeat ==="
    ./bench/service_bench.sh build "$case" "${service_args[@]}" | tee -a "$OUT/service.log"
  done
  echo "=== memory with one stream and one update per batch, run $run of $repeat ==="
  ./bench/service_bench.sh build memory --memory_updates=100 --memory_streams=1 --memory_batch_max_mib=1 \
      | tee -a "$OUT/service.log"
  for encoding in quantized:8 quantized:4; do
    echo "=== memory of updates sent $encoding, run $run of $repeat ==="
    ./bench/service_bench.sh build memory --memory_updates=300 --memory_encoding="$encoding" | tee -a "$OUT/service.log"
  done
done
echo "=== peers ==="
./bench/peers_bench.sh build "${peer_args[@]}" | tee -a "$OUT/service.log"
echo "=== peers as services ==="
./bench/peers_service_bench.sh build "${peer_service_args[@]}" | tee "$OUT/peers_service.log"
echo "=== encoding accuracy ==="
encoding_runs=()
for run in $(seq "$repeat"); do
  ./bench/encoding_accuracy.sh --seed="$run" --json="$OUT/encoding-$run.json" >"$OUT/encoding-$run.log"
  echo "seed $run: $(tail -n 1 "$OUT/encoding-$run.log")"
  encoding_runs+=("$OUT/encoding-$run.json")
done
./bench/encoding_accuracy.sh --combine "${encoding_runs[@]}" --picture="$OUT/encoding-accuracy.png" \
    >"$OUT/encoding.log"
echo "=== DP-FedAvg's model quality ==="
./bench/dp_fedavg_quality.sh build | tee -a "$OUT/service.log"
# The encoded rows of the service table, drawn (the speed of compressed updates).
/usr/bin/python3 bench/encoding_speed_picture.py "$OUT/encoding-speed.png" "$OUT/service.log" || true  # Debian's matplotlib
python3 bench/summary.py "$OUT/core.json" "$OUT/service.log"
echo "peers as services (bench/peers_service_bench.sh):"
sed -n '/^| contender/,$p' "$OUT/peers_service.log"
echo
cat "$OUT/encoding.log"
echo "the HTTP path from a browser (bench/browser_upload_bench.sh):"
./bench/browser_upload_bench.sh build | tee "$OUT/browser_upload.log"
echo "secure aggregation at the leaf (bench/secure_ingest_bench.sh):"
./bench/secure_ingest_bench.sh build | tee "$OUT/secure_ingest.log"
./bench/secure_ingest_bench.sh build --clients=1000 --coordinates=100000 | tee -a "$OUT/secure_ingest.log"
echo "raw outputs: $OUT"
