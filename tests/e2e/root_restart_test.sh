#!/usr/bin/env bash
# A root restarted without checkpoints (docs/PROTOCOL.md 6.3): its aggregations are gone.
# The intermediate notices (its Join is refused NOT_FOUND, or names another incarnation of
# the id), fails its mirrors saying why, refuses their updates with a status a person can
# act on, and joins the new root's aggregations, an id created again included.
#  1. r1 and r2 at the root; client 1 is counted in each through the intermediate.
#  2. The root is killed and restarted on the same port; only r1 is created again.
#  3. The intermediate's old r2 ends FAILED and refuses client 2 with FAILED_PRECONDITION
#     naming the lost aggregation; r1 is the new incarnation: client 1 (whose earlier
#     update went with the old one) is counted again, once, with client 2.
# Usage: root_restart_test.sh FEDAGG_SERVER FEDAGG_CLIENT
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
SERVER=$1 CLIENT=$2
ROOT=$E2E_BASE I=$((E2E_BASE + 1))
e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5))
ROOT_PID=${E2E_PIDS[-1]}
e2e_start_server "$SERVER" intermediate "$I" $((I + 5)) --parent="127.0.0.1:$ROOT"
cli() { local port=$1; shift; "$CLIENT" --server="127.0.0.1:$port" "$@"; }
submit() {  # submit ID N: client N's update [1, 1000 + N] through the intermediate
  npy "$E2E_DIR/u$2.npy" "<i8" "1,$((1000 + $2))"
  cli "$I" submit "$1" --client_id="client-$2" w="$E2E_DIR/u$2.npy" >/dev/null
}
create() { cli "$ROOT" create "$1" --type='<w=int64[2]>' --intrinsics=federated_sum --min_contributions=1 >/dev/null; }

for id in r1 r2; do create "$id"; e2e_wait_mirrored "$CLIENT" "$I" "$id"; submit "$id" 1; done
old_r1=$(cli "$I" --json status r1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["incarnation"])')

kill -9 "$ROOT_PID"; wait "$ROOT_PID" 2>/dev/null || true
e2e_start_server "$SERVER" root "$ROOT" $((ROOT + 5))
create r1

state() { cli "$I" --json status "$1" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["state"], d["spec"]["incarnation"])'; }
for _ in $(seq 100); do
  [ "$(state r2 | cut -d' ' -f1)" = FAILED ] && [ "$(state r1)" != "OPEN $old_r1" ] && [ "$(state r1 | cut -d' ' -f1)" = OPEN ] && break
  sleep 0.1
done
echo "intermediate: r2 $(state r2); r1 $(state r1) (was $old_r1)"
[ "$(state r2 | cut -d' ' -f1)" = FAILED ]
cli "$I" --json status r2 | grep -q "no longer holds this aggregation"
if submit r2 2 2>"$E2E_DIR/r2.err"; then echo "a mirror of a lost aggregation accepted an update" >&2; exit 1; fi
cat "$E2E_DIR/r2.err"
grep -q "FAILED_PRECONDITION: aggregation 'r2' is FAILED (.*no longer holds this aggregation" "$E2E_DIR/r2.err"

[ "$(state r1 | cut -d' ' -f1)" = OPEN ] && [ "$(state r1 | cut -d' ' -f2)" != "$old_r1" ]
submit r1 1
submit r1 2
e2e_wait_for_contributions "$CLIENT" "$ROOT" r1 2
e2e_finish_counting_round "$CLIENT" "$ROOT" r1 2
echo "a root restarted without checkpoints: ok"
