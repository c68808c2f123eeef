#!/usr/bin/env bash
# Configures (once) and builds fedagg with a CMake preset: scripts/build.sh [preset] [targets...]
# Default preset: "ci" under CI (warnings are errors), "default" otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

preset="${1:-}"
[ $# -gt 0 ] && shift
if [ -z "$preset" ]; then
  if [ "${CI:-}" = "true" ]; then preset=ci; else preset=default; fi
fi

cmake --preset "$preset" >/dev/null
if [ $# -gt 0 ]; then
  cmake --build --preset "$preset" --target "$@"
else
  cmake --build --preset "$preset"
fi
