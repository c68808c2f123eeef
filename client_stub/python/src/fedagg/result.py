"""The result of a FINALIZED aggregation as NumPy arrays, reassembled from the chunks of
Control.GetResult (docs/PROTOCOL.md, section 5).

Per field: dense intrinsics and the dense-result sparse family give `values` in the
declared shape; sparse_sum_sparse gives sorted unique linear `indices` and one value each
(`to_dense()` and `to_scipy()` turn them into a full array or a SciPy COO matrix). `counts`
(int64) are there when the spec asked for them: per coordinate in the field's shape
(sparse family), per row (row-sparse), or per entry of `indices` (sparse_sum_sparse).
"""
from dataclasses import dataclass
from typing import Dict, Iterable, Optional, Tuple

import grpc
import numpy as np

from .errors import FedaggError
from .spec import DTYPES, ROW_SPARSE, AggregationStatus, Leaf, decode_array, dtype_name, intrinsic_name
from .v1 import control_pb2


@dataclass
class FieldResult:
    path: str
    intrinsic: str
    shape: Tuple[int, ...]              # the field's declared shape
    values: np.ndarray
    indices: Optional[np.ndarray] = None  # sparse_sum_sparse only
    counts: Optional[np.ndarray] = None

    @property
    def is_sparse(self) -> bool:
        return self.indices is not None

    def to_dense(self) -> np.ndarray:
        """The values in the declared shape (zeros where a sparse result has no entry)."""
        if not self.is_sparse:
            return self.values
        dense = np.zeros(int(np.prod(self.shape, dtype=np.int64)), self.values.dtype)
        dense[self.indices] = self.values
        return dense.reshape(self.shape)

    def to_scipy(self):
        """A sparse result as a scipy.sparse COO matrix: (1, N) for a field of rank other
        than 2, the field's own shape for a 2-D field."""
        import scipy.sparse
        shape = self.shape if len(self.shape) == 2 else (1, int(np.prod(self.shape, dtype=np.int64)))
        rows, cols = np.divmod(self.indices, shape[1]) if shape[1] else (self.indices, self.indices)
        return scipy.sparse.coo_matrix((self.values, (rows, cols)), shape=shape)


@dataclass
class Result:
    status: AggregationStatus
    fields: Dict[str, FieldResult]

    @property
    def contributions(self) -> int:
        return self.status.contributions

    @property
    def weight_sum(self) -> float:
        return self.status.weight_sum

    def __getitem__(self, path: str) -> FieldResult:
        return self.fields[path]


def _data_loss(message: str) -> FedaggError:
    return FedaggError(grpc.StatusCode.DATA_LOSS, f"result stream: {message}")


def read_result(chunks: Iterable[control_pb2.ResultChunk]) -> Result:
    chunks = iter(chunks)
    first = next(chunks, None)
    if first is None:
        raise _data_loss("empty")
    status = AggregationStatus.from_proto(first.status)
    leaves: Dict[str, Leaf] = {leaf.path: leaf for leaf in status.spec.leaves}
    headers = list(first.fields)
    parts: Dict[Tuple[int, int], bytearray] = {}
    for chunk in chunks:
        if chunk.field >= len(headers):
            raise _data_loss(f"a chunk names field {chunk.field}; the result has {len(headers)}")
        buffer = parts.setdefault((chunk.field, chunk.part), bytearray())
        if chunk.offset != len(buffer):
            raise _data_loss(f"field {chunk.field} part {chunk.part} out of order")
        buffer += chunk.data
    fields: Dict[str, FieldResult] = {}
    for number, header in enumerate(headers):
        leaf = leaves.get(header.path)
        if leaf is None:
            raise _data_loss(f"field '{header.path}' is not in the aggregation's type")
        dtype = dtype_name(header.value.dtype)
        shape = tuple(header.value.shape)

        def part(which: int, item_size: int, count: int, field: int = number, path: str = header.path) -> bytes:
            data = bytes(parts.get((field, which), b""))
            if len(data) != item_size * count:
                raise _data_loss(f"field '{path}': {len(data)} bytes of part {which}, expected {item_size * count}")
            return data

        values = decode_array(dtype, part(control_pb2.ResultChunk.VALUES, DTYPES[dtype][1].itemsize,
                                          int(np.prod(shape, dtype=np.int64))), shape)
        intrinsic = intrinsic_name(header.intrinsic)
        indices = None
        if intrinsic == "sparse_sum_sparse":
            indices = decode_array("int64", part(control_pb2.ResultChunk.INDICES, 8, header.nnz),
                                   (header.nnz,))
        counts = None
        if header.has_counts:
            if indices is not None:
                count_shape = (header.nnz,)
            else:
                count_shape = leaf.shape[:1] if leaf.encoding == ROW_SPARSE else leaf.shape
            counts = decode_array("int64", part(control_pb2.ResultChunk.COUNTS, 8,
                                                int(np.prod(count_shape, dtype=np.int64))), count_shape)
        fields[header.path] = FieldResult(header.path, intrinsic, leaf.shape, values, indices, counts)
    return Result(status, fields)
