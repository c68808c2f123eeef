#!/usr/bin/env python3
"""A Flower simulation whose FedAvg runs on fedagg: a small NumPy model (a linear classifier
over dense features plus a token embedding and a per-token bias), N simulated clients with
their own synthetic data, a few rounds. The embedding's rows and the token biases a client
never sees do not change in its local training, so they go to fedagg as row-sparse and
sparse updates; the dense arrays go as a weighted mean. run_flower_example.sh starts a
fedagg root and two intermediate aggregators and runs this; the Flower tests and the
benchmark (bench/flower_bench.sh) run it too.

  flower_app.py --root 127.0.0.1:50051 --targets 127.0.0.1:50052,127.0.0.1:50053 \
                --clients 8 --rounds 3 [--strategy fedagg|flower] [--vocab 1000]
                [--min_contributions 1] [--encoding quantized:8] [--privacy CLIP,Z] [--refuse PARTITION:ROUND,...]
                [--secure BITS,CLIP,MAX_WEIGHT [--secure_dropout PARTITION:ROUND:STAGE,...]
                 [--stage_timeout_ms MS]] [--client_cpus CPUS] [--dump DIR] [--report FILE]

--strategy flower runs Flower's own FedAvg on the same clients (the updates travel to the
Flower server in the replies). --encoding sends the dense arrays in that value encoding
(FedaggFedAvg's encoding=; the sparse ones stay plain). --privacy CLIP,Z runs DP-FedAvg: each client's
change clipped to L2 norm CLIP, Gaussian noise of Z * CLIP / clients on the mean — with fedagg
(FedaggFedAvg(privacy=...): clipped where received, noised once at its root) or with Flower's own
DifferentialPrivacyServerSideFixedClipping around FedAvg (--strategy flower). --secure BITS,CLIP,MAX_WEIGHT
runs each round as a secure aggregation (FedaggFedAvg(secure=..., secure_bits=BITS, clip_range=CLIP,
max_weight=MAX_WEIGHT, max_clients=--clients); every array dense): the clients of one aggregator form a
cohort and must run at once, so each simulated client takes --client_cpus CPUs (default, with --secure:
this machine's CPUs / --clients), and --clients must not exceed this machine's CPUs + 4 (the simulation
engine's threads); --secure_dropout makes the named clients leave the protocol at STAGE
(before_sharing, before_input, before_unmasking) in the named rounds. --refuse makes the named clients
send a malformed update in the named rounds (to see a failure handled). --dump DIR writes each client's update and each round's
global model as .npz files (to check the result against Flower's FedAvg); --report FILE
writes a JSON summary: per round its seconds and fedagg's report, and the memory of this
process — the Flower server's (ServerApp, SuperLink state and simulation engine; the
ClientApps run in the simulation's worker processes): its peak RSS, and the peak of its
anonymous RSS (AnonymousPeak says why that is the one to compare).
"""
import argparse
import dataclasses
import json
import os
import resource
import threading
import time

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg
from flwr.simulation import run_simulation

FEATURES, EMBED, CLASSES, TOKENS_PER_CLIENT = 16, 8, 4, 24
LEARNING_RATE, LOCAL_STEPS = 0.2, 4


def initial_model(vocab: int):
    rng = np.random.default_rng(0)
    return {
        "embedding": (rng.normal(size=(vocab, EMBED)) * 0.1).astype(np.float32),
        "token_bias": np.zeros(vocab, np.float32),
        "dense.w": (rng.normal(size=(FEATURES, CLASSES)) * 0.1).astype(np.float32),
        "dense.v": (rng.normal(size=(EMBED, CLASSES)) * 0.1).astype(np.float32),
        "dense.b": np.zeros(CLASSES, np.float64),
    }


def status_kib(key: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/self/status")


class AnonymousPeak:
    """The peak of this process's anonymous RSS (its own heap: /proc/self/status RssAnon),
    sampled every few milliseconds. Unlike the peak RSS it leaves out the shared-memory pages
    of the simulation engine's object store, which the engine's transport touches for every
    message it moves (its size follows the messages sent, not what the server holds)."""

    def __init__(self, interval_s: float = 0.002):
        self.peak_kib = status_kib("RssAnon")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval_s,), daemon=True)
        self._thread.start()

    def _run(self, interval_s: float):
        while not self._stop.wait(interval_s):
            self.peak_kib = max(self.peak_kib, status_kib("RssAnon"))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak_kib, status_kib("RssAnon"))


