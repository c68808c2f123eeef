#!/usr/bin/env bash
# `cmake --install` and find_package(fedagg): installs the build into a temporary prefix,
# configures and builds client_stub/examples against it (fedagg::client), starts the
# installed fedagg-server and runs the example against it; the mean it prints must be
# the mean of the two updates it sent.
# Usage: installed_package_test.sh BUILD_DIR SOURCE_DIR [CXX_FLAGS] [EXE_LINKER_FLAGS]
# (the flags the installed libraries were built with, e.g. a sanitizer's)
set -euo pipefail
source "$(dirname "$0")/e2e_lib.sh"
BUILD=$1 SOURCE=$2 CXX_FLAGS=${3:-} LINKER_FLAGS=${4:-}
PREFIX="$E2E_DIR/prefix"

cmake --install "$BUILD" --prefix "$PREFIX" >"$E2E_DIR/install.log"
test -x "$PREFIX/bin/fedagg-server" && test -x "$PREFIX/bin/fedagg-client"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$SOURCE/client_stub/examples" -B "$E2E_DIR/example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_CXX_FLAGS="$CXX_FLAGS" -DCMAKE_EXE_LINKER_FLAGS="$LINKER_FLAGS" \
    "${launcher[@]}" >"$E2E_DIR/configure.log"
cmake --build "$E2E_DIR/example" >"$E2E_DIR/build.log" || { tail -n 40 "$E2E_DIR/build.log"; exit 1; }

PORT=$E2E_BASE
e2e_start_server "$PREFIX/bin/fedagg-server" installed "$PORT" $((PORT + 5))
output=$("$E2E_DIR/example/fedagg_client_example" "127.0.0.1:$PORT" installed-example)
echo "$output"
[ "$output" = "installed-example: 2 contributions, mean = [2, 3, 4]" ]
