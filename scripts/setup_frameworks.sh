#!/usr/bin/env bash
# Installs Flower (flwr, with its Ray simulation engine) and NVIDIA FLARE from the package
# index into .venv-frameworks (ignored by git), at the versions pinned in
# client_stub/python/frameworks-requirements.txt: what the Flower/FLARE tests, the examples
# and bench/flower_bench.sh run with. scripts/setup.sh calls it.
# Idempotent and quiet: nothing happens when the environment was made from the same pinned
# list (a stamp holds its hash). Without the package index it says so and returns 0: the
# Flower/FLARE tests then skip, saying why. FEDAGG_SKIP_FRAMEWORKS=1 skips it altogether.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=$REPO/.venv-frameworks
LOCK=$REPO/client_stub/python/frameworks-requirements.txt
STAMP=$VENV/.fedagg-requirements-sha256

[ "${FEDAGG_SKIP_FRAMEWORKS:-0}" = 1 ] && exit 0
want=$(sha256sum "$LOCK" | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -x "$VENV/bin/python" ]; then
  exit 0
fi

echo "setup: installing Flower and NVIDIA FLARE (pinned, from the package index) into .venv-frameworks"
rm -rf "$VENV"
/usr/bin/python3 -m venv "$VENV"
log=$(mktemp)
if ! "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$LOCK" >"$log" 2>&1; then
  echo "setup: could not install them (no package index?); the Flower and FLARE tests will skip:" >&2
  tail -n 5 "$log" >&2
  rm -f "$log"
  exit 0
fi
rm -f "$log"
echo "$want" >"$STAMP"
