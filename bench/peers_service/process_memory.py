"""A server process's peak memory above its idle RSS, measured the same way for every
contender of bench/peers_service_bench.sh: when the server is up and waiting for the
round, its VmRSS is the idle figure and its VmHWM is reset (writing 5 to
/proc/PID/clear_refs, Linux's reset of the peak); once the aggregate is available, VmHWM
minus the idle RSS is the peak above idle. Works on the process itself (pid "self") or
on another one of the same user (root here)."""


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/{pid}/status")


def start_window(pid="self"):
    """Idle RSS now, KiB; the peak counts from now on."""
    idle = status_kib(pid, "VmRSS")
    with open(f"/proc/{pid}/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return idle


def peak_since_kib(pid="self"):
    return status_kib(pid, "VmHWM")
