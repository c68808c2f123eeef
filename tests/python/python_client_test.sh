#!/usr/bin/env bash
# The Python package (client_stub/python) against live servers: installs it with pip into a
# fresh virtual environment (system site packages, no index: no network), starts a
# plaintext server, one with checkpoints, and one with mutual TLS and bearer tokens, and runs the pytest suite
# beside this script against them.
# Usage: python_client_test.sh FEDAGG_SERVER [FEDAGG_CLIENT] (the C++ command line shares a
# secure cohort with Python clients when given)
set -euo pipefail
source "$(dirname "$0")/../e2e/e2e_lib.sh"
SERVER=$1 CLI=${2:-}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=/usr/bin/python3  # Debian's python3-grpcio, -numpy, -scipy, -pytest, -crc32c live here

"$PYTHON" -m venv --system-site-packages "$E2E_DIR/venv"
"$E2E_DIR/venv/bin/pip" install --quiet --no-index --no-build-isolation "$REPO/client_stub/python"

e2e_make_certificates "$E2E_DIR/certs"
echo "python-test-token" >"$E2E_DIR/tokens"
PLAIN=$E2E_BASE SECURE=$((E2E_BASE + 1)) DURABLE=$((E2E_BASE + 2))
e2e_start_server "$SERVER" plain "$PLAIN" $((PLAIN + 5))
mkdir -p "$E2E_DIR/checkpoints"
e2e_start_server "$SERVER" durable "$DURABLE" $((DURABLE + 5)) --checkpoint_dir="$E2E_DIR/checkpoints" \
    --checkpoint_interval=50ms
e2e_start_server "$SERVER" secure "$SECURE" $((SECURE + 5)) --auth_tokens_file="$E2E_DIR/tokens" \
    --tls_cert="$E2E_DIR/certs/server.pem" --tls_key="$E2E_DIR/certs/server.key" \
    --tls_client_ca="$E2E_DIR/certs/ca.pem"

cd "$E2E_DIR"  # not the source tree: `import fedagg` must find the installed package
FEDAGG_TEST_SERVER="127.0.0.1:$PLAIN" FEDAGG_TEST_SECURE_SERVER="127.0.0.1:$SECURE" \
FEDAGG_TEST_DURABLE_SERVER="127.0.0.1:$DURABLE" FEDAGG_TEST_CHECKPOINT_DIR="$E2E_DIR/checkpoints" \
FEDAGG_TEST_CERTS="$E2E_DIR/certs" FEDAGG_TEST_TOKEN=python-test-token \
FEDAGG_TEST_UNUSED_PORT=$((PLAIN + 9)) FEDAGG_TEST_CLI="$CLI" PYTHONDONTWRITEBYTECODE=1 \
    "$E2E_DIR/venv/bin/python" -m pytest -p no:cacheprovider -q -rs "$REPO/tests/python"
