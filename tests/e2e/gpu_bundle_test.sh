#!/usr/bin/env bash
# The GPU bundle's shape, on a machine without a GPU (docs/GPU.md): scripts/gpu-bundle.sh
# makes the folder (under its 60 MiB), and its run.sh unpacks it, finds every library of
# every program (the bundle's own from the bundle), and reports "no device" cleanly: exit
# 77, the reason in the report, nothing else run; its ab.sh (the plugin A/B) likewise.
# Where a GPU exists, run.sh runs the whole check instead, and this test then requires it
# to pass.
# Usage: gpu_bundle_test.sh BUILD_DIR
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
"$REPO/scripts/gpu-bundle.sh" --build_dir="$1" --out="$E2E_DIR/bundle" | tail -n 1
[ "$(ls "$E2E_DIR/bundle")" = "$(printf 'COMMIT\nab.sh\nenv.sh\npayload.tar.gz\nrun.sh\nservice-table.sh')" ]
set +e
"$E2E_DIR/bundle/run.sh" "$E2E_DIR/report.txt" >/dev/null
rc=$?
set -e
cat "$E2E_DIR/report.txt"
grep -q "^PASS libraries: every program finds its libraries, the bundle's from the bundle$" "$E2E_DIR/report.txt"
[ "$(ls "$E2E_DIR/bundle/bin" | wc -l)" = 10 ]  # nine programs and the cuda plugin
if [ "$rc" = 77 ]; then
  grep -q "^NO DEVICE: fedagg-selftest: SKIPPED: --backend=cuda: no usable CUDA device" "$E2E_DIR/report.txt"
  grep -q "^RESULT: NO DEVICE" "$E2E_DIR/report.txt"
  [ "$(grep -c '^PASS\|^FAIL' "$E2E_DIR/report.txt")" = 1 ]  # nothing but the library check ran
  # ab.sh, the plugin A/B, says so too and measures nothing.
  cp "$E2E_DIR/bundle/bin/libfedagg_backend_cuda.so" "$E2E_DIR/a-plugin.so"
  set +e
  "$E2E_DIR/bundle/ab.sh" "$E2E_DIR/a-plugin.so" "$E2E_DIR/ab" >/dev/null
  ab_rc=$?
  set -e
  [ "$ab_rc" = 77 ] && grep -q "^NO DEVICE: fedagg-selftest: SKIPPED" "$E2E_DIR/ab/ab.txt"
else
  [ "$rc" = 0 ] && grep -q "^RESULT: PASS$" "$E2E_DIR/report.txt"
fi
# The service table from the bundle's programs, small and on the cpu backend: every row
# measured and every result checked, in the table of the last rounds and in the first's.
"$E2E_DIR/bundle/service-table.sh" "$E2E_DIR/bundle/bin" --backends=cpu --scale=0.01 >"$E2E_DIR/table.txt" 2>&1 ||
  { cat "$E2E_DIR/table.txt"; exit 1; }
cat "$E2E_DIR/table.txt"
[ "$(grep -c '^| .* MB/s\|^| .* upd/s' "$E2E_DIR/table.txt")" = 16 ]  # 8 rows, in both tables
grep -q '^first rounds' "$E2E_DIR/table.txt"
echo "gpu bundle: ok (run.sh exit $rc)"
