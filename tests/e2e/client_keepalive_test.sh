#!/usr/bin/env bash
# A client waiting for an ack from a server that the network cuts off (packets dropped, no
# connection reset: the relay tcp_relay.py between them stopped with SIGSTOP) is not left
# waiting forever: the Python package's keepalive pings (fedagg.connect(keepalive_s=...))
# go unanswered, the connection is dropped, and the wait ends with UNAVAILABLE, an error
# the client retries on. The update waits for a DURABLE ack from a root whose first
# checkpoint is a minute away, so the ack is still pending when the cut comes; with a
# keepalive of 1 s the wait must end within 15 s.
# Usage: client_keepalive_test.sh FEDAGG_SERVER
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1
REPO=$(cd "$(dirname "$0")/../.." && pwd)
R=$E2E_BASE RELAY=$((E2E_BASE + 2))

/usr/bin/python3 -m venv --system-site-packages "$E2E_DIR/venv"
"$E2E_DIR/venv/bin/pip" install --quiet --no-index --no-build-isolation "$REPO/client_stub/python"
mkdir -p "$E2E_DIR/checkpoints"
e2e_start_server "$SERVER" root "$R" $((R + 5)) --checkpoint_dir="$E2E_DIR/checkpoints" --checkpoint_interval=60s
python3 "$(dirname "$0")/tcp_relay.py" "$RELAY" "$R" >"$E2E_DIR/relay.log" 2>&1 &
RELAY_PID=$!
E2E_PIDS+=("$RELAY_PID")
e2e_wait_port "$RELAY"

cd "$E2E_DIR"  # not the source tree: `import fedagg` must find the installed package
"$E2E_DIR/venv/bin/python" - "127.0.0.1:$RELAY" "$RELAY_PID" <<'PY'
import os, signal, sys, threading, time
import numpy as np
import fedagg

target, relay = sys.argv[1], int(sys.argv[2])
conn = fedagg.connect(target, keepalive_s=1)
spec = conn.control.create("k1", {"w": fedagg.Field("int64", (2,), "federated_sum")}, min_contributions=1)
stream = conn.open_stream("client-1", max_attempts=1)
outcome = {}

def contribute():
    try:
        outcome["ack"] = stream.contribute(spec, {"w": np.array([1, 1001], np.int64)}, durable=True)
    except fedagg.FedaggError as error:
        outcome["error"] = error

waiter = threading.Thread(target=contribute, daemon=True)
waiter.start()
time.sleep(1)  # the update is received, and its DURABLE ack waits for the checkpoint
assert "ack" not in outcome and "error" not in outcome, outcome
os.kill(relay, signal.SIGSTOP)
cut = time.monotonic()
waiter.join(timeout=15)
if waiter.is_alive():
    sys.exit("the client was still waiting for its ack 15 s after the cut")
error = outcome.get("error")
if error is None or error.code.name != "UNAVAILABLE":
    sys.exit(f"expected UNAVAILABLE, got {outcome}")
print(f"the wait ended {time.monotonic() - cut:.1f} s after the cut: {error}")
PY
echo "a client waiting for an ack from a server cut off: ok"
