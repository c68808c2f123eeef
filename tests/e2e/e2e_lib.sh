# Shared helpers of the end-to-end tests: start fedagg-server processes on loopback,
# wait for ports, put nginx in front of them as a gRPC load balancer, stop everything on exit, write and read .npy files (Python's standard
# library). Sourced, not run.
set -euo pipefail

E2E_DIR=$(mktemp -d /tmp/fedagg-e2e.XXXXXX)
E2E_PIDS=()
e2e_cleanup() {
  local rc=$?
  kill "${E2E_PIDS[@]}" 2>/dev/null || true
  kill -CONT "${E2E_PIDS[@]}" 2>/dev/null || true  # a stopped process acts on SIGTERM only once resumed
  wait 2>/dev/null || true
  if [ "$rc" -ne 0 ]; then
    echo "--- logs ($E2E_DIR) ---"
    tail -n 20 "$E2E_DIR"/*.log 2>/dev/null || true
  fi
  rm -rf "$E2E_DIR"
}
trap e2e_cleanup EXIT

e2e_port_answers() {  # e2e_port_answers PORT: true when something listens on it
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

e2e_any_port_answers() {  # e2e_any_port_answers FIRST LAST
  local port
  for port in $(seq "$1" "$2"); do
    e2e_port_answers "$port" && return 0
  done
  return 1
}

e2e_wait_port() {  # e2e_wait_port PORT
  for _ in $(seq 100); do
    e2e_port_answers "$1" && return 0
    sleep 0.1
  done
  echo "nothing listens on port $1" >&2
  return 1
}

# Sets E2E_BASE: the first of 10 ports (E2E_BASE .. E2E_BASE + 9) this test owns. Blocks
# lie in 20000-32699, below Linux's ephemeral range (32768 and up), whose ports any
# outgoing connection may hold. A block is owned through an flock on a file named after it,
# held by this shell and the processes it starts until they exit (a crash releases it
# too), so tests run in parallel never share a block: two drawing the same random base
# once failed a test with "address in use". A block where a port already answers is
# passed over.
e2e_claim_ports() {
  local base lock_dir=${TMPDIR:-/tmp}/fedagg-e2e-ports
  mkdir -p "$lock_dir"
  for _ in $(seq 200); do
    base=$((20000 + (RANDOM % 1270) * 10))
    exec {E2E_PORT_LOCK}>"$lock_dir/$base.lock"
    if flock -n "$E2E_PORT_LOCK" && ! e2e_any_port_answers "$base" $((base + 9)); then
      E2E_BASE=$base
      return 0
    fi
    exec {E2E_PORT_LOCK}>&-
  done
  echo "no free block of 10 ports in 20000-32699 after 200 draws" >&2
  return 1
}
e2e_claim_ports

e2e_start_server() {  # e2e_start_server BINARY NAME GRPC_PORT METRICS_PORT [flags...]
  local binary=$1 name=$2 port=$3 metrics=$4; shift 4
  "$binary" --listen="127.0.0.1:$port" --metrics_address="127.0.0.1:$metrics" --node_id="$name" \
      --forward_interval_ms=200 --child_grace_ms=5000 "$@" >"$E2E_DIR/$name.log" 2>&1 &
  E2E_PIDS+=($!)
  e2e_wait_port "$port"
  e2e_wait_port "$metrics"
  # The ports open inside the server's start; what it logs about its start (the backend,
  # resumed checkpoints) is flushed with its last line, which callers may grep for.
  for _ in $(seq 100); do
    grep -q "listening on port" "$E2E_DIR/$name.log" && return 0
    sleep 0.1
  done
  echo "$name did not log that it is listening:" >&2
  cat "$E2E_DIR/$name.log" >&2
  return 1
}

e2e_start_tree() {  # e2e_start_tree BINARY: a root and two intermediates under it; sets ROOT, I1, I2
  ROOT=$E2E_BASE I1=$((E2E_BASE + 1)) I2=$((E2E_BASE + 2))
  e2e_start_server "$1" root "$ROOT" $((ROOT + 5))
  e2e_start_server "$1" intermediate-1 "$I1" $((I1 + 5)) --parent="127.0.0.1:$ROOT"
  e2e_start_server "$1" intermediate-2 "$I2" $((I2 + 5)) --parent="127.0.0.1:$ROOT"
}

# e2e_start_nginx LB_PORT BACKEND_PORT...: nginx balancing gRPC over the backends, each
# request on its own; with E2E_NGINX_BY_CONNECTION=1, every request of one client
# connection to one backend (as docker/nginx.conf does: a secure aggregation's cohort
# stream and update must reach one node).
e2e_start_nginx() {
  local lb=$1 backend servers=""; shift
  if [ "${E2E_NGINX_BY_CONNECTION:-0}" = 1 ]; then servers="    hash \$remote_addr\$remote_port consistent;"$'\n'; fi
  local nginx; nginx=$(command -v nginx || echo /usr/sbin/nginx)
  [ -x "$nginx" ] || { echo "nginx is not installed (scripts/setup.sh installs it)" >&2; return 1; }
  for backend in "$@"; do servers+="    server 127.0.0.1:$backend;"$'\n'; done
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
$servers  }
  server {
    listen 127.0.0.1:$lb http2;
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
  "$nginx" -c "$E2E_DIR/nginx/nginx.conf" -p "$E2E_DIR/nginx" >"$E2E_DIR/nginx.log" 2>&1 &
  E2E_PIDS+=($!)
  e2e_wait_port "$lb"
}

e2e_metric() {  # e2e_metric METRICS_PORT NAME -> the sample's value (0 when absent)
  curl -sf "http://127.0.0.1:$1/metrics" | awk -v name="$2" '$1 == name {print $2; found=1} END {if (!found) print 0}'
}

e2e_contributions() {  # e2e_contributions FEDAGG_CLIENT PORT ID -> contributions counted for ID at PORT
  "$1" --server="127.0.0.1:$2" --json status "$3" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("contributions", "0"))'
}

e2e_finish_counting_round() {  # e2e_finish_counting_round FEDAGG_CLIENT ROOT_PORT ID N
  # Seals ID at the root, waits for FINALIZED, and requires N contributions and the int64
  # result w = [N, sum of 1000 + n for n = 1..N]: what clients 1..N sending [1, 1000 + n] add up to.
  local client=$1 port=$2 id=$3 n=$4 expected=0 k w
  "$client" --server="127.0.0.1:$port" seal "$id" >/dev/null
  "$client" --server="127.0.0.1:$port" watch "$id" | tail -n 1 | grep -q FINALIZED
  [ "$(e2e_contributions "$client" "$port" "$id")" = "$n" ]
  mkdir -p "$E2E_DIR/result-$id"
  "$client" --server="127.0.0.1:$port" result "$id" --out="$E2E_DIR/result-$id" >/dev/null
  for k in $(seq "$n"); do expected=$((expected + 1000 + k)); done
  w=$(npy_read "$E2E_DIR/result-$id/w.npy")
  echo "result w=$w (expected $n,$expected)"
  [ "$w" = "$n,$expected" ]
}

e2e_wait_for_contributions() {  # e2e_wait_for_contributions FEDAGG_CLIENT PORT ID N (30 s at most)
  for _ in $(seq 300); do
    [ "$(e2e_contributions "$1" "$2" "$3" 2>/dev/null || echo -1)" = "$4" ] && return 0
    sleep 0.1
  done
  echo "port $2 never counted $4 contributions to $3 (last: $(e2e_contributions "$1" "$2" "$3" || true))" >&2
  return 1
}

e2e_submit() {  # e2e_submit FEDAGG_CLIENT PORT ID N: client N's update w = [1, 1000 + N] (int64) through PORT
  npy "$E2E_DIR/u$4.npy" "<i8" "1,$((1000 + $4))"
  "$1" --server="127.0.0.1:$2" submit "$3" --client_id="client-$4" w="$E2E_DIR/u$4.npy" >/dev/null
}

e2e_submit_once_released() {  # e2e_submit_once_released FEDAGG_CLIENT PORT ID N (30 s at most)
  # e2e_submit, sent again every 0.5 s while it is refused ABORTED: the client's claim is
  # held by an aggregator that acked the update and has not delivered it (until its
  # parent gives it up as lost); any other refusal fails at once.
  local attempt
  for attempt in $(seq 60); do
    e2e_submit "$@" 2>"$E2E_DIR/held.txt" && return 0
    grep -q ABORTED "$E2E_DIR/held.txt" || { cat "$E2E_DIR/held.txt" >&2; return 1; }
    sleep 0.5
  done
  echo "client $4 was never accepted again" >&2
  return 1
}

e2e_wait_mirrored() {  # e2e_wait_mirrored FEDAGG_CLIENT PORT ID: until the intermediate at PORT knows ID
  for _ in $(seq 100); do
    "$1" --server="127.0.0.1:$2" status "$3" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "port $2 never mirrored $3" >&2
  return 1
}

e2e_make_certificates() {  # e2e_make_certificates DIR: ca.pem, server.{pem,key}, client.{pem,key} for 127.0.0.1
  local dir=$1
  mkdir -p "$dir"
  (
    cd "$dir"
    exec >openssl.log 2>&1
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=fedagg-test-ca
    for who in server client; do
      openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj /CN=$who
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >$who.ext
      openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $who.pem -days 1 -extfile $who.ext
    done
  ) || { echo "openssl failed; see $dir/openssl.log" >&2; return 1; }
}

# npy FILE DESCR COMMA_SEPARATED_VALUES: writes a 1-D .npy (descr <f4, <f8, <i4 or <i8)
npy() {
  python3 - "$@" <<'PY'
import struct, sys
path, descr, values = sys.argv[1], sys.argv[2], [v for v in sys.argv[3].split(",") if v]
fmt = {"<f4": "f", "<f8": "d", "<i4": "i", "<i8": "q"}[descr]
header = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (descr, len(values))
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
data = struct.pack("<%d%s" % (len(values), fmt), *[float(v) if fmt in "fd" else int(v) for v in values])
open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
PY
}
# npy READ: prints the values of FILE, comma-separated
npy_read() {
  python3 - "$1" <<'PY'
import ast, struct, sys
raw = open(sys.argv[1], "rb").read()
length = struct.unpack("<H", raw[8:10])[0]
header = ast.literal_eval(raw[10:10 + length].decode())
fmt = {"<f4": "f", "<f8": "d", "<i8": "q"}[header["descr"]]
count = 1
for d in header["shape"]:
    count *= d
values = struct.unpack("<%d%s" % (count, fmt), raw[10 + length:])
print(",".join(("%g" % v) if fmt in "fd" else str(v) for v in values))
PY
}
