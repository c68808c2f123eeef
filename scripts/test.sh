#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through ctest.
# Usage: scripts/test.sh [preset]   (default: ci under CI, else default; also asan, tsan)
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
preset="${1:-}"
if [ -z "$preset" ]; then
  if [ "${CI:-}" = "true" ]; then preset=ci; else preset=default; fi
fi
./scripts/build.sh "$preset"
ctest --preset "$preset"