def as_record(arrays) -> ArrayRecord:
    return ArrayRecord({key: Array(np.ascontiguousarray(value)) for key, value in arrays.items()})


def client_data(partition: int, vocab: int):
    """A client's examples: features, one token each (from a client-specific few), labels
    from a fixed linear teacher."""
    rng = np.random.default_rng(1000 + partition)
    n = 10 + (7 * partition) % 41
    tokens = rng.choice(vocab, size=TOKENS_PER_CLIENT, replace=False)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    t = rng.choice(tokens, size=n)
    teacher = np.random.default_rng(99).normal(size=(FEATURES, CLASSES))
    y = np.argmax(x @ teacher + (t % CLASSES == np.arange(CLASSES)[:, None]).T, axis=1)
    return x, t, y


def train(model, x, t, y):
    """A few steps of full-batch gradient descent on the softmax loss; returns the loss."""
    m = {k: v.copy() for k, v in model.items()}
    n = len(y)
    onehot = np.eye(CLASSES, dtype=np.float32)[y]
    rows = np.arange(n)
    loss = 0.0
    for _ in range(LOCAL_STEPS):
        e = m["embedding"][t]
        logits = x @ m["dense.w"] + e @ m["dense.v"] + m["dense.b"].astype(np.float32)
        logits[rows, t % CLASSES] += m["token_bias"][t]               # a token's bias for its own class
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        loss = float(-np.mean(np.log(p[rows, y] + 1e-12)))
        g = (p - onehot) / n                                     # d loss / d logits
        m["dense.w"] -= LEARNING_RATE * (x.T @ g)
        m["dense.v"] -= LEARNING_RATE * (e.T @ g)
        m["dense.b"] -= LEARNING_RATE * g.sum(axis=0).astype(np.float64)
        np.subtract.at(m["embedding"], t, LEARNING_RATE * (g @ m["dense.v"].T))   # rows of seen tokens only
        np.subtract.at(m["token_bias"], t, LEARNING_RATE * g[rows, t % CLASSES])
    return m, loss


def make_client_app(strategy: str, vocab: int, dump: str, refuse=frozenset(), dropouts=None) -> ClientApp:
    app = ClientApp()

    @app.train()
    def client_train(msg: Message, context: Context) -> Message:
        partition = int(context.node_config["partition-id"])
        arrays = next(iter(msg.content.array_records.values()))
        model = {key: array.numpy() for key, array in arrays.items()}
        x, t, y = client_data(partition, vocab)
        trained, loss = train(model, x, t, y)
        server_round = int(next(iter(msg.content.config_records.values()))["server-round"])
        if (partition, server_round) in refuse:
            # A faulty client: an array of the wrong shape, which fedagg refuses.
            trained["dense.w"] = trained["dense.w"][:-1]
        elif dump:
            np.savez(os.path.join(dump, f"update-r{server_round}-p{partition}.npz"), num_examples=len(y), **trained)
        if strategy == "flower":
            return Message(RecordDict({"arrays": as_record({k: trained[k] for k in model}),
                                       "metrics": MetricRecord({"num-examples": len(y), "loss": loss})}),
                           reply_to=msg)
        import fedagg.flower
        return fedagg.flower.contribute(msg, trained, len(y), metrics={"loss": loss},
                                        client_id=f"partition-{partition}",
                                        secure_dropout=(dropouts or {}).get((partition, server_round)))

    return app


