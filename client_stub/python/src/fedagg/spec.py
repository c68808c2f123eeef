"""Aggregation specs in Python: describing a value type with its intrinsics, and reading
a fedagg.v1.AggregationSpec back as leaf fields the client validates updates against.

A value type is described with Field (or a (dtype, shape, intrinsic) tuple) for one
tensor, a dict of them for a struct of named fields (dicts nest), or a list for unnamed
fields. Leaf fields are numbered depth-first and named by their dotted path ("encoder.w",
"[1]" for an unnamed field at position 1, "value" when the type is a single tensor), as
everywhere in fedagg (docs/PROTOCOL.md). A field of a floating dtype whose intrinsic is
linear (every one but federated_max and federated_min; a sparse field's values, not its
indices) may declare a value encoding (fedagg.value_encoding: "quantized:8",
"discretized:16@0.001"), in which its updates travel. An aggregation may declare
differential privacy (fedagg.DifferentialPrivacy) or secure aggregation (SecureAggregation:
clients mask their discretized updates, fedagg.secure_aggregation).
"""
import time
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from .differential_privacy import DifferentialPrivacy, PrivacyReport
from .errors import FedaggError, invalid_argument
from .v1 import types_pb2
from .value_encoding import DISCRETIZED, PLAIN_ENCODING, QUANTIZED, ValueEncoding

# dtype name -> (fedagg.v1.DType number, the NumPy dtype of its little-endian wire bytes).
# NumPy has no bfloat16: bfloat16 travels as its raw 16 bits.
DTYPES = {
    "float32": (types_pb2.DTYPE_FLOAT32, np.dtype("<f4")),
    "float64": (types_pb2.DTYPE_FLOAT64, np.dtype("<f8")),
    "int32": (types_pb2.DTYPE_INT32, np.dtype("<i4")),
    "int64": (types_pb2.DTYPE_INT64, np.dtype("<i8")),
    "float16": (types_pb2.DTYPE_FLOAT16, np.dtype("<f2")),
    "bfloat16": (types_pb2.DTYPE_BFLOAT16, np.dtype("<u2")),
}
_DTYPE_NAMES = {number: name for name, (number, _) in DTYPES.items()}

DENSE, SPARSE, ROW_SPARSE = "dense", "sparse", "row_sparse"
# intrinsic name -> (its wire encoding, whether the update's weight multiplies its values)
INTRINSICS = {
    "federated_sum": (DENSE, False),
    "federated_mean": (DENSE, False),
    "federated_weighted_mean": (DENSE, True),
    "federated_max": (DENSE, False),
    "federated_min": (DENSE, False),
    "sparse_sum": (SPARSE, False),
    "sparse_sum_sparse": (SPARSE, False),
    "sparse_mean": (SPARSE, False),
    "sparse_weighted_mean": (SPARSE, True),
    "row_sparse_sum": (ROW_SPARSE, False),
    "row_sparse_mean": (ROW_SPARSE, False),
}

FLOATING_DTYPES = ("float32", "float64", "float16", "bfloat16")
# The intrinsics whose fields may declare a value encoding: the linear ones, dense and
# sparse (discretized: not the weighted means).
ENCODABLE_INTRINSICS = tuple(name for name in INTRINSICS if name not in ("federated_max", "federated_min"))
WEIGHTED_INTRINSICS = tuple(name for name, (_, weighted) in INTRINSICS.items() if weighted)

STATE_NAMES = {number: name for name, number in types_pb2.AggregationState.items()}


