#!/usr/bin/env bash
# Exactly once across the tree, in the deployment fedagg is built for (docs/PROTOCOL.md
# 6.4): nginx in front of two intermediate aggregators and a root.
#  1. Clients 1-20 send through nginx, cut their stream after the ack was sent and before
#     reading it, and retry through nginx; retries land on either intermediate and are all
#     refused ALREADY_EXISTS (some must reach the other intermediate, or the test proves
#     nothing).
#  2. Clients 21-30 send the same update to both intermediates at the same moment: one copy
#     is acked, the other refused.
# The root's result counts each client exactly once: w = [30, sum of 1000 + n].
# Usage: nginx_exactly_once_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
REPO=$(cd "$(dirname "$0")/../.." && pwd)

/usr/bin/python3 -m venv --system-site-packages "$E2E_DIR/venv"
"$E2E_DIR/venv/bin/pip" install --quiet --no-index --no-build-isolation "$REPO/client_stub/python"

e2e_start_tree "$SERVER"
A=$I1 B=$I2 LB=$((E2E_BASE + 3))
e2e_start_nginx "$LB" "$A" "$B"
cli() { local port=$1; shift; "$CLIENT" --server="127.0.0.1:$port" "$@"; }

cli "$ROOT" create x1 --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1 >/dev/null
for port in "$A" "$B"; do e2e_wait_mirrored "$CLIENT" "$port" x1; done
cd "$E2E_DIR"  # not the source tree: `import fedagg` must find the installed package
"$E2E_DIR/venv/bin/python" "$REPO/tests/e2e/exactly_once_clients.py" cut-ack "127.0.0.1:$LB" $((A + 5)) $((B + 5)) x1 20
"$E2E_DIR/venv/bin/python" "$REPO/tests/e2e/exactly_once_clients.py" both "127.0.0.1:$A" "127.0.0.1:$B" x1 21 30
e2e_wait_for_contributions "$CLIENT" "$ROOT" x1 30
e2e_finish_counting_round "$CLIENT" "$ROOT" x1 30
echo "exactly once behind a load balancer: ok"
