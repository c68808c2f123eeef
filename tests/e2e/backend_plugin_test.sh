#!/usr/bin/env bash
# One fedagg-server binary for hosts with and without CUDA: the server links no CUDA
# library; --backend=auto on a host without a GPU serves on the cpu backend, saying why,
# without loading the cuda plugin; --backend=cuda exits 2 naming what is missing (the
# plugin, its CUDA libraries, or a device). When run as root, the CUDA libraries are hidden
# in a private mount namespace to show the server starting and refusing without them.
# Usage: backend_plugin_test.sh FEDAGG_SERVER CUDA_PLUGIN FEDAGG_CLIENT
set -euo pipefail
SERVER=$1 PLUGIN=$2 CLIENT=$3
source "$(dirname "$0")/e2e_lib.sh"

cuda_libraries() { ldd "$1" | awk '$1 ~ /^lib(cuda|cudart|cusparse|nccl|nvJitLink)[.]/ {print $1 " => " $3}'; }
if [ -n "$(cuda_libraries "$SERVER")" ]; then
  echo "fedagg-server links CUDA libraries:"; cuda_libraries "$SERVER"; exit 1
fi

# expect_refusal WHAT TEXT COMMAND...: COMMAND (a fedagg-server command line, which gets
# loopback addresses added) exits 2 and says TEXT.
expect_refusal() {
  local what=$1 text=$2 rc=0; shift 2
  "$@" --listen=127.0.0.1:0 --metrics_address= >"$E2E_DIR/refusal.log" 2>&1 || rc=$?
  if [ "$rc" -ne 2 ] || ! grep -qF -- "$text" "$E2E_DIR/refusal.log"; then
    echo "$what: expected exit 2 saying '$text', got exit $rc:"; cat "$E2E_DIR/refusal.log"; exit 1
  fi
  echo "$what: exit 2, $(tail -n 1 "$E2E_DIR/refusal.log")"
}

# auto: the cpu backend on a host whose driver finds no device, and a round through it.
PORT=$E2E_BASE METRICS=$((E2E_BASE + 5))
e2e_start_server "$SERVER" auto "$PORT" "$METRICS" --backend=auto --cuda_plugin="$PLUGIN"
head -n 1 "$E2E_DIR/auto.log"
if grep -q "backend cuda" "$E2E_DIR/auto.log"; then
  echo "this host has a CUDA device: --backend=auto chose cuda"
  [ "$(e2e_metric "$METRICS" 'fedagg_backend_info{backend="cuda"}')" = 1 ]
  exit 0
fi
grep -q "backend cpu: --backend=auto has no CUDA device to use" "$E2E_DIR/auto.log"
[ "$(e2e_metric "$METRICS" 'fedagg_backend_info{backend="cpu"}')" = 1 ]
"$CLIENT" --server="127.0.0.1:$PORT" create plugin-round --type='<w=float32[4]>' --intrinsics=federated_sum >/dev/null
npy "$E2E_DIR/w.npy" "<f4" 1,2,3,4
"$CLIENT" --server="127.0.0.1:$PORT" submit plugin-round --client_id=c1 w="$E2E_DIR/w.npy" >/dev/null
"$CLIENT" --server="127.0.0.1:$PORT" seal plugin-round >/dev/null
"$CLIENT" --server="127.0.0.1:$PORT" result plugin-round --out="$E2E_DIR/result" >/dev/null
[ "$(npy_read "$E2E_DIR/result/w.npy")" = "1,2,3,4" ] || { echo "result: $(npy_read "$E2E_DIR/result/w.npy")"; exit 1; }
echo "auto: served a round on the cpu backend"

expect_refusal "cuda, no plugin" "no cuda backend plugin at $E2E_DIR/absent.so" \
    timeout 20 "$SERVER" --backend=cuda --cuda_plugin="$E2E_DIR/absent.so"
expect_refusal "cuda, no device" "no usable CUDA device" timeout 20 "$SERVER" --backend=cuda --cuda_plugin="$PLUGIN"

# The plugin's CUDA libraries hidden (an empty directory mounted over each directory
# holding one), as on a host without CUDA.
if [ "$(id -u)" -ne 0 ] || ! unshare --mount true 2>/dev/null; then
  echo "SKIPPED the part with CUDA libraries hidden: it needs root and mount namespaces"
  exit 0
fi
dirs=$(cuda_libraries "$PLUGIN" | awk '{print $3}' | xargs -r -n1 dirname | xargs -r -n1 readlink -f | sort -u)
[ -n "$dirs" ] || { echo "the plugin links no CUDA library:"; ldd "$PLUGIN"; exit 1; }
hide="set -e; for d in $(echo $dirs); do mount -t tmpfs none \"\$d\"; done; exec \"\$@\""
hidden() { unshare --mount --propagation private sh -c "$hide" hidden "$@"; }
missing=$(hidden ldd "$PLUGIN" | awk '/not found/ {print $1; exit}')
[ -n "$missing" ] || { echo "hiding $dirs left every CUDA library of the plugin found"; exit 1; }
expect_refusal "cuda, CUDA libraries hidden" "$missing" hidden timeout 20 "$SERVER" --backend=cuda --cuda_plugin="$PLUGIN"
rc=0
hidden timeout 3 "$SERVER" --listen=127.0.0.1:0 --metrics_address= --backend=auto --cuda_plugin="$PLUGIN" \
    >"$E2E_DIR/hidden-auto.log" 2>&1 || rc=$?
grep -q "listening on port" "$E2E_DIR/hidden-auto.log" || { echo "auto with CUDA hidden (exit $rc):"; cat "$E2E_DIR/hidden-auto.log"; exit 1; }
echo "auto, CUDA libraries hidden: $(head -n 1 "$E2E_DIR/hidden-auto.log")"
