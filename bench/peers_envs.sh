# The two virtual environments of the peer comparisons (bench/peers_bench.sh,
# bench/peers_service_bench.sh), made under BUILD/peers once:
#   - venv-peers: Flower (flwr) and NVIDIA FLARE (nvflare) from PyPI, pinned below. Needs the
#     package index; never part of the tests or CI.
#   - venv-fedagg: the fedagg Python package (client_stub/python) over Debian's
#     python3-grpcio and numpy, as the Python client tests install it (no network).
# Sourced with BUILD and REPO set; sets PEER_PYTHON and FEDAGG_PYTHON.
PEERS=$BUILD/peers
FLWR_VERSION=1.41.0
NVFLARE_VERSION=2.9.0

if ! "$PEERS/venv-peers/bin/python" -c "import flwr, nvflare" 2>/dev/null; then
  rm -rf "$PEERS/venv-peers"
  python3 -m venv "$PEERS/venv-peers"
  "$PEERS/venv-peers/bin/pip" install --quiet "flwr==$FLWR_VERSION" "nvflare==$NVFLARE_VERSION"
fi
[ -x "$PEERS/venv-fedagg/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$PEERS/venv-fedagg"
# The package of this tree, every run: an environment made by an earlier run holds an older one.
"$PEERS/venv-fedagg/bin/pip" install --quiet --no-index --no-deps --no-build-isolation --force-reinstall \
    "$REPO/client_stub/python"
PEER_PYTHON=$PEERS/venv-peers/bin/python
FEDAGG_PYTHON=$PEERS/venv-fedagg/bin/python
"$PEER_PYTHON" -c "import flwr, nvflare, sys; print('peers: flwr', flwr.__version__, '/ nvflare', nvflare.__version__, '/ python', sys.version.split()[0])"
