"""fedagg: the Python client of the fedagg aggregation tier.

    import fedagg, numpy as np
    conn = fedagg.connect("127.0.0.1:50051")
    status = conn.control.create("round-1", {"w": fedagg.Field("float32", [3], "federated_mean")})
    conn.submit("alice", status, {"w": np.float32([1, 2, 3])})
    conn.control.seal("round-1"); conn.control.wait("round-1")
    print(conn.control.result("round-1")["w"].values)

Errors are FedaggError, carrying the gRPC status code (`code`, `code_name`).
"""
from .connection import Connection, connect
from .contribute_stream import ContributeStream
from .control import ControlClient
from .errors import FedaggError
from .result import FieldResult, Result
from .spec import AggregationStatus, Field, Leaf, Spec, build_spec
from .update_input import RowSparse, Sparse, prepare_update
from .value_encoding import ValueEncoding

__all__ = [
    "AggregationStatus", "Connection", "ContributeStream", "ControlClient", "FedaggError", "Field",
    "FieldResult", "Leaf", "Result", "RowSparse", "Sparse", "Spec", "build_spec", "connect",
    "ValueEncoding", "prepare_update",
]
