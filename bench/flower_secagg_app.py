#!/usr/bin/env python3
"""Flower 1.41's SecAgg+ on the same round fedagg's secure aggregation benchmark runs
(bench/flower_secagg_bench.sh, docs/BENCHMARKS.md section 10b): a Flower simulation
(flwr.simulation.run_simulation) of N clients, each returning a float32[P] update with
values uniform in [-1, 1], summed (a FedAvg mean of weight-1 updates) through Flower's
SecAggPlusWorkflow and the client mod secaggplus_mod, one round.

SecAgg+ settings: Flower's defaults for clipping_range (8), quantization_range (2^22) and
modulus_range (2^32); max_weight 1 (every client weighs 1, so the quantization keeps its
full 22 bits); the graph is fedagg's default: each client has min(DEGREE, N - 1)
neighbours (num_shares = neighbours + 1: Flower counts the client itself), threshold half
the neighbours plus one. --dropout F makes that fraction of the clients raise instead of
answering one stage: "unmask" (after their masked input, fedagg-loadgen's
--leave_before_unmasking) or "input" (before it, --leave_before_input); the workflow counts
an error reply as a dropped client (it waits for every reply, so no timeout is needed).

Measures, and prints as one JSON line (and writes to --report):
  round_s      the fit workflow's wall time: from the ServerApp starting the round (setup
               stage) to the aggregated parameters (unmasking and aggregate_fit done);
  server_cpu_s this process's CPU seconds in that time (all its threads);
  peak_rss_kib the peak RSS of this process, which is Flower's server side (ServerApp,
               SuperLink state, simulation engine; the ClientApps run in Ray's worker
               processes); peak_anon_kib its anonymous part (sampled, flower_app.py's
               AnonymousPeak: without the engine's shared object-store pages);
  wire_bytes_per_parameter  the bytes of the masked vectors the server received (their
               serialized NumPy arrays, int64), over clients x P;
  max_abs_error the aggregate against the exact mean of the updates it covers.

  flower_secagg_app.py --clients 100 --parameters 1000000 [--dropout 0.3]
                       [--dropout_stage unmask|input] [--degree 64] [--report FILE]
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import numpy as np
from flwr.client import ClientApp, NumPyClient
from flwr.client.mod import secaggplus_mod
from flwr.common import Context, Message, MessageType, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS, Key, Stage
from flwr.server import LegacyContext, ServerApp, ServerConfig
from flwr.server.strategy import FedAvg
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_PARAMS_RECORD
from flwr.simulation import run_simulation

# The Flower example's sampler of this process's anonymous RSS (one helper for both).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client_stub", "python", "examples"))
from flower_app import AnonymousPeak, status_kib  # noqa: E402

STAGES = {"unmask": Stage.UNMASK, "input": Stage.COLLECT_MASKED_VECTORS}


def update(partition: int, parameters: int) -> np.ndarray:
    return np.random.default_rng(partition).uniform(-1, 1, parameters).astype(np.float32)


def make_client_app(parameters: int, dropped: frozenset, stage: str) -> ClientApp:
    class Client(NumPyClient):
        def __init__(self, partition: int):
            self.partition = partition

        def fit(self, _parameters, _config):
            return [update(self.partition, parameters)], 1, {}

    def client_fn(context: Context):
        return Client(int(context.node_config["partition-id"])).to_client()

    def dropout_mod(msg: Message, context: Context, call_next):
        """A client that leaves: it raises instead of answering the chosen stage."""
        if (msg.metadata.message_type == MessageType.TRAIN
                and int(context.node_config["partition-id"]) in dropped
                and msg.content.config_records[RECORD_KEY_CONFIGS].get(Key.STAGE) == STAGES[stage]):
            raise RuntimeError("simulated dropout")
        return call_next(msg, context)

    return ClientApp(client_fn=client_fn, mods=[dropout_mod, secaggplus_mod])


class CountingGrid:
    """The ServerApp's grid, counting the bytes of the masked vectors in the replies."""

    def __init__(self, grid):
        self._grid = grid
        self.masked_bytes = 0
        self.masked_vectors = 0

    def __getattr__(self, name):
        return getattr(self._grid, name)

    def send_and_receive(self, messages, *args, **kwargs):
        replies = list(self._grid.send_and_receive(messages, *args, **kwargs))
        for reply in replies:
            if reply.has_error():
                continue
            configs = reply.content.config_records.get(RECORD_KEY_CONFIGS)
            if configs is not None and Key.MASKED_PARAMETERS in configs:
                self.masked_bytes += sum(len(b) for b in configs[Key.MASKED_PARAMETERS])
                self.masked_vectors += 1
        return replies