@dataclass(frozen=True)
class SecureAggregation:
    """Secure aggregation as an aggregation declares it (docs/SEMANTICS.md 13): every field a
    dense federated_sum or federated_mean of discretized values of one bit width, summed
    modulo 2^bits; clients run fedagg.contribute_securely. 0 takes the server's default:
    min_cohort 3 and max_cohort 1000 clients of one node, degree (neighbours of each
    client, even) 64, threshold half the neighbours plus one (give it with its degree),
    stage_timeout_ms 30000. Or, with adversarial_rate (the fraction of a cohort's clients
    that may collude with the relays and the root) and/or dropout_rate (the fraction that
    may drop out), each in [0, 1), the server derives every cohort's degree and threshold
    for security 2^-40 and failure 2^-20 (leave degree and threshold 0). root_public_key is
    set by the root when it creates the aggregation (a value sent is replaced): read it
    from the spec the server returns."""
    min_cohort: int = 0
    max_cohort: int = 0
    degree: int = 0
    threshold: int = 0
    stage_timeout_ms: int = 0
    root_public_key: bytes = b""
    adversarial_rate: Optional[float] = None
    dropout_rate: Optional[float] = None

    def to_proto(self) -> types_pb2.SecureAggregation:
        proto = types_pb2.SecureAggregation(min_cohort=self.min_cohort, max_cohort=self.max_cohort,
                                            degree=self.degree, threshold=self.threshold,
                                            stage_timeout_ms=self.stage_timeout_ms,
                                            root_public_key=self.root_public_key)
        if self.adversarial_rate is not None:
            proto.adversarial_rate = self.adversarial_rate
        if self.dropout_rate is not None:
            proto.dropout_rate = self.dropout_rate
        return proto

    @classmethod
    def from_proto(cls, proto: types_pb2.SecureAggregation) -> "SecureAggregation":
        return cls(proto.min_cohort, proto.max_cohort, proto.degree, proto.threshold, proto.stage_timeout_ms,
                   bytes(proto.root_public_key),
                   proto.adversarial_rate if proto.HasField("adversarial_rate") else None,
                   proto.dropout_rate if proto.HasField("dropout_rate") else None)


def dtype_name(number: int) -> str:
    if number not in _DTYPE_NAMES:
        raise invalid_argument(f"dtype {number} is not a known fedagg dtype")
    return _DTYPE_NAMES[number]


def intrinsic_name(number: int) -> str:
    return types_pb2.Intrinsic.Name(number).lower()


@dataclass(frozen=True)
class Field:
    """One tensor field of a value type and how it is reduced. `encoding`: how its
    values travel, a ValueEncoding or its spelling ("plain", "quantized:8",
    "quantized:4/512", "discretized:16@0.001"; see fedagg.value_encoding). `clip_norm`:
    with differential privacy, this field's own L2 bound, applied before the whole
    update's (0: none; ignored without privacy)."""
    dtype: str
    shape: Sequence[int] = ()
    intrinsic: str = "federated_sum"
    report_counts: bool = False
    encoding: Union[str, ValueEncoding, None] = "plain"
    clip_norm: float = 0.0


@dataclass(frozen=True)
class Leaf:
    """One leaf field of an aggregation's value type, as the server declared it."""
    path: str
    dtype: str
    shape: Tuple[int, ...]
    intrinsic: str
    report_counts: bool
    value_encoding: ValueEncoding = PLAIN_ENCODING  # how its values travel

    @property
    def encoding(self) -> str:
        """dense, sparse or row_sparse: the form the intrinsic takes (not value_encoding)."""
        return INTRINSICS[self.intrinsic][0]

    @property
    def weighted(self) -> bool:
        return INTRINSICS[self.intrinsic][1]

    @property
    def num_elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def type_string(self) -> str:
        return self.dtype + (f"[{','.join(map(str, self.shape))}]" if self.shape else "")

    def describe(self) -> str:
        """The prefix of every message about this field, as the server words it."""
        return f"field '{self.path}' ({self.type_string}, {self.intrinsic})"


def _field_of(description: Any) -> Optional[Field]:
    if isinstance(description, Field):
        return description
    if isinstance(description, tuple) and 2 <= len(description) <= 5 and isinstance(description[0], str):
        return Field(*description)
    return None


def _checked_encoding(field: Field, path: str, deterministic: bool) -> ValueEncoding:
    """The field's value encoding, refused (as the server would, in its words) on a field
    or aggregation that cannot take it."""
    try:
        encoding = ValueEncoding.of(field.encoding)
    except FedaggError as error:
        raise invalid_argument(f"field '{path}': {error.message}") from None
    if not encoding.encoded:
        return encoding
    type_string = field.dtype + (f"[{','.join(str(int(d)) for d in field.shape)}]" if len(field.shape) else "")
    prefix = f"field '{path}' ({type_string}, {field.intrinsic}) declares encoding {encoding}: "
    if field.dtype not in FLOATING_DTYPES:
        raise invalid_argument(prefix + "only floating-point fields are encoded; integer values are sent and "
                               "summed exactly as they are")
    if field.intrinsic not in ENCODABLE_INTRINSICS:
        raise invalid_argument(prefix + "encoded values are exact only in expectation (stochastic rounding), "
                               "which a sum or mean keeps but a maximum or minimum does not; send this "
                               "field plain")
    if encoding.kind == DISCRETIZED and field.intrinsic in WEIGHTED_INTRINSICS:
        raise invalid_argument(prefix + "a discretized field is summed exactly as integers, which a weight would "
                               "break; multiply the values by the weight before discretizing and use "
                               "federated_sum, or use a quantized encoding")
    if encoding.kind == QUANTIZED and deterministic:
        raise invalid_argument(prefix + "a deterministic aggregation sums exactly, and quantized values are "
                               "decoded in floating point; use a discretized encoding, whose integers sum exactly")
    return encoding


