#!/usr/bin/env bash
# The alert rules pass `promtool check rules`; the dashboard is valid JSON and every
# metric it queries is one fedagg exports (docs/OPERATIONS.md's table).
# Usage: monitoring_files_test.sh MONITORING_DIR OPERATIONS_MD
set -euo pipefail
dir=$1 operations=$2
command -v promtool >/dev/null || { echo "promtool is not installed (scripts/setup.sh installs prometheus)"; exit 1; }
promtool check rules "$dir/alerts.yml"
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
