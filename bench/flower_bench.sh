#!/usr/bin/env bash
# Flower through fedagg beside plain Flower (docs/BENCHMARKS.md, section 3): the Flower
# simulation of client_stub/python/examples/flower_app.py (Flower 1.41's simulation engine,
# the pinned frameworks of .venv-frameworks, scripts/setup_frameworks.sh) with FedaggFedAvg
# over a local fedagg root + 2 intermediates, and with Flower's own FedAvg, at each client
# count, RUNS times each. Prints, per strategy and N, the median [min-max] over the runs of
# the round time (the mean of rounds 2..R of a run: round 1 includes starting the engine's
# workers) and of the Flower server process's peak RSS and peak anonymous RSS.
#   bench/flower_bench.sh FEDAGG_SERVER [--clients=100,1000] [--runs=3] [--rounds=3] [--vocab=25000]
set -euo pipefail
SERVER=$1; shift
CLIENTS=100,1000 RUNS=3 ROUNDS=3 VOCAB=25000
for arg in "$@"; do
  case $arg in
    --clients=*) CLIENTS=${arg#*=} ;; --runs=*) RUNS=${arg#*=} ;; --rounds=*) ROUNDS=${arg#*=} ;;
    --vocab=*) VOCAB=${arg#*=} ;; *) echo "unknown argument $arg" >&2; exit 2 ;;
  esac
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=$REPO/.venv-frameworks
"$REPO/scripts/setup_frameworks.sh"
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-index --no-deps --no-build-isolation \
    --force-reinstall "$REPO/client_stub/python"
source "$REPO/tests/e2e/e2e_lib.sh"
e2e_start_tree "$SERVER"
export RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0 RAY_DISABLE_USAGE_STATS=1 FLWR_TELEMETRY_ENABLED=0
for n in ${CLIENTS//,/ }; do
  for strategy in flower fedagg; do
    for run in $(seq "$RUNS"); do
      (cd "$E2E_DIR" && timeout 1800 "$VENV/bin/python" "$REPO/client_stub/python/examples/flower_app.py" \
          --root "127.0.0.1:$ROOT" --targets "127.0.0.1:$I1,127.0.0.1:$I2" --clients "$n" --rounds "$ROUNDS" \
          --vocab "$VOCAB" --strategy "$strategy" --report "$E2E_DIR/$strategy-$n-$run.json" \
          >"$E2E_DIR/$strategy-$n-$run.log" 2>&1) || { tail -n 30 "$E2E_DIR/$strategy-$n-$run.log"; exit 1; }
    done
    /usr/bin/python3 - "$E2E_DIR" "$strategy" "$n" "$RUNS" <<'PY'
import json, statistics, sys
d, strategy, n, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
reports = [json.load(open(f"{d}/{strategy}-{n}-{r}.json")) for r in range(1, runs + 1)]
def fmt(values, unit, scale, digits):
    return f"{statistics.median(values) / scale:.{digits}f} [{min(values) / scale:.{digits}f}-{max(values) / scale:.{digits}f}] {unit}"
rounds = [statistics.mean(x["seconds"] for x in r["rounds"][1:]) for r in reports]
print(f"BENCH flower strategy={strategy} clients={n} model={reports[0]['model_bytes'] / 1e6:.2f}MB "
      f"round={fmt(rounds, 's', 1, 2)} peak_rss={fmt([r['peak_rss_kib'] for r in reports], 'MiB', 1024, 0)} "
      f"peak_anon={fmt([r['peak_anon_kib'] for r in reports], 'MiB', 1024, 0)} "
      f"anon_before={fmt([r['anon_before_kib'] for r in reports], 'MiB', 1024, 0)}", flush=True)
PY
  done
done