def _value_type_proto(description: Any, path: str, intrinsics: List[types_pb2.FieldIntrinsic],
                      deterministic: bool = False):
    """Fills a ValueType from a description, appending each leaf's intrinsic in order."""
    value_type = types_pb2.ValueType()
    field = _field_of(description)
    if field is not None:
        if field.dtype not in DTYPES:
            raise invalid_argument(f"field '{path or 'value'}': dtype '{field.dtype}' is not one of "
                                   f"{', '.join(DTYPES)}")
        if field.intrinsic not in INTRINSICS:
            raise invalid_argument(f"field '{path or 'value'}': intrinsic '{field.intrinsic}' is not one of "
                                   f"{', '.join(INTRINSICS)}")
        encoding = _checked_encoding(field, path or "value", deterministic)
        value_type.tensor.dtype = DTYPES[field.dtype][0]
        value_type.tensor.shape.extend(int(d) for d in field.shape)
        intrinsic = types_pb2.FieldIntrinsic(intrinsic=types_pb2.Intrinsic.Value(field.intrinsic.upper()),
                                             report_counts=field.report_counts, clip_norm=field.clip_norm)
        if encoding.encoded:  # a plain field's intrinsic stays as clients before encodings wrote it
            intrinsic.encoding.CopyFrom(encoding.to_proto())
        intrinsics.append(intrinsic)
        return value_type
    if isinstance(description, dict):
        items = list(description.items())
    elif isinstance(description, list):
        items = [("", item) for item in description]
    else:
        raise invalid_argument(f"'{path or 'value'}': describe a field with fedagg.Field(dtype, shape, "
                               f"intrinsic), a struct with a dict or a list; got {type(description).__name__}")
    value_type.struct_type.SetInParent()
    for i, (name, item) in enumerate(items):
        child_path = (f"{path}.{name}" if path else name) if name else f"{path}[{i}]"
        value_type.struct_type.fields.add(name=name, type=_value_type_proto(item, child_path, intrinsics,
                                                                            deterministic))
    return value_type


def build_spec(aggregation_id: str, value_type: Any, *, min_contributions: int = 1,
               max_contributions: int = 0, deadline_s: Optional[float] = None,
               require_finite: bool = False, float64_accumulation: bool = False,
               deterministic: bool = False,
               broadcast: Sequence[np.ndarray] = (),
               privacy: Optional[DifferentialPrivacy] = None,
               secure: Optional[SecureAggregation] = None) -> types_pb2.AggregationSpec:
    """A fedagg.v1.AggregationSpec from a Python description (see the module comment).
    `deadline_s`: seconds from now; `broadcast`: NumPy arrays pushed to clients on join;
    `deterministic`: floating-point fields summed exactly, so results are the same to the
    bit for any order of updates and any tree of aggregators (needs finite values; takes
    discretized fields, not quantized ones); `privacy`: differential privacy
    (fedagg.DifferentialPrivacy: clipped updates, noise once at the root); `secure`: secure
    aggregation (fedagg.SecureAggregation: masked discretized updates, unmasked at the root;
    clients contribute with fedagg.contribute_securely)."""
    intrinsics: List[types_pb2.FieldIntrinsic] = []
    proto = types_pb2.AggregationSpec(
        aggregation_id=aggregation_id,
        value_type=_value_type_proto(value_type, "", intrinsics, deterministic),
        min_contributions=min_contributions, max_contributions=max_contributions,
        deadline_unix_ms=0 if deadline_s is None else int((time.time() + deadline_s) * 1000),
        require_finite=require_finite, float64_accumulation=float64_accumulation,
        deterministic=deterministic)
    proto.intrinsics.extend(intrinsics)
    if privacy is not None:
        proto.privacy.CopyFrom(privacy.to_proto())
    if secure is not None:
        proto.secure.CopyFrom(secure.to_proto())
    for array in broadcast:
        array = np.asarray(array)
        name = array.dtype.name
        if name not in DTYPES:
            raise invalid_argument(f"broadcast tensor of dtype {name}: use one of {', '.join(DTYPES)}")
        proto.broadcast.add(dtype=DTYPES[name][0], shape=array.shape,
                            data=np.ascontiguousarray(array, DTYPES[name][1]).tobytes())
    return proto


