#!/usr/bin/env bash
# Installs what is missing, builds, and runs the demo: simulated clients contribute to an
# aggregation with dense, sparse and row-sparse fields; the result is printed and checked
# against the reference reduction.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/build.sh default fedagg-demo-core
./build/service/demo/fedagg-demo-core "$@"
