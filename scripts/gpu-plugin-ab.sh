#!/usr/bin/env bash
# A/B on a lent GPU, in one call: the GPU bundle's own build (B) against A — another
# build's cuda plugin (e.g. the bundle of the last commit measured, or a branch's), or the
# same build with other server flags — on chosen rows of the service table, alternating A
# and B run by run, after the selftest and the cuda tests of B and the selftest of A's
# plugin. Both sides run the bundle's
# fedagg-server (`--cuda_plugin` names A's plugin), so a change to the cuda backend, or a
# flag, is measured alone. scripts/gpu-bundle.sh copies it beside run.sh as ab.sh.
#   ab.sh A_PLUGIN[.gz]|- OUT_DIR [--workloads=sparse,row_sparse] [--backends=cuda]
#         [--a_flags='--ingest_window_mib=256'] [--b_flags='...'] [--runs=3] [--budget_s=150]
# A_PLUGIN "-": A runs the bundle's own plugin too (an A/B of flags). --a_flags and
# --b_flags: more fedagg-server flags on that side. Writes OUT_DIR/ab.txt (every row, A
# and B, with the staging metrics' reduction and copy seconds and each run's length) and
# OUT_DIR/tables.tgz (the tables' full output). Stops starting new pairs of runs once
# --budget_s seconds have passed. Exit status: 0 when B's checks passed and every run's
# result checked out, 1 otherwise, 77 when there is no usable CUDA device (nothing else
# is run).
set -uo pipefail
DIR=$(cd "$(dirname "$0")" && pwd)
USAGE="usage: ab.sh A_PLUGIN[.gz]|- OUT_DIR [--workloads=...] [--backends=cuda] [--a_flags=...] [--b_flags=...] [--runs=3] [--budget_s=150]"
A_PLUGIN=${1:?$USAGE}
OUT=${2:?$USAGE}
shift 2
WORKLOADS=sparse,row_sparse BACKENDS=cuda A_FLAGS="" B_FLAGS="" RUNS=3 BUDGET=150
for arg in "$@"; do
  case $arg in
    --workloads=*) WORKLOADS=${arg#*=} ;;
    --backends=*) BACKENDS=${arg#*=} ;;
    --a_flags=*) A_FLAGS=${arg#*=} ;;
    --b_flags=*) B_FLAGS=${arg#*=} ;;
    --runs=*) RUNS=${arg#*=} ;;
    --budget_s=*) BUDGET=${arg#*=} ;;
    *) echo "ab.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# The bundle's programs unpacked, and the libraries they load found (env.sh:
# scripts/gpu-bundle-env.sh).
source "$DIR/env.sh"
case $A_PLUGIN in
  -) A_FLAGS="--cuda_plugin=$DIR/bin/libfedagg_backend_cuda.so $A_FLAGS" ;;
  *.gz) gunzip -c "$A_PLUGIN" >"$DIR/a-plugin.so" && A_FLAGS="--cuda_plugin=$DIR/a-plugin.so $A_FLAGS" ;;
  *) cp "$A_PLUGIN" "$DIR/a-plugin.so" && A_FLAGS="--cuda_plugin=$DIR/a-plugin.so $A_FLAGS" ;;
esac

failed=0 start=$SECONDS
say() { echo "$*" | tee -a "$OUT/ab.txt"; }
: >"$OUT/ab.txt"
say "ab.sh: B = the bundle of $(cat "$DIR/COMMIT")${B_FLAGS:+ with $B_FLAGS}, A = fedagg-server $A_FLAGS; rows: $WORKLOADS on $BACKENDS"
"$DIR/bin/fedagg-selftest" --backend=cuda >"$OUT/fedagg-selftest.log" 2>&1
case $? in
  0) say "PASS fedagg-selftest --backend=cuda (B)" ;;
  77) say "NO DEVICE: $(tail -n 1 "$OUT/fedagg-selftest.log")"; exit 77 ;;
  *) say "FAIL fedagg-selftest --backend=cuda (B)"; failed=1 ;;
esac
for check in fedagg_cuda_test fedagg_cuda_conformance_test; do
  if "$DIR/bin/$check" >"$OUT/$check.log" 2>&1; then say "PASS $check (B)"; else say "FAIL $check (B)"; failed=1; fi
done
if [ "$A_PLUGIN" != - ]; then
  if "$DIR/bin/fedagg-selftest" --backend=cuda --cuda_plugin="$DIR/a-plugin.so" >"$OUT/fedagg-selftest-a.log" 2>&1; then
    say "PASS fedagg-selftest --backend=cuda (A's plugin)"
  else
    say "FAIL fedagg-selftest --backend=cuda (A's plugin; fedagg-selftest-a.log)"
    failed=1
  fi
fi
names=()
for run in $(seq "$RUNS"); do
  for side in A B; do
    flags=$([ "$side" = A ] && echo "$A_FLAGS" || echo "$B_FLAGS")
    "$DIR/service-table.sh" "$DIR/bin" --backends="$BACKENDS" --workloads="$WORKLOADS" --server_flags="$flags" \
        >"$OUT/$side$run.txt" 2>&1 || failed=1
    names+=("$side$run.txt")
    # The table's rows (the last rounds'; the first rounds' follow, marked "first").
    awk -v tag="$side$run" '/^first rounds/ {first = " first"} /^\| [^w-]/ {print tag first, $0}' \
        "$OUT/$side$run.txt" | tee -a "$OUT/ab.txt"
    awk -v tag="$side$run" '/^staging metrics after/ {row = $4}
        /reduce_seconds_sum|copy_seconds_sum/ {sub(/\{[^}]*\}/, "", $1); print tag, row, $1, $2}
        /load generator seconds per round/ {$1 = $2 = $3 = $4 = $5 = ""; print tag, row, "seconds per round", $0}' \
        "$OUT/$side$run.txt" | tee -a "$OUT/ab.txt"
  done
  [ $((SECONDS - start)) -gt "$BUDGET" ] && { say "ab.sh: stopped after $run pair(s): --budget_s=$BUDGET passed"; break; }
done
tar -czf "$OUT/tables.tgz" -C "$OUT" "${names[@]}"
say "ab.sh: $((SECONDS - start)) s"
exit "$failed"
