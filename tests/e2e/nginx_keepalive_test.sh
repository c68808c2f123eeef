#!/usr/bin/env bash
# A server's keepalive pings (--child_keepalive_ms) reach nginx's upstream connections,
# and nginx answers them: a stream idle behind nginx for several ping periods stays open.
# A root pinging every second, nginx in front: a client watches an aggregation through
# nginx, nothing happens for 5 s (two pings and their timeouts), then it is sealed and
# finalized, and the watch, still open, sees FINALIZED. Were the pings not answered, the
# root would drop nginx's connection after 2 s and the watch would end in UNAVAILABLE.
# Usage: nginx_keepalive_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
R=$E2E_BASE LB=$((E2E_BASE + 2))

e2e_start_server "$SERVER" root "$R" $((R + 5)) --child_keepalive_ms=1000
e2e_start_nginx "$LB" "$R"
cli() { local port=$1; shift; "$CLIENT" --server="127.0.0.1:$port" "$@"; }
cli "$R" create k1 --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1 >/dev/null
npy "$E2E_DIR/u1.npy" "<i8" "1,1001"
cli "$LB" submit k1 --client_id=client-1 w="$E2E_DIR/u1.npy" >/dev/null

cli "$LB" watch k1 >"$E2E_DIR/watch.out" 2>&1 &
WATCH=$!
sleep 5
kill -0 "$WATCH" || { echo "the watch through nginx ended while idle:" >&2; cat "$E2E_DIR/watch.out" >&2; exit 1; }
cli "$R" seal k1 >/dev/null
wait "$WATCH" || { echo "the watch through nginx failed:" >&2; cat "$E2E_DIR/watch.out" >&2; exit 1; }
tail -n 1 "$E2E_DIR/watch.out" | grep -q FINALIZED || { cat "$E2E_DIR/watch.out" >&2; exit 1; }
echo "keepalive pings answered by nginx: ok"
