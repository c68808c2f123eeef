#!/usr/bin/env bash
# Builds the CPU image of fedagg-server with podman, runs it, and drives one aggregation
# through it with fedagg-demo (inside the image) — a root with simulated clients, the
# result checked against the reference. Needs root. Not part of CI (it downloads a Debian
# base system and builds fedagg inside the image: minutes), but must pass on a fresh machine.
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

"${PODMAN[@]}" build "${LIMITS[@]}" --build-arg BASE="$BASE" -f docker/Dockerfile.cpu -t localhost/fedagg-cpu .

PORT=${FEDAGG_CONTAINER_PORT:-50651}
name=fedagg-container-test
"${PODMAN[@]}" rm -f "$name" >/dev/null 2>&1 || true
trap '"${PODMAN[@]}" rm -f "$name" >/dev/null 2>&1 || true' EXIT
"${PODMAN[@]}" run -d --name "$name" "${LIMITS[@]}" localhost/fedagg-cpu \
    --listen="127.0.0.1:$PORT" --metrics_address="127.0.0.1:$((PORT + 1000))" >/dev/null
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$((PORT + 1000))/healthz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$((PORT + 1000))/readyz"
"${PODMAN[@]}" exec "$name" fedagg-demo --root="127.0.0.1:$PORT" --intermediates="127.0.0.1:$PORT" --clients=50
echo "container test: OK"
