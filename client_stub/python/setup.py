"""Builds the fedagg Python package, generating the gRPC stubs on the way.

The messages and stubs of fedagg.v1 are generated from the repository's
proto/fedagg/v1/*.proto into the built package (fedagg/v1/*_pb2*.py); they are never
checked in. protoc must understand proto3 `optional` (protoc >= 3.15). The generator is,
in this order: FEDAGG_PROTOC / FEDAGG_GRPC_PYTHON_PLUGIN from the environment, the system
`protoc` with `grpc_python_plugin` (Debian: protobuf-compiler, protobuf-compiler-grpc),
or the grpc_tools module (grpcio-tools from PyPI; Debian's python3-grpc-tools is too old).
FEDAGG_PROTO_DIR overrides where the .proto files are found (default: ../../proto).
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PROTO_DIR = Path(os.environ.get("FEDAGG_PROTO_DIR", HERE.parent.parent / "proto"))


def protoc_command():
    protoc = os.environ.get("FEDAGG_PROTOC") or shutil.which("protoc")
    plugin = os.environ.get("FEDAGG_GRPC_PYTHON_PLUGIN") or shutil.which("grpc_python_plugin")
    if protoc and plugin:
        return [protoc, f"--plugin=protoc-gen-grpc_python={plugin}"]
    try:
        import grpc_tools  # noqa: F401  (grpcio-tools bundles protoc and the plugin)
    except ImportError:
        sys.exit("fedagg: cannot generate the gRPC stubs: install protoc and grpc_python_plugin "
                 "(Debian: protobuf-compiler protobuf-compiler-grpc) or grpcio-tools")
    return [sys.executable, "-m", "grpc_tools.protoc"]


def generate_stubs(out_dir: Path):
    protos = sorted((PROTO_DIR / "fedagg" / "v1").glob("*.proto"))
    if not protos:
        sys.exit(f"fedagg: no .proto files under {PROTO_DIR}/fedagg/v1 (set FEDAGG_PROTO_DIR)")
    command = protoc_command() + [
        f"--proto_path={PROTO_DIR}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
        *[str(p.relative_to(PROTO_DIR)) for p in protos]]
    result = subprocess.run(command, cwd=PROTO_DIR, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"fedagg: generating the gRPC stubs failed ({' '.join(command)}):\n{result.stderr}")
    (out_dir / "fedagg" / "v1" / "__init__.py").write_text(
        '"""fedagg.v1 messages and gRPC stubs, generated from proto/fedagg/v1 at build time."""\n')


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        generate_stubs(Path(self.build_lib).resolve())


setup(package_dir={"": "src"}, packages=["fedagg", "fedagg.flower", "fedagg.flare"], cmdclass={"build_py": BuildPyWithStubs})
