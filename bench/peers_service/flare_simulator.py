"""NVIDIA FLARE 2.9 for bench/peers_service_bench.sh: one round of the job of flare_job.py
in FLARE's simulator, multi-process mode (`nvflare simulator -n N -t T`). The simulator's
process runs the FLARE server; each client's job runs in a worker process of its own that
connects to the server's cell over FLARE's TCP driver (its log: "created backbone
external connector to tcp://localhost:PORT"), so every update crosses real FLARE cell
networking. With T < N, T clients run at a time and the simulator starts a new worker
process for each next client: N clients, T processes at once. `-m N` lifts the simulator's
default cap of 100 clients. The server's memory: the
simulator process's peak above its RSS when the round starts (flare_components.RoundProbe).
A fresh simulator (server) for every round."""
import json
import os
import subprocess

import flare_job


def run_round(nvflare, work, clients, threads, elements, updates_file, out_dir):
    job_dir = os.path.join(work, "flare-job")
    flare_job.write_job(job_dir, clients, updates_file, elements, out_dir)
    log_path = os.path.join(work, "flare-simulator.log")
    with open(log_path, "w") as log:
        # Its own session: stopping it (the bench interrupted) reaches its worker processes too.
        simulator = subprocess.Popen([nvflare, "simulator", "-w", os.path.join(work, "flare-workspace"), "-n", str(clients),
                                      "-m", str(clients), "-t", str(threads), job_dir], stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        try:
            simulator.wait()
        finally:
            if simulator.poll() is None:
                os.killpg(simulator.pid, 9)
                simulator.wait()
    report = os.path.join(out_dir, "server.json")
    if simulator.returncode != 0 or not os.path.exists(report):
        with open(log_path, errors="replace") as log:
            tail = "".join(log.readlines()[-15:])
        raise RuntimeError(f"nvflare simulator exited with status {simulator.returncode}, no aggregate:\n{tail}")
    with open(report) as f:
        return json.load(f)
