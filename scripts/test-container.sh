#!/usr/bin/env bash
# Builds fedagg's two images with podman and runs them: the CPU image (docker/Dockerfile.cpu)
# and the GPU image (docker/Dockerfile.gpu: the same fedagg-server plus the cuda plugin and
# NVIDIA's CUDA 13 libraries from the package index). Both package the binaries of the
# default build (scripts/build.sh default, which this runs). Checks, on this machine without
# a GPU: every library of every binary resolves inside the images; the CPU image refuses
# --backend=cuda naming the missing plugin; the GPU image refuses it naming the missing
# device, and with --backend=auto falls back to the cpu backend saying why and serves a
# round — a root and two intermediates from the GPU image, nginx in front of the
# intermediates, fedagg-demo's clients through nginx, the result checked against the
# reference. Needs root. Not part of CI (it downloads a Debian base system, Debian packages
# and NVIDIA's wheels: minutes), but must pass on a fresh machine.
# With no registry reachable, the Debian 12 base image is made locally with debootstrap
# from the Debian mirror this machine's apt already uses, and imported into podman.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "test-container.sh needs root (podman as root, debootstrap)" >&2; exit 1; }

missing=()
for pkg in podman runc debootstrap; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# This workplace: runc (crun fails on its cgroup layout), host network, and limits that
# may not be raised.
PODMAN=(podman --runtime runc)
LIMITS=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --network=host)
BASE=localhost/fedagg-debian:12

if ! "${PODMAN[@]}" image exists "$BASE"; then
  mirror=$(grep -rhoE '^(deb|URIs:)[[:space:]]+(\[[^]]*\][[:space:]]+)?https?://[^[:space:]]+' \
             /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
           grep -oE 'https?://[^[:space:]]+' | grep -E '/debian/?$' | head -n 1 || true)
  [ -n "$mirror" ] || { echo "no Debian mirror found in this machine's apt sources" >&2; exit 1; }
  rootfs=$(mktemp -d /tmp/fedagg-rootfs.XXXXXX)
  echo "making the Debian 12 base image with debootstrap from $mirror"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/tmp/fedagg-debootstrap.log 2>&1 ||
    { tail -n 20 /tmp/fedagg-debootstrap.log; exit 1; }
  tar -C "$rootfs" -c . | "${PODMAN[@]}" import - "$BASE"
  rm -rf "$rootfs"
fi

# The build context: the default build's binaries (stripped) and the CUDA libraries of
# NVIDIA's pinned wheels.
./scripts/build.sh default fedagg-server fedagg-demo fedagg_backend_cuda >/tmp/fedagg-container-build.log 2>&1 ||
  { tail -n 30 /tmp/fedagg-container-build.log; echo "the default build failed (it needs the CUDA toolkit for the plugin)" >&2; exit 1; }
CONTEXT=build/container
rm -rf "$CONTEXT/bin" "$CONTEXT/cuda"
mkdir -p "$CONTEXT/bin" "$CONTEXT/cuda" build/container-wheels
for binary in build/service/fedagg-server build/service/demo/fedagg-demo build/service/libfedagg_backend_cuda.so; do
  cp "$binary" "$CONTEXT/bin/"
  strip --strip-unneeded "$CONTEXT/bin/$(basename "$binary")"
done
pip download --quiet --no-deps -r docker/cuda-wheels.txt -d build/container-wheels
python3 - docker/cuda-wheels.txt build/container-wheels "$CONTEXT/cuda" <<'PY'
import glob, os, re, sys, zipfile
pins, wheels, out = sys.argv[1:]
for line in open(pins):
    name, _, version = line.split("#")[0].strip().partition("==")
    if not name:
        continue
    pattern = os.path.join(wheels, "%s-%s-*.whl" % (re.sub(r"[-.]", "_", name), version))
    [wheel] = glob.glob(pattern)
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if re.search(r"/lib/lib[^/]+\.so(\.\d+)*$", member):
                with open(os.path.join(out, os.path.basename(member)), "wb") as f:
                    f.write(archive.read(member))