def make_server_app(args, report: dict) -> ServerApp:
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        common = dict(fraction_evaluate=0.0, min_train_nodes=args.clients, min_available_nodes=args.clients)
        clip, z = (float(v) for v in args.privacy.split(",")) if args.privacy else (0.0, 0.0)
        if args.strategy == "flower":
            strategy = FedAvg(**common)
            if args.privacy:
                strategy = DifferentialPrivacyServerSideFixedClipping(strategy, z, clip, args.clients)
        else:
            import fedagg
            import fedagg.flower
            privacy = (fedagg.DifferentialPrivacy(clip_norm=clip, noise_multiplier=z, expected_clients=args.clients)
                       if args.privacy else None)
            if args.secure:  # every array dense: a secure aggregation masks dense vectors
                bits, clip_range, max_weight = args.secure.split(",")
                secure = dict(secure=fedagg.SecureAggregation(stage_timeout_ms=args.stage_timeout_ms),
                              secure_bits=int(bits), clip_range=float(clip_range), max_weight=float(max_weight),
                              max_clients=args.clients)
            else:
                secure = dict(sparse=["token_bias"], row_sparse=["embedding"])
            strategy = fedagg.flower.FedaggFedAvg(args.root, args.targets.split(","),
                                                  min_contributions=args.min_contributions,
                                                  encoding=args.encoding, privacy=privacy, **secure, **common)
        rounds = report.setdefault("rounds", [])
        started = [time.time()]

        def after_round(server_round: int, arrays: ArrayRecord):
            now = time.time()
            if server_round > 0:
                entry = {"round": server_round, "seconds": now - started[0]}
                if args.strategy == "fedagg":
                    entry["fedagg"] = dataclasses.asdict(strategy.reports[server_round])
                rounds.append(entry)
            if args.dump:  # round 0: the initial model
                np.savez(os.path.join(args.dump, f"global-r{server_round}.npz"),
                         **{k: a.numpy() for k, a in arrays.items()})
            started[0] = time.time()
            return None

        result = strategy.start(grid=grid, initial_arrays=as_record(initial_model(args.vocab)),
                                num_rounds=args.rounds, train_config=ConfigRecord(), evaluate_fn=after_round)
        report["train_metrics"] = {str(k): dict(v) for k, v in result.train_metrics_clientapp.items()}

    return app


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="127.0.0.1:50051")
    parser.add_argument("--targets", default="", help="aggregators clients send to, comma-separated (default: root)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--strategy", choices=["fedagg", "flower"], default="fedagg")
    parser.add_argument("--min_contributions", type=int, default=1, help="each round's quorum at fedagg")
    parser.add_argument("--encoding", default="plain",
                        help="value encoding of the dense arrays (fedagg strategy): plain, quantized:8, ...")
    parser.add_argument("--privacy", default="", help="CLIP,Z: DP-FedAvg with that clip norm and noise multiplier")
    parser.add_argument("--refuse", default="", help="PARTITION:ROUND,...: these clients send a malformed update")
    parser.add_argument("--secure", default="", help="BITS,CLIP,MAX_WEIGHT: secure aggregation (fedagg strategy)")
    parser.add_argument("--secure_dropout", default="",
                        help="PARTITION:ROUND:STAGE,...: these clients leave the secure protocol at STAGE")
    parser.add_argument("--stage_timeout_ms", type=int, default=0, help="secure aggregation's stage timeout (0: 30 s)")
    parser.add_argument("--client_cpus", type=float, default=0.0,
                        help="CPUs each simulated client takes (default 1; with --secure: this machine's / clients)")
    parser.add_argument("--dump", default="")
    parser.add_argument("--report", default="")
    args = parser.parse_args()
    args.targets = args.targets or args.root
    refuse = frozenset(tuple(int(v) for v in item.split(":")) for item in args.refuse.split(",") if item)
    if args.secure and args.strategy != "fedagg":
        raise SystemExit("--secure runs with --strategy fedagg")
    dropouts = {(int(p), int(r)): stage for p, r, stage in (item.split(":") for item in args.secure_dropout.split(",")
                                                             if item)}
    client_cpus = args.client_cpus or ((os.cpu_count() or 1) / args.clients if args.secure else 1.0)
    report = {"strategy": args.strategy, "clients": args.clients, "vocab": args.vocab, "encoding": args.encoding,
              "secure": args.secure,
              "model_bytes": sum(a.nbytes for a in initial_model(args.vocab).values()),
              "rss_before_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
    report["anon_before_kib"] = status_kib("RssAnon")
    anonymous = AnonymousPeak()
    run_simulation(make_server_app(args, report),
                   make_client_app(args.strategy, args.vocab, args.dump, refuse, dropouts),
                   num_supernodes=args.clients,
                   backend_config={"client_resources": {"num_cpus": client_cpus, "num_gpus": 0.0}})
    report["peak_anon_kib"] = anonymous.stop()
    report["peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if len(report.get("rounds", [])) != args.rounds:
        raise SystemExit(f"the simulation ran {len(report.get('rounds', []))} of {args.rounds} rounds")
    for entry in report["rounds"]:
        print(f"round {entry['round']}: {entry['seconds']:.2f} s"
              + (f", fedagg {entry['fedagg']['state']} with {entry['fedagg']['contributions']} updates"
                 if "fedagg" in entry else ""))
    print(f"Flower server process: peak RSS {report['peak_rss_kib'] / 1024:.0f} MiB, peak anonymous RSS "
          f"{report['peak_anon_kib'] / 1024:.0f} MiB ({report['anon_before_kib'] / 1024:.0f} MiB before the run)")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
