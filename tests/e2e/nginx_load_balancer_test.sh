#!/usr/bin/env bash
# End-to-end: clients reach fedagg only through a real nginx gRPC load balancer in front
# of two intermediate aggregators; their streams spread over both, and the root's result
# (checked by fedagg-demo against the float64 reference) contains every update.
# Usage: nginx_load_balancer_test.sh FEDAGG_SERVER FEDAGG_DEMO
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 DEMO=$2
CLIENTS=40

NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "nginx is not installed (scripts/setup.sh installs it)"; exit 1; }
ROOT=$E2E_BASE; A=$((E2E_BASE + 1)); B=$((E2E_BASE + 2)); LB=$((E2E_BASE + 3))
e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5))
e2e_start_server "$SERVER" intermediate-a "$A" $((A + 5)) --parent="127.0.0.1:$ROOT"
e2e_start_server "$SERVER" intermediate-b "$B" $((B + 5)) --parent="127.0.0.1:$ROOT"

mkdir -p "$E2E_DIR/nginx"
cat >"$E2E_DIR/nginx/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $E2E_DIR/nginx/nginx.pid;
error_log $E2E_DIR/nginx/error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $E2E_DIR/nginx/body;
  proxy_temp_path $E2E_DIR/nginx/proxy;
  fastcgi_temp_path $E2E_DIR/nginx/fastcgi;
  uwsgi_temp_path $E2E_DIR/nginx/uwsgi;
  scgi_temp_path $E2E_DIR/nginx/scgi;
  upstream intermediates {
    server 127.0.0.1:$A;
    server 127.0.0.1:$B;
  }
  server {
    listen 127.0.0.1:$LB http2;
    client_max_body_size 0;
    client_body_timeout 300s;
    location / {
      grpc_pass grpc://intermediates;
      grpc_read_timeout 300s;
      grpc_send_timeout 300s;
    }
  }
}
CONF
"$NGINX" -c "$E2E_DIR/nginx/nginx.conf" -p "$E2E_DIR/nginx" >"$E2E_DIR/nginx.log" 2>&1 &
E2E_PIDS+=($!)
e2e_wait_port "$LB"

# Every client goes through the load balancer; the demo checks the root's result.
"$DEMO" --root="127.0.0.1:$ROOT" --intermediates="127.0.0.1:$LB" --clients=$CLIENTS \
    >"$E2E_DIR/demo.log" 2>&1 || { cat "$E2E_DIR/demo.log"; exit 1; }
grep -E "FINALIZED with $CLIENTS contributions|check against" "$E2E_DIR/demo.log"

a=$(e2e_metric $((A + 5)) fedagg_updates_accepted_total)
b=$(e2e_metric $((B + 5)) fedagg_updates_accepted_total)
echo "updates accepted: intermediate-a $a, intermediate-b $b (of $CLIENTS)"
[ "$((a + b))" -eq "$CLIENTS" ] && [ "$a" -gt 0 ] && [ "$b" -gt 0 ]
