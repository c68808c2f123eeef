"""fedagg: the Python client of the fedagg aggregation tier.

    import fedagg, numpy as np
    conn = fedagg.connect("127.0.0.1:50051")
    status = conn.control.create("round-1", {"w": fedagg.Field("float32", [3], "federated_mean")})
    conn.submit("alice", status, {"w": np.float32([1, 2, 3])})
    conn.control.seal("round-1"); conn.control.wait("round-1")
    print(conn.control.result("round-1")["w"].values)

Errors are FedaggError, carrying the gRPC status code (`code`, `code_name`).

Secure aggregation (an aggregation created with secure=fedagg.SecureAggregation(...)):
each client calls fedagg.contribute_securely(conn, status, client_id, update), which masks
its discretized update so that only the root sees the sum (fedagg.secure_aggregation).

Privacy accounting of DP rounds (PrivacyAccountant, Sampling, calibrate_noise_multiplier)
lives in fedagg.privacy_accounting and needs the optional dp-accounting package
(`pip install fedagg[privacy]`) only when called.
"""
from .connection import Connection, connect
from .contribute_stream import ContributeStream
from .differential_privacy import AdaptiveClipping, DifferentialPrivacy, PrivacyReport
from .control import ControlClient
from .errors import FedaggError
from .result import FieldResult, Result
from .secure_aggregation import contribute_securely
from .spec import AggregationStatus, Field, Leaf, SecureAggregation, Spec, build_spec
from .update_input import RowSparse, Sparse, prepare_update
from .value_encoding import ValueEncoding

__all__ = [
    "AdaptiveClipping", "DifferentialPrivacy", "PrivacyReport", "AggregationStatus", "Connection", "ContributeStream", "ControlClient", "FedaggError", "Field",
    "FieldResult", "Leaf", "Result", "RowSparse", "SecureAggregation", "Sparse", "Spec", "build_spec", "connect",
    "contribute_securely",
    "ValueEncoding", "prepare_update", "PrivacyAccountant", "Sampling", "calibrate_noise_multiplier",
]

_PRIVACY_ACCOUNTING = ("PrivacyAccountant", "Sampling", "calibrate_noise_multiplier")


def __getattr__(name):
    # fedagg.privacy_accounting's names, imported on first use: importing that module eagerly
    # here would load it before `python -m fedagg.privacy_accounting` runs it as __main__
    # (runpy warns, and two copies of its classes would exist). It imports dp-accounting
    # only when called, so neither way does `import fedagg` need dp-accounting.
    if name in _PRIVACY_ACCOUNTING:
        from . import privacy_accounting
        return getattr(privacy_accounting, name)
    raise AttributeError(f"module 'fedagg' has no attribute {name!r}")
