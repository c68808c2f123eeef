#!/usr/bin/env bash
# fedagg against NVIDIA FLARE and Flower run as services, as their users deploy them, each
# over its own transport, on this machine (issue 24; docs/BENCHMARKS.md section 3, "Peers
# as services"). One round: N clients each send a fixed update (client i: vector i % 4 of
# 4 seeded random float32 vectors, weight 1 + i % 7), the server takes their weighted mean,
# checked against a float64 NumPy reference (a failed check prints no figure and fails the
# script). Contenders, and how N clients share this machine's 2 cores:
#   NVIDIA FLARE 2.9.0  the simulator's multi-process mode (`nvflare simulator -n N -t T`):
#                       the FLARE server in the simulator process, every client's job in a
#                       worker process connected to it over FLARE's cell network (TCP);
#                       T workers at a time, a new one for each next client. A
#                       ScatterAndGather (FedAvg) job with the in-time accumulating
#                       aggregator (bench/peers_service/flare_job.py). POC mode needs two
#                       processes per client (client parent and job), too many for N = 100 here.
#   Flower 1.41.0       a SuperLink and S SuperNodes (flower-superlink, flower-supernode,
#                       HTTP, subprocess isolation) and `flwr run` of a ServerApp that sends
#                       N messages, client c's to SuperNode c % S, each answered by a
#                       ClientApp process its SuperExec starts, and aggregates with FedAvg's
#                       aggregate_train (bench/peers_service/flower_apps.py).
#   fedagg              a root, and a root + 2 intermediate aggregators (clients to the
#                       intermediates), of build/service/fedagg-server, fed by one Python
#                       process of the fedagg package (N logical clients from T threads), and
#                       the root fed by fedagg-loadgen (T in flight, one channel: the wire-speed
#                       reference; its own updates, weights and float64 check).
# Round time: first update sent -> aggregate available at the server. Memory: the server
# processes' peak RSS above their idle RSS, summed (bench/peers_service/process_memory.py).
# --runs rounds each; the table shows median [min-max], ratios to the best peer and the
# goals (fedagg round <= 0.33x the best peer's, memory <= 0.5x).
#   bench/peers_service_bench.sh BUILD_DIR [--quick] [--clients=100,1000] [--sizes=16,1] [--runs=3]
#       [--python_threads=4] [--flare_threads=10] [--flower_nodes=4]
# Sizes in MB (10^6 bytes). Defaults: --clients=100 --sizes=16 --runs=3 (11 minutes on 2 cores,
# 9 of them FLARE's and Flower's rounds); --sizes=16,1 adds about 7. --quick: N = 20, 1 MB,
# one run (about a minute): a check that every contender works. N = 1000 is opt-in
# (--clients=100,1000): FLARE and Flower then start 1,000 client processes a round, and
# Flower is not run at 16 MB (its servers would hold the 16 GB of replies).
# The first run installs flwr and nvflare into BUILD_DIR/peers from the package index.
set -euo pipefail
BUILD=$(cd "$1" && pwd); shift
REPO=$(cd "$(dirname "$0")/.." && pwd)
args=()
for arg in "$@"; do
  case $arg in
    --quick) args+=(--clients=20 --sizes=1 --runs=1) ;;
    *) args+=("$arg") ;;
  esac
done
source "$REPO/bench/peers_envs.sh"
source "$REPO/tests/e2e/e2e_lib.sh"
e2e_start_tree "$BUILD/service/fedagg-server"
"$PEER_PYTHON" "$REPO/bench/peers_service/run_bench.py" --peer_bin="$(dirname "$PEER_PYTHON")" \
    --fedagg_python="$FEDAGG_PYTHON" --loadgen="$BUILD/client_stub/fedagg-loadgen" \
    --fedagg_root="127.0.0.1:$ROOT" --fedagg_intermediates="127.0.0.1:$I1,127.0.0.1:$I2" \
    --fedagg_pids="$(IFS=,; echo "${E2E_PIDS[*]}")" "${args[@]}" &
E2E_PIDS+=($!)  # stopped by e2e_lib's trap when this script is interrupted
wait $!
