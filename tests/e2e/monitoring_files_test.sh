#!/usr/bin/env bash
# The alert rules pass `promtool check rules` and their unit tests (`promtool test rules`); the dashboard is valid JSON and every
# metric it queries is one fedagg exports (docs/OPERATIONS.md's table); the compose
# topology's Prometheus configuration passes `promtool check config` and its nginx
# configuration passes `nginx -t` (container host names replaced by loopback).
# Usage: monitoring_files_test.sh MONITORING_DIR OPERATIONS_MD DOCKER_DIR
set -euo pipefail
dir=$1 operations=$2 docker=$3
work=$(mktemp -d /tmp/fedagg-monitoring-files.XXXXXX)
trap 'rm -rf "$work"' EXIT
sed "s#/etc/prometheus/alerts.yml#$dir/alerts.yml#" "$docker/prometheus.yml" > "$work/prometheus.yml"
promtool check config "$work/prometheus.yml"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
sed -E 's/(intermediate-[ab]|root):(50051|8080)/127.0.0.1:\2/' "$docker/nginx.conf" > "$work/nginx.conf"
"$NGINX" -t -q -c "$work/nginx.conf" -g "pid $work/nginx.pid;"
echo "docker/nginx.conf: nginx -t passed"
command -v promtool >/dev/null || { echo "promtool is not installed (scripts/setup.sh installs prometheus)"; exit 1; }
promtool check rules "$dir/alerts.yml"
promtool test rules "$dir/alerts_test.yml"
python3 -m json.tool "$dir/grafana-dashboard.json" >/dev/null
echo "grafana-dashboard.json: valid JSON"
missing=0
for metric in $(grep -o 'fedagg_[a-z_]*' "$dir/grafana-dashboard.json" "$dir/alerts.yml" | cut -d: -f2 | sort -u); do
  base=${metric%_bucket}; base=${base%_sum}; base=${base%_count}
  if ! grep -q "\`$base\`" "$operations"; then
    echo "queried but not exported (not in docs/OPERATIONS.md): $metric"
    missing=1
  fi
done
[ "$missing" = 0 ] && echo "every queried metric is exported"
