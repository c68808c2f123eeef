"""The driver of bench/peers_service_bench.sh (which sets up the environments, starts the
fedagg servers and calls this): for each update size, client count and contender, --runs
rounds, each checked against the float64 reference (peer_updates.py); then the table
(results_table.py). A failed check or a failed round stops the bench with an error: no
figure is printed for it.

Round time, the same for every contender: from the first update sent (the earliest
client's timestamp, taken when its update is ready and handed to the framework) to the
aggregate available at the server (the peers: their server code's timestamp once the
aggregate exists; fedagg: the client seeing FINALIZED). Server memory: each server
process's peak RSS above its idle RSS (process_memory.py), summed over the processes."""
import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

import flare_simulator
import peer_updates
import process_memory
from flower_service import FlowerDeployment
from results_table import format_table

FLARE, FLOWER = "NVIDIA FLARE 2.9.0", "Flower 1.41.0"
# Flower's servers (SuperLink + ServerApp) held 2,119 MiB above idle for 100 replies of 16 MB.
FLOWER_MEMORY_PER_REPLY_BYTE = 1.4


def available_memory_bytes():
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


class Bench:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.rows = []
        self.fedagg_pids = [int(p) for p in args.fedagg_pids.split(",")]

    def record(self, contender, peer, clients, update_mb, runs=None, not_run=None):
        self.rows.append({"contender": contender, "peer": peer, "clients": clients, "update_mb": update_mb,
                          "runs": runs, "not_run": not_run})

    def checked(self, name, clients, reference, aggregate_file):
        error = peer_updates.relative_error(np.load(aggregate_file), reference)
        if not error <= peer_updates.TOLERANCE:
            raise RuntimeError(f"{name}, N={clients}: aggregate off the float64 reference by {error:.3g} "
                               f"(tolerance {peer_updates.TOLERANCE}): no figure")
        return error

    def fresh_out(self):
        out = os.path.join(self.work, "round")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        return out

    @staticmethod
    def first_sent(out):
        return min(float(open(path).read()) for path in glob.glob(os.path.join(out, "sent-*")))

    @staticmethod
    def figures(round_s, servers):
        return {"round_s": round_s, "peak_mib": sum(s["peak_kib"] - s["idle_kib"] for s in servers) / 1024}

    def log(self, name, clients, update_mb, run, figures):
        print(f"  {name}, N={clients}, {update_mb:g} MB, run {run}: {figures['round_s']:.2f} s, "
              f"{figures['peak_mib']:.0f} MiB above idle", flush=True)

    def flare(self, clients, update_mb, elements, updates_file, reference):
        name = f"{FLARE}, simulator ({self.args.flare_threads} client processes at a time)"
        runs = []
        for run in range(1, self.args.runs + 1):
            out = self.fresh_out()
            shutil.rmtree(os.path.join(self.work, "flare-workspace"), ignore_errors=True)
            server = flare_simulator.run_round(os.path.join(self.args.peer_bin, "nvflare"), self.work, clients, self.args.flare_threads,
                                               elements, updates_file, out)
            self.checked(name, clients, reference, os.path.join(out, "aggregate.npy"))
            runs.append(self.figures(server["aggregate_at"] - self.first_sent(out), server["servers"]))
            self.log("FLARE", clients, update_mb, run, runs[-1])
        self.record(name, True, clients, update_mb, runs=runs)

    def flower(self, clients, update_mb, elements, updates_file, reference):
        nodes = min(clients, self.args.flower_nodes)
        name = f"{FLOWER}, SuperLink + {nodes} SuperNodes"
        needed = FLOWER_MEMORY_PER_REPLY_BYTE * clients * update_mb * 1e6
        available = available_memory_bytes()
        # Half of what is available at most: the SuperNodes, their ClientApps and the
        # page cache need the rest, and a machine out of memory ends the whole bench.
        if needed > available / 2:
            return self.record(name, True, clients, update_mb, not_run=(
                f"FedAvg's ServerApp holds every reply until it aggregates, and the SuperLink keeps them too: "
                f"about {needed / 2**30:.0f} GiB ({FLOWER_MEMORY_PER_REPLY_BYTE}x the {clients} replies, the ratio "
                f"measured at N=100), more than half of the {available / 2**30:.0f} GiB available here"))
        flower_dir = os.path.join(self.work, "flower")
        os.makedirs(flower_dir, exist_ok=True)
        deployment = FlowerDeployment(self.args.peer_bin, flower_dir, nodes)
        try:
            runs = []
            for run in range(1, self.args.runs + 1):
                out = self.fresh_out()
                server = deployment.run_round(clients, elements, updates_file, out)
                self.checked(name, clients, reference, os.path.join(out, "aggregate.npy"))
                runs.append(self.figures(server["aggregate_at"] - self.first_sent(out), server["servers"]))
                self.log("Flower", clients, update_mb, run, runs[-1])
        finally:
            deployment.close()
        self.record(name, True, clients, update_mb, runs=runs)

    def fedagg_python(self, tree, clients, update_mb, elements, updates_file, reference):
        pids = self.fedagg_pids if tree else self.fedagg_pids[:1]
        targets = self.args.fedagg_intermediates if tree else self.args.fedagg_root
        name = (f"fedagg root + 2 intermediates, Python clients" if tree else "fedagg root, Python clients")
        name += f" (1 process, {self.args.python_threads} threads)"
        runs = []
        for run in range(1, self.args.runs + 1):
            out = self.fresh_out()
            idle = [process_memory.start_window(pid) for pid in pids]
            subprocess.run([self.args.fedagg_python, os.path.join(os.path.dirname(__file__), "fedagg_clients.py"),
                            "--root", self.args.fedagg_root, "--targets", targets, "--clients", str(clients),
                            "--elements", str(elements), "--updates", updates_file,
                            "--threads", str(self.args.python_threads), "--out", out], check=True)
            servers = [{"idle_kib": i, "peak_kib": process_memory.peak_since_kib(pid)} for i, pid in zip(idle, pids)]
            self.checked(name, clients, reference, os.path.join(out, "aggregate.npy"))
            with open(os.path.join(out, "clients.json")) as f:
                times = json.load(f)
            runs.append(self.figures(times["aggregate_at"] - times["first_sent"], servers))
            self.log("fedagg Python" + (" tree" if tree else ""), clients, update_mb, run, runs[-1])
        self.record(name, False, clients, update_mb, runs=runs)

    def fedagg_loadgen(self, clients, update_mb, elements):
        name = f"fedagg root, fedagg-loadgen ({self.args.python_threads} in flight, its own updates and check)"
        runs = []
        for run in range(1, self.args.runs + 1):
            idle = process_memory.start_window(self.fedagg_pids[0])
            report = subprocess.run([self.args.loadgen, "--json", f"--control={self.args.fedagg_root}",
                                     f"--clients={clients}", f"--concurrency={self.args.python_threads}", "--channels=1",
                                     f"--type=<w=float32[{elements}]>", "--intrinsics=federated_weighted_mean",
                                     f"--distinct_updates={self.args.distinct}"], capture_output=True, text=True)
            if report.returncode != 0:
                raise RuntimeError(f"fedagg-loadgen failed its run or its result check: no figure\n{report.stdout}{report.stderr}")
            result = json.loads(report.stdout)
            servers = [{"idle_kib": idle, "peak_kib": process_memory.peak_since_kib(self.fedagg_pids[0])}]
            runs.append(self.figures(result["round_ms"]["median"] / 1000, servers))
            self.log("fedagg-loadgen", clients, update_mb, run, runs[-1])
        self.record(name, False, clients, update_mb, runs=runs)

    def run(self):
        for update_mb in self.args.sizes:
            elements = int(update_mb * 1_000_000) // 4
            updates_file = os.path.join(self.work, "updates.f32")
            peer_updates.write_updates(updates_file, self.args.distinct, elements)
            updates = peer_updates.load_updates(updates_file, elements)
            for clients in self.args.clients:
                print(f"=== {update_mb:g} MB updates, N = {clients} ===", flush=True)
                reference = peer_updates.reference_mean(updates, clients)
                self.flare(clients, update_mb, elements, updates_file, reference)
                self.flower(clients, update_mb, elements, updates_file, reference)
                self.fedagg_python(False, clients, update_mb, elements, updates_file, reference)
                self.fedagg_python(True, clients, update_mb, elements, updates_file, reference)
                self.fedagg_loadgen(clients, update_mb, elements)
        print(format_table(self.rows))


def integers(text):
    return [int(x) for x in text.split(",")]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag in ("--peer_bin", "--fedagg_python", "--loadgen", "--fedagg_root", "--fedagg_intermediates", "--fedagg_pids"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--clients", type=integers, default=[100])
    parser.add_argument("--sizes", type=lambda t: [float(x) for x in t.split(",")], default=[16.0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--distinct", type=int, default=4)
    parser.add_argument("--python_threads", type=int, default=4)
    parser.add_argument("--flare_threads", type=int, default=10)
    parser.add_argument("--flower_nodes", type=int, default=4)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the peers' processes (finally blocks) on TERM
    with tempfile.TemporaryDirectory(prefix="fedagg-peers-service-") as work:
        Bench(args, work).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
