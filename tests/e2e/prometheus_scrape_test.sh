#!/usr/bin/env bash
# End-to-end: a real Prometheus server on loopback scrapes a root and two intermediate
# aggregators while simulated clients contribute through the intermediates; the sum over
# instances of fedagg_updates_accepted_total, read back through Prometheus's HTTP query
# API, equals the number of updates sent.
# Usage: prometheus_scrape_test.sh FEDAGG_SERVER FEDAGG_DEMO
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 DEMO=$2
CLIENTS=40

command -v prometheus >/dev/null || { echo "prometheus is not installed (scripts/setup.sh installs it)"; exit 1; }
ROOT=$E2E_BASE; A=$((E2E_BASE + 1)); B=$((E2E_BASE + 2)); PROM=$((E2E_BASE + 3))
e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5))
e2e_start_server "$SERVER" intermediate-a "$A" $((A + 5)) --parent="127.0.0.1:$ROOT"
e2e_start_server "$SERVER" intermediate-b "$B" $((B + 5)) --parent="127.0.0.1:$ROOT"

cat >"$E2E_DIR/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: fedagg
    static_configs:
      - targets: ['127.0.0.1:$((ROOT + 5))', '127.0.0.1:$((A + 5))', '127.0.0.1:$((B + 5))']
YAML
prometheus --config.file="$E2E_DIR/prometheus.yml" --storage.tsdb.path="$E2E_DIR/tsdb" \
    --web.listen-address="127.0.0.1:$PROM" >"$E2E_DIR/prometheus.log" 2>&1 &
E2E_PIDS+=($!)
e2e_wait_port "$PROM"

"$DEMO" --root="127.0.0.1:$ROOT" --intermediates="127.0.0.1:$A,127.0.0.1:$B" --clients=$CLIENTS \
    >"$E2E_DIR/demo.log" 2>&1 || { cat "$E2E_DIR/demo.log"; exit 1; }

# Until Prometheus has scraped every instance after the updates (1 s interval), the
# figures lag: poll both until they hold, for at most 30 s.
prom_query() {
  curl -sf "http://127.0.0.1:$PROM/api/v1/query" --data-urlencode "query=$1" |
      sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p'
}
# The demo runs two rounds of its clients (plain, then its dense layers quantized).
ACCEPTED=$((2 * CLIENTS))
accepted="" instances=""
for _ in $(seq 60); do
  accepted=$(prom_query 'sum(fedagg_updates_accepted_total)')
  instances=$(prom_query 'count(up == 1)')
  [ "$accepted" = "$ACCEPTED" ] && [ "$instances" = 3 ] && break
  sleep 0.5
done
echo "Prometheus: sum(fedagg_updates_accepted_total) = ${accepted:-nothing} (expected $ACCEPTED)"
echo "Prometheus: count(up == 1) = ${instances:-nothing} (expected 3)"
[ "$accepted" = "$ACCEPTED" ] && [ "$instances" = 3 ]
