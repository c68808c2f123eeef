#!/usr/bin/env bash
# Builds, on a machine without a GPU, everything fedagg's GPU check runs, and packs it in one
# folder for a machine that has only the NVIDIA driver and the CUDA 13 libraries (cudart,
# cuSPARSE, NCCL): fedagg-selftest, the cuda-labelled test binaries, fedagg_gpu_bench,
# fedagg-server with the cuda plugin it loads (libfedagg_backend_cuda.so), fedagg-demo (a
# service round checked against the reference), fedagg-loadgen and fedagg-raw-sink (the
# service table, scripts/service-table.sh, copied beside), gperftools' profiler when
# installed, with the non-CUDA shared libraries they need (gRPC, Protobuf, Abseil,
# OpenSSL, ...; stripped), packed in payload.tar.gz (the programs carry their CUDA kernels
# for sm_80 and sm_90: 39 MiB packed), and run.sh (scripts/gpu-bundle-run.sh), which unpacks
# them beside itself, runs them all and writes one report; and ab.sh
# (scripts/gpu-plugin-ab.sh), which measures this build's cuda plugin against another's
# (both unpack and find their libraries through env.sh, scripts/gpu-bundle-env.sh).
#   scripts/gpu-bundle.sh [--build_dir=build] [--out=build/gpu-bundle]
# The build directory is configured with the default preset when it is not yet; its CUDA
# backend must be on (nvcc found). The folder must stay under 60 MiB: it travels with the
# working tree to a lent GPU machine (docs/GPU.md, "On a machine with a GPU").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=build OUT=""
for arg in "$@"; do
  case $arg in
    --build_dir=*) BUILD_DIR=${arg#*=} ;;
    --out=*) OUT=${arg#*=} ;;
    *) echo "gpu-bundle: unknown argument $arg" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$BUILD_DIR/gpu-bundle}
MAX_BYTES=$((60 << 20))

[ -f "$BUILD_DIR/CMakeCache.txt" ] || cmake --preset default >/dev/null
if ! grep -q '^FEDAGG_WITH_CUDA:BOOL=ON' "$BUILD_DIR/CMakeCache.txt"; then
  echo "gpu-bundle: $BUILD_DIR is built without the CUDA backend (FEDAGG_WITH_CUDA is off: no nvcc?)" >&2
  exit 1
fi
TARGETS=(fedagg-server fedagg-demo fedagg-selftest fedagg_gpu_bench fedagg-secagg-unmask-bench fedagg_cuda_test fedagg_cuda_conformance_test
         fedagg-loadgen fedagg-raw-sink)
cmake --build "$BUILD_DIR" --target "${TARGETS[@]}" fedagg_backend_cuda

# Debug information goes; the server and the plugin keep their symbol tables (1 MB packed),
# so that the CPU profiles of run.sh read by scripts/gpu-profiles.sh name their functions.
strip_for_bundle() {
  case $(basename "$1") in
    fedagg-server|"$PLUGIN") strip --strip-debug "$1" ;;
    *) strip --strip-unneeded "$1" ;;
  esac
}
PLUGIN=libfedagg_backend_cuda.so
rm -rf "$OUT"
STAGE=$OUT/payload
mkdir -p "$STAGE/bin" "$STAGE/lib"
for target in "${TARGETS[@]}"; do
  binary=$(find "$BUILD_DIR" -type f -name "$target" -perm -u+x | head -n 1)
  [ -n "$binary" ] || { echo "gpu-bundle: no binary for $target under $BUILD_DIR" >&2; exit 1; }
  cp "$binary" "$STAGE/bin/"
  strip_for_bundle "$STAGE/bin/$target"
done
# The cuda backend's plugin, beside fedagg-server and fedagg-selftest, which load it.
[ -f "$BUILD_DIR/service/$PLUGIN" ] || { echo "gpu-bundle: no $PLUGIN in $BUILD_DIR/service" >&2; exit 1; }
cp "$BUILD_DIR/service/$PLUGIN" "$STAGE/bin/"
strip_for_bundle "$STAGE/bin/$PLUGIN"

# The shared libraries the binaries load, but for the C library (the target's own) and
# CUDA's (the target's driver and CUDA installation provide them).
CUDA_LIB_DIRS=$(dirname "$(command -v nvcc)")/..
is_left_out() {
  case $(basename "$1") in
    linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libcusparse.so*|libnccl.so*|libnvJitLink.so*|libcublas*.so*) return 0 ;;
  esac
  case $(readlink -f "$1") in "$(readlink -f "$CUDA_LIB_DIRS")"/*) return 0 ;; esac
  return 1
}
carry_libraries_of() {  # copies into lib/ the libraries $1 loads that the bundle must carry
  ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r library; do
    is_left_out "$library" && continue
    [ -f "$STAGE/lib/$(basename "$library")" ] && continue
    cp -L "$library" "$STAGE/lib/$(basename "$library")"
    strip --strip-unneeded "$STAGE/lib/$(basename "$library")" 2>/dev/null || true
  done
}
for binary in "$STAGE"/bin/*; do carry_libraries_of "$binary"; done
# gperftools' CPU profiler, for run.sh's profiles of the cuda server (service-table.sh
# finds it in profiler/ beside bin/); left out, and that step skipped, where this machine
# has none.
PROFILER=/usr/lib/x86_64-linux-gnu/libprofiler.so.0
if [ -f "$PROFILER" ]; then
  mkdir -p "$STAGE/profiler"
  cp -L "$PROFILER" "$STAGE/profiler/"
  carry_libraries_of "$PROFILER"
fi
programs=$(ls "$STAGE/bin" | wc -l) libraries=$(ls "$STAGE/lib" | wc -l)
tar -czf "$OUT/payload.tar.gz" -C "$STAGE" bin lib $([ -d "$STAGE/profiler" ] && echo profiler)
rm -rf "$STAGE"
cp scripts/gpu-bundle-run.sh "$OUT/run.sh"
cp scripts/service-table.sh "$OUT/service-table.sh"
cp scripts/gpu-plugin-ab.sh "$OUT/ab.sh"
cp scripts/gpu-bundle-env.sh "$OUT/env.sh"
chmod +x "$OUT/run.sh" "$OUT/service-table.sh" "$OUT/ab.sh"
git rev-parse --short HEAD >"$OUT/COMMIT" 2>/dev/null || echo unknown >"$OUT/COMMIT"

bytes=$(du -sb "$OUT" | cut -f1)
echo "gpu-bundle: $OUT: $programs programs, $libraries libraries, $((bytes >> 20)) MiB packed"
if [ "$bytes" -gt "$MAX_BYTES" ]; then
  echo "gpu-bundle: $OUT is $((bytes >> 20)) MiB, over the 60 MiB it may take to a GPU machine" >&2
  exit 1
fi
