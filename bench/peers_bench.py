#!/usr/bin/env python3
"""fedagg against the aggregation functions of the frameworks people use, on the same inputs,
on the same machine, in one run (bench/peers_bench.sh sets up the environments and calls this).

One round is a weighted mean of N client updates, each one float32 vector of D elements.
Client i sends update i % K of a file of K random vectors, with weight 1 + i % 7. Contenders:
  flwr-aggregate          flwr.server.strategy.aggregate.aggregate: the list of every client's
                          NumPy arrays and example count, as Flower's FedAvg holds them
  flwr-aggregate-inplace  flwr.server.strategy.aggregate.aggregate_inplace: FedAvg's default,
                          over FitRes messages carrying serialized parameters
  nvflare-accumulate      nvflare's WeightedAggregationHelper, which the in-time accumulating
                          aggregator adds each arriving update into
  fedagg-cpu-backend      fedagg's CPU backend alone (build/bench/fedagg-backend-round), at the
                          server's default --batch_max_mib=64 and at 1 (each update reduced
                          as soon as it arrives, the smallest footprint)
  fedagg-service          a fedagg-server on loopback, fed over gRPC by the fedagg Python
                          package (4 threads), create -> submit N -> seal -> result
Every in-process contender receives each update as a fresh buffer (a copy of the file's
vector; for aggregate_inplace, its serialized parameters), as if it had just arrived.
Figures per contender: seconds per round (median of --rounds, min and max beside it) and
the peak memory above the process's RSS before the first round (for the service: the
server's peak above its idle RSS; the client process is not counted). Each contender's
mean is checked against a float64 reference; a failed check gives no figure.
Prints one "BENCH {json}" line per contender for bench/summary.py.

  peers_bench.py --build BUILD --peer_python PY --fedagg_python PY [--clients=100]
                 [--elements=4000000] [--distinct=4] [--rounds=5]
  peers_bench.py --contender NAME --updates FILE --elements D --clients N --rounds R --out FILE
                 [--server ADDR]      (one contender in its own process; used by the above)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers_service"))
from service_processes import free_port, wait_port  # noqa: E402 (the path is set just above)

BATCH_FILE_NAME = "updates.f32"


def rss_kib(pid="self", key="VmRSS"):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/{pid}/status")


def weight(client):
    return 1 + client % 7


def arrivals(base, clients):
    """(client, fresh copy of its update, weight) in arrival order."""
    for client in range(clients):
        yield client, base[client % len(base)].copy(), weight(client)


def flwr_aggregate(base, clients):
    from flwr.server.strategy.aggregate import aggregate
    results = [([update], w) for _, update, w in arrivals(base, clients)]
    return aggregate(results)[0]


def flwr_aggregate_inplace(base, clients):
    from flwr.common import Code, FitRes, Status, ndarrays_to_parameters
    from flwr.server.strategy.aggregate import aggregate_inplace
    results = [(None, FitRes(status=Status(code=Code.OK, message=""), parameters=ndarrays_to_parameters([update]),
                             num_examples=w, metrics={}))
               for _, update, w in arrivals(base, clients)]
    return aggregate_inplace(results)[0]


def nvflare_accumulate(base, clients):
    from nvflare.app_common.aggregators.weighted_aggregation_helper import WeightedAggregationHelper
    helper = WeightedAggregationHelper()
    for client, update, w in arrivals(base, clients):
        helper.add(data={"w": update}, weight=w, contributor_name=f"client-{client}", contribution_round=0)
    return helper.get_result()["w"]


def fedagg_service(base, clients, server, round_index):
    from concurrent.futures import ThreadPoolExecutor
    import fedagg
    with fedagg.connect(server, timeout=600) as conn:
        aggregation = f"peers-round-{round_index}"
        status = conn.control.create(
            aggregation, {"w": fedagg.Field("float32", [base.shape[1]], "federated_weighted_mean")})
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda c: conn.submit(f"client-{c}", status, {"w": base[c % len(base)]}, weight=weight(c)),
                          range(clients)))
        conn.control.seal(aggregation)
        final = conn.control.wait(aggregation, timeout=600)
        if final.state != "FINALIZED":
            raise RuntimeError(f"{aggregation} ended {final.state}: {final.detail}")
        return conn.control.result(aggregation)["w"].values


# Each in-process contender, and the module it imports (before the idle RSS reading).
IN_PROCESS = {
    "flwr-aggregate": (flwr_aggregate, "flwr.server.strategy.aggregate"),
    "flwr-aggregate-inplace": (flwr_aggregate_inplace, "flwr.server.strategy.aggregate"),
    "nvflare-accumulate": (nvflare_accumulate, "nvflare.app_common.aggregators.weighted_aggregation_helper"),
}


def run_contender(args):
    """One contender in this process: prints {"seconds": [...], "idle_rss_kib", "peak_rss_kib"}."""
    base = np.fromfile(args.updates, dtype=np.float32).reshape(-1, args.elements)
    if args.contender == "fedagg-service":
        import fedagg  # noqa: F401  (imported before the idle RSS reading, like the peers)
        round_fn = lambda r: fedagg_service(base, args.clients, args.server, r)
    else:
        function, module = IN_PROCESS[args.contender]
        __import__(module)
        round_fn = lambda r: function(base, args.clients)
    idle = rss_kib()
    seconds = []
    for r in range(args.rounds):
        start = time.perf_counter()
        mean = np.asarray(round_fn(r), dtype=np.float32)
        seconds.append(time.perf_counter() - start)
    mean.tofile(args.out)
    print(json.dumps({"seconds": seconds, "idle_rss_kib": idle, "peak_rss_kib": rss_kib(key="VmHWM")}))


def reference_mean(base, clients):
    """The float64 weighted mean the contenders must reproduce."""
    weights = np.zeros(len(base))
    for client in range(clients):
        weights[client % len(base)] += weight(client)
    return (weights @ base.astype(np.float64)) / weights.sum()


def measure(args, work, name, command, reference, server=None):
    """Runs one contender, checks its mean, returns its BENCH record."""
    out = os.path.join(work, name.split()[0] + ".f32")
    report = subprocess.run(command + ["--out", out], check=True, capture_output=True, text=True)
    figures = json.loads(report.stdout.strip().splitlines()[-1])
    if server is not None:  # the server holds the aggregation, not the client process
        figures["idle_rss_kib"] = server["idle_rss_kib"]
        figures["peak_rss_kib"] = rss_kib(server["pid"], "VmHWM")
    mean = np.fromfile(out, dtype=np.float32).astype(np.float64)
    error = float(np.max(np.abs(mean - reference)) / max(np.max(np.abs(reference)), 1e-30))
    model_bytes = 4 * args.elements
    seconds = figures["seconds"]
    return {"bench": "peers", "contender": name, "clients": args.clients, "model_bytes": model_bytes,
            "rounds": len(seconds), "median_s": statistics.median(seconds), "min_s": min(seconds),
            "max_s": max(seconds), "idle_rss_bytes": 1024 * figures["idle_rss_kib"],
            "peak_over_idle_bytes": 1024 * (figures["peak_rss_kib"] - figures["idle_rss_kib"]),
            "max_relative_error": error, "checked": error < 1e-5}


def orchestrate(args):
    rng = np.random.default_rng(7)
    base = rng.uniform(-1, 1, size=(args.distinct, args.elements)).astype(np.float32)
    reference = reference_mean(base, args.clients)
    with tempfile.TemporaryDirectory(prefix="fedagg-peers-") as work:
        updates = os.path.join(work, BATCH_FILE_NAME)
        base.tofile(updates)
        common = ["--updates", updates, "--elements", str(args.elements), "--clients", str(args.clients),
                  "--rounds", str(args.rounds)]
        me = os.path.abspath(__file__)
        records = []
        for name in IN_PROCESS:
            records.append(measure(args, work, name, [args.peer_python, me, "--contender", name] + common,
                                   reference))
        for batch_max_mib in (64, 1):  # the server's default, and one update per batch
            records.append(measure(args, work, f"fedagg-cpu-backend --batch_max_mib={batch_max_mib}",
                                   [os.path.join(args.build, "bench", "fedagg-backend-round"),
                                    f"--updates_file={updates}", f"--elements={args.elements}",
                                    f"--clients={args.clients}", f"--rounds={args.rounds}",
                                    f"--batch_max_mib={batch_max_mib}"], reference))
        port = free_port()
        server = subprocess.Popen([os.path.join(args.build, "service", "fedagg-server"),
                                   f"--listen=127.0.0.1:{port}", "--metrics_address="],
                                  stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "server.log"), "w"))
        try:
            wait_port(port, server, "fedagg-server", seconds=30)
            server_idle_kib = rss_kib(server.pid)
            record = measure(args, work, "fedagg-service",
                             [args.fedagg_python, me, "--contender", "fedagg-service",
                              "--server", f"127.0.0.1:{port}"] + common, reference,
                             server={"pid": server.pid, "idle_rss_kib": server_idle_kib})
            records.append(record)
        finally:
            server.terminate()
            server.wait()
    for record in records:
        print(f"{record['contender']:40s} {record['median_s']:8.3f} s/round (min {record['min_s']:.3f}, "
              f"max {record['max_s']:.3f}), peak {record['peak_over_idle_bytes'] / 1e6:8.0f} MB above idle, "
              f"error {record['max_relative_error']:.1e}{'' if record['checked'] else '  CHECK FAILED'}")
    for record in records:
        print("BENCH " + json.dumps(record))
    return 0 if all(r["checked"] for r in records) else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build")
    parser.add_argument("--peer_python")
    parser.add_argument("--fedagg_python")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--elements", type=int, default=4_000_000)
    parser.add_argument("--distinct", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--contender")
    parser.add_argument("--updates")
    parser.add_argument("--server")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.contender:
        run_contender(args)
        return 0
    if not (args.build and args.peer_python and args.fedagg_python):
        parser.error("--build, --peer_python and --fedagg_python are required")
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
