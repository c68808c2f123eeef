"""The server processes one contender of bench/peers_service_bench.sh runs on loopback:
started with their output in a log file, each in a process group of its own (so that
stopping one also stops what it started, such as Flower's SuperExec and app processes),
waited for until they listen, checked while a round runs, and stopped, all of them, when
the contender is done or the bench is interrupted."""
import os
import signal
import socket
import subprocess
import time


def free_port():
    """A port nothing listens on now (the kernel's choice for an ephemeral bind)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, process, name, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with status {process.returncode} before it listened on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{name} did not listen on {port} within {seconds} s")


class ServiceProcesses:
    def __init__(self, log_dir):
        self.log_dir, self.running = log_dir, {}

    def start(self, name, command, env=None, port=None):
        log = open(os.path.join(self.log_dir, f"{name}.log"), "w")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.running[name] = process
        if port is not None:
            wait_port(port, process, name)
        return process

    def check_alive(self):
        for name, process in self.running.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with status {process.returncode}; its log: "
                                   f"{os.path.join(self.log_dir, name + '.log')}")

    def log_tail(self, name, lines=20):
        with open(os.path.join(self.log_dir, f"{name}.log"), errors="replace") as log:
            return "".join(log.readlines()[-lines:])

    def stop_all(self):
        for process in self.running.values():
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.time() + 10
        for process in self.running.values():
            try:
                process.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass
            try:  # what is left of the group, the leader included
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
        self.running = {}