class TimedSecAggPlus(SecAggPlusWorkflow):
    """SecAggPlusWorkflow timing its round (setup stage to aggregated parameters)."""

    def __init__(self, report: dict, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.report = report

    def __call__(self, grid, context) -> None:
        started, usage = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        super().__call__(grid, context)
        self.report["round_s"] = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        self.report["server_cpu_s"] = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
        arrays = context.state.array_records[MAIN_PARAMS_RECORD]
        self.report["aggregate"] = [a.numpy() for a in arrays.values()]


def make_server_app(args, report: dict) -> ServerApp:
    app = ServerApp()

    @app.main()
    def main(grid, context: Context) -> None:
        # An empty initial model: the round's FitIns carry no parameters (fedagg-loadgen's
        # clients download none either); each client's update is its own float32[P].
        strategy = FedAvg(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=args.clients,
                          min_available_clients=args.clients, initial_parameters=ndarrays_to_parameters([]))
        legacy = LegacyContext(context=context, config=ServerConfig(num_rounds=1), strategy=strategy)
        neighbours = min(args.degree, args.clients - 1)
        report["num_shares"], report["threshold"] = neighbours + 1, neighbours // 2 + 1
        workflow = TimedSecAggPlus(report, report["num_shares"], report["threshold"], max_weight=1.0,
                                   clipping_range=8.0, quantization_range=2**22, modulus_range=2**32)
        counting = CountingGrid(grid)
        DefaultWorkflow(fit_workflow=workflow)(counting, legacy)
        report["masked_bytes"], report["masked_vectors"] = counting.masked_bytes, counting.masked_vectors

    return app


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--parameters", type=int, default=1_000_000)
    parser.add_argument("--dropout", type=float, default=0.0, help="fraction of clients that leave")
    parser.add_argument("--dropout_stage", choices=sorted(STAGES), default="unmask")
    parser.add_argument("--degree", type=int, default=64, help="neighbours a client has at most")
    parser.add_argument("--report", default="")
    args = parser.parse_args()
    dropped = frozenset(range(math.floor(args.dropout * args.clients)))  # as many as fedagg-loadgen's
    report = {"framework": "flower", "clients": args.clients, "parameters": args.parameters,
              "dropout": args.dropout, "dropout_stage": args.dropout_stage, "dropped": len(dropped),
              "rss_before_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
              "anon_before_kib": status_kib("RssAnon")}
    anonymous = AnonymousPeak()
    run_simulation(make_server_app(args, report), make_client_app(args.parameters, dropped, args.dropout_stage),
                   num_supernodes=args.clients,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}})
    report["peak_anon_kib"] = anonymous.stop()
    report["peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if "round_s" not in report or not report.get("aggregate"):
        raise SystemExit("the SecAgg+ round did not produce an aggregate (see Flower's log above)")
    # Checked after the peaks are read, so the reference's memory is not counted.
    covered = [p for p in range(args.clients) if args.dropout_stage == "unmask" or p not in dropped]
    expected = np.zeros(args.parameters)
    for p in covered:
        expected += update(p, args.parameters)
    expected /= len(covered)
    aggregate = report.pop("aggregate")[0]
    report["max_abs_error"] = float(np.max(np.abs(aggregate - expected)))
    report["wire_bytes_per_parameter"] = report["masked_bytes"] / max(1, report["masked_vectors"]) / args.parameters
    print(json.dumps(report), flush=True)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
    if report["max_abs_error"] > 1e-3:
        raise SystemExit(f"the aggregate is off by {report['max_abs_error']}")


if __name__ == "__main__":
    main()