def _leaves(value_type: types_pb2.ValueType, path: str, out: List[Tuple[str, types_pb2.TensorType]]):
    if value_type.WhichOneof("kind") == "tensor":
        out.append((path or "value", value_type.tensor))
        return
    for i, field in enumerate(value_type.struct_type.fields):
        child = (f"{path}.{field.name}" if path else field.name) if field.name else f"{path}[{i}]"
        _leaves(field.type, child, out)


class Spec:
    """An aggregation's spec as the server holds it (from create, get, get_tasks or a
    stream's welcome): its id, leaf fields, quorum and options. `proto` is the message."""

    def __init__(self, proto: types_pb2.AggregationSpec):
        self.proto = proto
        self.aggregation_id = proto.aggregation_id
        tensors: List[Tuple[str, types_pb2.TensorType]] = []
        _leaves(proto.value_type, "", tensors)
        self.leaves = [
            Leaf(path, dtype_name(tensor.dtype), tuple(tensor.shape),
                 intrinsic_name(choice.intrinsic), choice.report_counts,
                 ValueEncoding.from_proto(choice.encoding))
            for (path, tensor), choice in zip(tensors, proto.intrinsics)]
        self.require_finite = proto.require_finite
        self.float64_accumulation = proto.float64_accumulation
        self.deterministic = proto.deterministic
        self.min_contributions = proto.min_contributions
        self.max_contributions = proto.max_contributions
        # Secure aggregation as declared (with the root's key), or None.
        self.secure: Optional[SecureAggregation] = (
            SecureAggregation.from_proto(proto.secure) if proto.HasField("secure") else None)

    @property
    def weighted(self) -> bool:
        return any(leaf.weighted for leaf in self.leaves)

    @property
    def float32_weighted(self) -> bool:
        """A weighted field accumulated in float32 (the weight range is then limited)."""
        return not self.float64_accumulation and any(
            leaf.weighted and leaf.dtype in ("float32", "float16", "bfloat16") for leaf in self.leaves)

    def requires_finite(self, leaf: Leaf) -> bool:
        """Whether the server refuses NaN and Inf in `leaf`: when the aggregation asks, and
        in a deterministic aggregation's summed fields (an exact sum holds finite numbers)."""
        return self.require_finite or (
            self.deterministic and leaf.intrinsic not in ("federated_max", "federated_min"))

    def broadcast(self) -> List[np.ndarray]:
        """The broadcast tensors (federated_broadcast) as NumPy arrays."""
        return [decode_array(dtype_name(t.dtype), t.data, tuple(t.shape)) for t in self.proto.broadcast]

    def __repr__(self) -> str:
        fields = ", ".join(f"{leaf.path}: {leaf.type_string} {leaf.intrinsic}" +
                           (f" {leaf.value_encoding}" if leaf.value_encoding.encoded else "") for leaf in self.leaves)
        return f"Spec({self.aggregation_id!r}, {{{fields}}})"


def decode_array(dtype: str, data: bytes, shape: Tuple[int, ...]) -> np.ndarray:
    """Little-endian wire bytes as a NumPy array of `shape` (bfloat16 widened to float32)."""
    array = np.frombuffer(data, DTYPES[dtype][1])
    if dtype == "bfloat16":
        array = (array.astype(np.uint32) << 16).view(np.float32)
    return array.reshape(shape)


@dataclass(frozen=True)
class AggregationStatus:
    """Where an aggregation stands: state is "OPEN", "SEALED", "FINALIZED", "FAILED" or
    "CANCELLED"; detail says why it FAILED or was CANCELLED."""
    aggregation_id: str
    state: str
    contributions: int
    weight_sum: float
    detail: str
    children: int
    spec: Spec
    privacy: Optional[PrivacyReport] = None  # a FINALIZED aggregation with differential privacy

    FINAL_STATES = ("FINALIZED", "FAILED", "CANCELLED")

    @classmethod
    def from_proto(cls, proto: types_pb2.AggregationStatus) -> "AggregationStatus":
        return cls(proto.spec.aggregation_id, STATE_NAMES.get(proto.state, "UNSPECIFIED"),
                   proto.contributions, proto.weight_sum, proto.detail, proto.children,
                   Spec(proto.spec), PrivacyReport.from_status(proto))

    @property
    def final(self) -> bool:
        return self.state in self.FINAL_STATES
