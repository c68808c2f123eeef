"""Flower 1.41 as its users deploy it, for bench/peers_service_bench.sh: a SuperLink and S
SuperNodes (`flower-superlink`, `flower-supernode`, subprocess isolation: each SuperNode's
SuperExec starts one ClientApp process per message), started once; each round is one
`flwr run` of the app in flower_apps.py, which the SuperLink's SuperExec starts in a
ServerApp process. N logical clients are N messages spread over the S SuperNodes.
The server's memory: the SuperLink's peak above its idle RSS (the window opened just
before `flwr run`) plus the ServerApp process's (opened when its nodes are connected,
before it sends), each from its own VmHWM."""
import json
import os
import shutil
import subprocess
import textwrap
import time

import peer_updates
import process_memory
from service_processes import ServiceProcesses, free_port

APP_PACKAGE = "flowerround"
RUN_CONFIG_DEFAULTS = {"clients": 1, "nodes": 1, "elements": 1, "updates-file": "", "out-dir": ""}


def write_app(app_dir):
    """The Flower app project (pyproject.toml and its package) that `flwr run` bundles."""
    here = os.path.dirname(os.path.abspath(__file__))
    package = os.path.join(app_dir, APP_PACKAGE)
    os.makedirs(package, exist_ok=True)
    open(os.path.join(package, "__init__.py"), "w").close()
    for module in ("flower_apps.py", "peer_updates.py", "process_memory.py"):
        shutil.copy(os.path.join(here, module), package)
    config = "\n".join(f"{key} = {json.dumps(value)}" for key, value in RUN_CONFIG_DEFAULTS.items())
    with open(os.path.join(app_dir, "pyproject.toml"), "w") as out:
        out.write(textwrap.dedent(f"""\
            [build-system]
            requires = ["hatchling"]
            build-backend = "hatchling.build"

            [project]
            name = "{APP_PACKAGE}"
            version = "1.0.0"
            dependencies = ["flwr==1.41.0", "numpy"]

            [tool.hatch.build.targets.wheel]
            packages = ["."]

            [tool.flwr.app]
            publisher = "fedagg-bench"

            [tool.flwr.app.components]
            serverapp = "{APP_PACKAGE}.flower_apps:server_app"
            clientapp = "{APP_PACKAGE}.flower_apps:client_app"

            [tool.flwr.app.config]
            """) + config + "\n")


class FlowerDeployment:
    """A SuperLink and `nodes` SuperNodes on loopback, until close()."""

    def __init__(self, bin_dir, work, nodes):
        self.bin_dir, self.work, self.nodes = bin_dir, work, nodes
        self.processes = ServiceProcesses(work)
        # The SuperLink and SuperNodes start flower-superexec, flwr-serverapp and flwr-clientapp by name.
        self.env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"],
                        FLWR_HOME=os.path.join(work, "flwr-home"), FLWR_TELEMETRY_ENABLED="0",
                        # SuperExec looks for new ClientApp tasks every second by default; 0.1 s
                        # serves Flower better on this machine (its documented lower bound: 0.01).
                        FLWR_SUPEREXEC_TASK_POLL_INTERVAL="0.1")
        self.app_dir = os.path.join(work, "app")
        write_app(self.app_dir)
        self.port = free_port()  # the SuperLink serves its Fleet, Control and Runtime APIs over HTTP on one port
        os.makedirs(self.env["FLWR_HOME"], exist_ok=True)
        with open(os.path.join(self.env["FLWR_HOME"], "config.toml"), "w") as out:
            out.write(f'[superlink]\ndefault = "bench"\n\n[superlink.bench]\naddress = "127.0.0.1:{self.port}"\n'
                      'insecure = true\n')
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self):
        self.superlink = self.processes.start(
            "superlink", [self.tool("flower-superlink"), "--insecure", "--host=127.0.0.1", f"--port={self.port}"],
            env=self.env, port=self.port)
        for node in range(self.nodes):
            self.processes.start(
                f"supernode-{node}", [self.tool("flower-supernode"), "--insecure", f"--superlink=127.0.0.1:{self.port}",
                                      f"--port={free_port()}", f"--node-config=partition-id={node}"], env=self.env)

    def tool(self, name):
        return os.path.join(self.bin_dir, name)

    def run_round(self, clients, elements, updates_file, out_dir):
        """One `flwr run`; returns the servers' figures and when the aggregate was available."""
        idle_kib = process_memory.start_window(self.superlink.pid)
        overrides = {"clients": clients, "nodes": self.nodes, "elements": elements, "updates-file": updates_file,
                     "out-dir": out_dir}
        submitted = subprocess.run([self.tool("flwr"), "run", self.app_dir, "bench", "--run-config",
                                    " ".join(f"{k}={json.dumps(v)}" for k, v in overrides.items())],
                                   env=self.env, capture_output=True, text=True)
        if submitted.returncode != 0:
            raise RuntimeError(f"flwr run failed:\n{submitted.stdout}{submitted.stderr}")
        report = os.path.join(out_dir, "serverapp.json")
        deadline = time.time() + 3600
        while not os.path.exists(report):
            self.processes.check_alive()
            if time.time() > deadline:
                raise RuntimeError("the Flower round did not finish within an hour")
            time.sleep(0.1)
        with open(report) as f:
            serverapp = json.load(f)
        return {"aggregate_at": serverapp["aggregate_at"],
                "servers": [{"name": "superlink", "idle_kib": idle_kib,
                             "peak_kib": process_memory.peak_since_kib(self.superlink.pid)},
                            {"name": "serverapp", "idle_kib": serverapp["idle_kib"], "peak_kib": serverapp["peak_kib"]}]}

    def close(self):
        self.processes.stop_all()
