"""The fedagg contender's clients for bench/peers_service_bench.sh: N logical clients from
this one process, through the fedagg Python package. It creates a federated_weighted_mean
aggregation at the root, waits until every target (the root itself, or the intermediate
aggregators) knows it, then sends client c's update (peer_updates.py) with
Connection.submit to target c % targets from THREADS threads (one channel per target),
seals, and waits for FINALIZED. Writes OUT/clients.json (when the first update was sent,
when the aggregate was available) and OUT/aggregate.npy.
    fedagg_clients.py --root HOST:PORT --targets HOST:PORT[,...] --clients N --elements D
                      --updates FILE --threads T --out DIR"""
import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import fedagg
import peer_updates


def wait_known(conn, aggregation, seconds=30):
    deadline = time.time() + seconds
    while True:
        try:
            return conn.control.get(aggregation)
        except fedagg.FedaggError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag in ("--root", "--targets", "--updates", "--out"):
        parser.add_argument(flag, required=True)
    for flag in ("--clients", "--elements", "--threads"):
        parser.add_argument(flag, type=int, required=True)
    args = parser.parse_args()
    updates = peer_updates.load_updates(args.updates, args.elements)
    aggregation = f"peers-service-{time.time_ns()}"
    with fedagg.connect(args.root, timeout=600) as root:
        root.control.create(aggregation, {"w": fedagg.Field("float32", [args.elements], "federated_weighted_mean")})
        targets = [fedagg.connect(target, timeout=600) for target in args.targets.split(",")]
        specs = [wait_known(conn, aggregation) for conn in targets]
        sent = []

        def send(client):
            update, weight = peer_updates.client_update(updates, client)
            sent.append(time.time())
            target = client % len(targets)
            targets[target].submit(f"client-{client}", specs[target], {"w": update}, weight=weight)

        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(send, range(args.clients)))
        root.control.seal(aggregation)
        final = root.control.wait(aggregation, timeout=600)
        aggregate_at = time.time()
        if final.state != "FINALIZED" or final.contributions != args.clients:
            raise RuntimeError(f"{aggregation} ended {final.state} with {final.contributions} contributions: {final.detail}")
        np.save(os.path.join(args.out, "aggregate.npy"), root.control.result(aggregation)["w"].values)
        for conn in targets:
            conn.close()
    with open(os.path.join(args.out, "clients.json"), "w") as out:
        json.dump({"first_sent": min(sent), "aggregate_at": aggregate_at}, out)


if __name__ == "__main__":
    main()