PY
# The Debian packages of the binaries' shared libraries (CUDA's come from the wheels).
packages=$(for binary in "$CONTEXT"/bin/*; do ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'; done |
  sort -u | while read -r name path; do
    [ -f "$CONTEXT/cuda/$name" ] && continue
    package=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null) ||
      { echo "no Debian package holds $path" >&2; exit 1; }
    echo "${package%%:*}"
  done | sort -u | tr '\n' ' ')

"${PODMAN[@]}" build "${LIMITS[@]}" --format docker --build-arg BASE="$BASE" --build-arg PACKAGES="$packages" \
    -f docker/Dockerfile.cpu -t localhost/fedagg-cpu "$CONTEXT"
"${PODMAN[@]}" build "${LIMITS[@]}" --format docker --build-arg CPU_IMAGE=localhost/fedagg-cpu \
    -f docker/Dockerfile.gpu -t localhost/fedagg-gpu "$CONTEXT"
for image in fedagg-cpu fedagg-gpu; do
  echo "$image: $("${PODMAN[@]}" image inspect --format '{{.Size}}' "localhost/$image" | awk '{printf "%.0f MB", $1 / 1e6}')"
done

source tests/e2e/e2e_lib.sh  # nginx as the load balancer, ports, cleanup
CONTAINERS=()
container_cleanup() {
  local rc=$?
  [ ${#CONTAINERS[@]} -eq 0 ] || "${PODMAN[@]}" rm -f "${CONTAINERS[@]}" >/dev/null 2>&1 || true
  (exit "$rc")
  e2e_cleanup
}
trap container_cleanup EXIT

# Every library of every binary resolves inside each image.
for image in fedagg-cpu fedagg-gpu; do
  for binary in fedagg-server fedagg-demo $([ "$image" = fedagg-gpu ] && echo libfedagg_backend_cuda.so); do
    missing=$("${PODMAN[@]}" run --rm "${LIMITS[@]}" --entrypoint ldd "localhost/$image" "/usr/local/bin/$binary" | grep "not found" || true)
    [ -z "$missing" ] || { echo "$image: $binary: $missing" >&2; exit 1; }
  done
  echo "$image: every library resolves"
done

# --backend=cuda: refused with exit 2, naming what is missing.
refusal() {  # refusal IMAGE TEXT
  local rc=0 output
  output=$("${PODMAN[@]}" run --rm "${LIMITS[@]}" "localhost/$1" --listen=127.0.0.1:0 --metrics_address= \
             --backend=cuda 2>&1) || rc=$?
  [ "$rc" = 2 ] && grep -qF "$2" <<<"$output" || { echo "$1 --backend=cuda: exit $rc: $output" >&2; exit 1; }
  echo "$1 --backend=cuda: exit 2: $output"
}
refusal fedagg-cpu "no cuda backend plugin at /usr/local/bin/libfedagg_backend_cuda.so"
refusal fedagg-gpu "no usable CUDA device"

# A round through the GPU image on this GPU-less machine: a root, two intermediates, nginx.
ROOT=$E2E_BASE I1=$((E2E_BASE + 1)) I2=$((E2E_BASE + 2)) LB=$((E2E_BASE + 3))
run_server() {  # run_server NAME PORT [flags...]
  local name=fedagg-test-$1 port=$2; shift 2
  "${PODMAN[@]}" rm -f "$name" >/dev/null 2>&1 || true
  CONTAINERS+=("$name")
  "${PODMAN[@]}" run -d --name "$name" "${LIMITS[@]}" localhost/fedagg-gpu --backend=auto \
      --listen="127.0.0.1:$port" --metrics_address="127.0.0.1:$((port + 5))" --node_id="$1" "$@" >/dev/null
  e2e_wait_port "$port"
  curl -sf "http://127.0.0.1:$((port + 5))/healthz" >/dev/null
}
run_server root "$ROOT" --child_grace_ms=15000
run_server intermediate-1 "$I1" --parent="127.0.0.1:$ROOT" --forward_interval_ms=200
run_server intermediate-2 "$I2" --parent="127.0.0.1:$ROOT" --forward_interval_ms=200
root_log=$("${PODMAN[@]}" logs fedagg-test-root 2>&1)
grep "reduction backend" <<<"$root_log"
grep -q "reduction backend cpu: --backend=auto has no CUDA device to use (no NVIDIA driver" <<<"$root_log"
e2e_start_nginx "$LB" "$I1" "$I2"
"${PODMAN[@]}" exec fedagg-test-root fedagg-demo --root="127.0.0.1:$ROOT" --intermediates="127.0.0.1:$LB" --clients=50
echo "container test: OK"
