#!/usr/bin/env bash
# Nothing acknowledged is lost when an intermediate dies, in the deployment fedagg is built
# for: nginx in front of two intermediate aggregators and a root (docs/RELIABILITY.md,
# "Exactly once across the tree").
#  1. Intermediate A forwards nothing before the seal (a forward interval of an hour), so
#     the updates it acknowledges stay on it. Clients 1-10 send through A and are acked.
#  2. A is killed with SIGKILL. Its acknowledged updates are gone with it.
#  3. Clients 1-10 retry through nginx, as clients behind a load balancer do when their
#     connection drops; nginx sends them to B. While the root still holds A's claims (its
#     --child_grace_ms, 4 s) they are refused ABORTED, never ALREADY_EXISTS; then they are
#     accepted. Clients 11-20 send through nginx meanwhile.
#  4. The root's result counts each of clients 1-20 exactly once: w = [20, sum of 1000 + n].
# Usage: nginx_intermediate_kill_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
ROOT=$E2E_BASE A=$((E2E_BASE + 1)) B=$((E2E_BASE + 2)) LB=$((E2E_BASE + 3))

e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5)) --child_grace_ms=4000
e2e_start_server "$SERVER" intermediate-a "$A" $((A + 5)) --parent="127.0.0.1:$ROOT" --forward_interval_ms=3600000
A_PID=${E2E_PIDS[-1]}
e2e_start_server "$SERVER" intermediate-b "$B" $((B + 5)) --parent="127.0.0.1:$ROOT"
e2e_start_nginx "$LB" "$A" "$B"
cli() { local port=$1; shift; "$CLIENT" --server="127.0.0.1:$port" "$@"; }

cli "$ROOT" create k1 --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1 >/dev/null
for port in "$A" "$B"; do e2e_wait_mirrored "$CLIENT" "$port" k1; done

submit() { e2e_submit "$CLIENT" "$1" k1 "$2"; }  # submit PORT N: client N's update through PORT
for n in $(seq 10); do submit "$A" "$n"; done  # acked RECEIVED by A
[ "$(e2e_contributions "$CLIENT" "$A" k1)" = 10 ]
[ "$(e2e_contributions "$CLIENT" "$ROOT" k1)" = 0 ]  # nothing pushed yet
kill -9 "$A_PID"
wait "$A_PID" 2>/dev/null || true

aborted=0
submit_until_accepted() {  # submit_until_accepted N: through nginx, retrying what may succeed later
  local n=$1 attempt
  for attempt in $(seq 80); do
    submit "$LB" "$n" 2>"$E2E_DIR/refused-$n.txt" && return 0
    if grep -q "ALREADY_EXISTS: " "$E2E_DIR/refused-$n.txt"; then
      echo "client $n was told its lost update is counted:" >&2; cat "$E2E_DIR/refused-$n.txt" >&2; return 1
    fi
    grep -q "ABORTED: " "$E2E_DIR/refused-$n.txt" && aborted=$((aborted + 1))
    grep -q 'ABORTED\|UNAVAILABLE' "$E2E_DIR/refused-$n.txt" || { cat "$E2E_DIR/refused-$n.txt" >&2; return 1; }
    sleep 0.25
  done
  echo "client $n was never accepted again" >&2
  return 1
}
for n in $(seq 20); do submit_until_accepted "$n"; done
[ "$aborted" -gt 0 ] || { echo "no retry met the held claims: the test proves nothing" >&2; exit 1; }
echo "retries refused ABORTED while A's claims were held: $aborted"
e2e_wait_for_contributions "$CLIENT" "$ROOT" k1 20
e2e_finish_counting_round "$CLIENT" "$ROOT" k1 20
echo "an intermediate killed behind a load balancer loses nothing it acknowledged: ok"
