# Helpers of the browser tests and the browser benchmark (bench/browser_upload_bench.sh),
# beside tests/e2e/e2e_lib.sh (sourced after this file: ports, servers, cleanup). Sourced,
# not run.

# Exits 77 (ctest: skipped), saying what is missing, unless Debian's chromium, its
# chromedriver and /usr/bin/python3's selenium are there. WHAT: "chromium" (the benchmark:
# the browser alone) or "selenium" (the tests: the browser driven by WebDriver).
browser_require_tools() {
  local what=${1:-selenium} missing=()
  command -v chromium >/dev/null 2>&1 || missing+=("chromium (apt-get install chromium)")
  if [ "$what" = selenium ]; then
    [ -x /usr/bin/chromedriver ] || missing+=("/usr/bin/chromedriver (apt-get install chromium-driver)")
    /usr/bin/python3 -c 'import selenium' 2>/dev/null || missing+=("selenium for /usr/bin/python3 (apt-get install python3-selenium)")
    /usr/bin/python3 -c 'import numpy' 2>/dev/null || missing+=("numpy for /usr/bin/python3 (apt-get install python3-numpy)")
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    echo "SKIPPED: this test needs ${missing[*]}"
    exit 77
  fi
}

# browser_start_nginx LB_PORT ROOT_HTTP_PORT INTERMEDIATE_HTTP_PORTS [EXTRA_LOCATIONS]: nginx
# in front of fedagg's HTTP path, as a site would put it in front of its aggregators (run
# in the foreground of a temporary prefix, stopped by e2e_lib's cleanup):
# - /v1/ (tasks and uploads), /fedagg.mjs and /examples/ go to the intermediates
#   (INTERMEDIATE_HTTP_PORTS: space-separated), hashed on the client id, so that every
#   request of an upload reaches the node that holds it; bodies stream through unbuffered
#   (proxy_request_buffering off), up to 17 MiB (one 16 MiB chunk and its headers);
# - /v1/aggregations and /v1/results go to the root: an intermediate's mirror holds no
#   result (docs/PROTOCOL.md 6.2), and its state is its own part's.
# EXTRA_LOCATIONS: more nginx configuration inside the server block. With
# FEDAGG_BROWSER_ASSETS=source in the environment, /fedagg.mjs and /examples/ are served
# from this tree (client_stub/js) instead of from the server's embedded copies: for
# trying changes to them without rebuilding fedagg-server.
browser_start_nginx() {
  local lb=$1 root=$2 intermediates=$3 extra=${4:-} port servers="" assets
  local nginx; nginx=$(command -v nginx || echo /usr/sbin/nginx)
  [ -x "$nginx" ] || { echo "nginx is not installed (scripts/setup.sh installs it)" >&2; return 1; }
  for port in $intermediates; do servers+="    server 127.0.0.1:$port;"$'\n'; done
  if [ "${FEDAGG_BROWSER_ASSETS:-server}" = source ]; then
    local js; js=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../client_stub/js" && pwd)
    assets="location = /fedagg.mjs { alias $js/fedagg.mjs; default_type text/javascript; }
    location /examples/ { alias $js/examples/; types { text/html html; text/javascript mjs js; } }"
  else
    assets="location = /fedagg.mjs { proxy_pass http://fedagg_intermediates; }
    location /examples/ { proxy_pass http://fedagg_intermediates; }"
  fi
  mkdir -p "$E2E_DIR/nginx"
  cat >"$E2E_DIR/nginx/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $E2E_DIR/nginx/nginx.pid;
error_log $E2E_DIR/nginx-error.log;
events { worker_connections 256; }
http {
  access_log $E2E_DIR/nginx-access.log;
  client_body_temp_path $E2E_DIR/nginx/body;
  proxy_temp_path $E2E_DIR/nginx/proxy;
  fastcgi_temp_path $E2E_DIR/nginx/fastcgi;
  uwsgi_temp_path $E2E_DIR/nginx/uwsgi;
  scgi_temp_path $E2E_DIR/nginx/scgi;
  upstream fedagg_intermediates {
    hash \$arg_client_id consistent;
$servers    keepalive 16;
  }
  upstream fedagg_root {
    server 127.0.0.1:$root;
    keepalive 4;
  }
  server {
    listen 127.0.0.1:$lb;
    client_max_body_size 17m;
    client_body_timeout 300s;
    proxy_request_buffering off;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header Host \$host;
    proxy_read_timeout 300s;
    proxy_send_timeout 300s;
    location /v1/ { proxy_pass http://fedagg_intermediates; }
    location = /v1/aggregations { proxy_pass http://fedagg_root; }
    location = /v1/results { proxy_pass http://fedagg_root; }
    location = /favicon.ico { access_log off; return 204; }
    $assets
    $extra
  }
}
CONF
  "$nginx" -c "$E2E_DIR/nginx/nginx.conf" -p "$E2E_DIR/nginx" >"$E2E_DIR/nginx.log" 2>&1 &
  E2E_PIDS+=($!)
  e2e_wait_port "$lb"
}
