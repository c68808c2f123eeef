# Sourced by the GPU bundle's run.sh and ab.sh (scripts/gpu-bundle.sh copies it beside
# them as env.sh), with DIR set to the bundle's folder: unpacks payload.tar.gz there when
# bin/ is not there yet (a folder carried to a lent machine arrives without it), and puts
# the bundle's libraries on LD_LIBRARY_PATH, then CUDA's where CUDA installations and its
# Python wheels put them.
[ -d "$DIR/bin" ] || tar -xzf "$DIR/payload.tar.gz" -C "$DIR" ||
  { echo "$(basename "$0"): cannot unpack $DIR/payload.tar.gz" >&2; exit 1; }
bundle_library_path=$DIR/lib
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
  [ -d "$d" ] && bundle_library_path+=:$d
done
if command -v python3 >/dev/null; then
  while read -r d; do [ -n "$d" ] && bundle_library_path+=:$d; done < <(python3 - <<'PY' 2>/dev/null
import glob, os, site
for base in site.getsitepackages():
    for d in sorted(glob.glob(os.path.join(base, "nvidia", "*", "lib"))):
        print(d)
PY
)
fi
export LD_LIBRARY_PATH=$bundle_library_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
