"""The Python client's payload rate: N updates of float32[4194304] (16 MiB) sent with
fedagg.Connection.submit from T threads over one channel into a fresh federated_sum
aggregation at TARGET; the result is checked (every element the sum of the values sent)
and one JSON line printed. Run by bench/service_bench.sh's python case.
    python_client_rate.py TARGET UPDATES THREADS"""
import json
import sys
import threading
import time

import numpy as np

import fedagg

FLOATS = 4 << 20


def main():
    target, updates, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    conn = fedagg.connect(target, timeout=300)
    name = f"python-rate-{time.time_ns()}"
    spec = conn.control.create(name, {"w": fedagg.Field("float32", [FLOATS], "federated_sum")})
    # One array per sender, values small integers so the float32 sum is exact.
    arrays = [np.full(FLOATS, t + 1, np.float32) for t in range(threads)]
    errors = []

    def send(t):
        try:
            for i in range(t, updates, threads):
                conn.submit(f"client-{i}", spec, {"w": arrays[t]})
        except Exception as error:  # reported below: a figure counts only if every update did
            errors.append(repr(error))

    senders = [threading.Thread(target=send, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    seconds = time.perf_counter() - start
    conn.control.seal(name)
    status = conn.control.wait(name, timeout=300)
    expected = float(sum((i % threads) + 1 for i in range(updates)))
    checked = (not errors and status.state == "FINALIZED" and status.contributions == updates
               and bool(np.all(conn.control.result(name)["w"].values == expected)))
    print(json.dumps({"updates": updates, "threads": threads, "seconds": seconds,
                      "bytes_per_s": updates * FLOATS * 4 / seconds, "checked": checked, "errors": errors[:3]}))
    conn.close()


if __name__ == "__main__":
    main()
