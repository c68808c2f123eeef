"""ModelLayout: a model's named arrays as a fedagg value type, for the framework adapters
(fedagg.flower, fedagg.flare) and anyone averaging models the way FedAvg does.

A layout is derived from the model's arrays (an ordered mapping name -> array): one field
per array, in the model's order, under the struct field `model`, plus a scalar
`num_examples` (float64, federated_sum) that adds up the clients' weights. Each array's
field keeps its shape and, for float arrays, its dtype (float16, float32, float64), so a
client's arrays go to fedagg without a lossy cast; integer and boolean arrays become
float64 fields, which is what FedAvg's arithmetic turns them into. Field names are the
array names made identifiers ("fc.weight" -> "fc_weight", made unique).

How each array is averaged (result = sum_i w_i x_i / sum_i w_i, FedAvg's weighted mean):
  - dense (the default): federated_weighted_mean, each update weighted by its client's
    number of examples;
  - sparse / row_sparse (named by the caller, e.g. an embedding table): the client sends
    w_i * (x_i - g), g the global value it trained from, as sparse_sum (COO entries) or
    row_sparse_sum (the rows it changed); the result is g + sum / sum_i w_i. Rows a client
    did not touch cost nothing on the wire, and the result is FedAvg's.

Value encoding (`encoding=`, default plain): the dense arrays of a floating dtype (the
federated_weighted_mean fields that are float arrays in the model) may declare a quantized
encoding ("quantized:8", "quantized:4/512"; fedagg.value_encoding): clients then send b
bits a coordinate plus a float32 scale per block, stochastically rounded, so each decoded
coordinate is within one level 2 s / (2^b - 1) of the client's value (s: the largest |value|
of its block) and equal to it in expectation; the weighted mean's error is at most the
weighted mean of those levels (docs/SEMANTICS.md section 11). Arrays that are integer or
boolean in the model and num_examples stay plain (fedagg takes no encoding on integer
values); so do sparse and row-sparse arrays: fedagg would take an encoding on their values,
but each COO entry's 8-byte index dominates what it costs (8 bits a value saves a quarter
of a float32 entry), and the layout keeps its sparse deltas exact. A discretized encoding is refused: every
encodable field here is a weighted mean, and a discretized field is summed as exact
integers, which the weight would break.

Differential privacy (`private=True`, DP-FedAvg; docs/SEMANTICS.md section 12): every client
counts once, so each array's field is the unweighted mean of the clients' changes from the
global arrays (federated_mean, sparse_mean or row_sparse_mean of x_i - g), with no
num_examples field; fedagg clips each client's whole change to the spec's clip norm and the
root noises the sum and divides it by the expected clients; the new model is g + the
result. Arrays travel plain (a quantized change is within a level of the client's, which
DP-FedAvg's noise dwarfs, but the layout keeps its changes exact).

Secure aggregation (`secure=SecureDiscretization(bits, clip_range, max_weight,
max_clients)`; docs/SEMANTICS.md section 13, docs/FRAMEWORKS.md): the nodes add masked
integers, so there is no weighted mean; the weight goes into the values, as SecAgg+ does it
for FedAvg. Each client clips its arrays to [-clip_range, clip_range], multiplies them by
its weight ratio r = n' / max_weight (n' its num_examples, at most max_weight, rounded to
the weight field's step) and sends them as federated_sum fields discretized to `bits` bits,
and n' as a discretized federated_sum `num_examples`; the new model is
max_weight * (sum of r x) / (sum of n'), the weighted mean of the clipped arrays. The step
of the values (clip_range / L) and of the weights (a power of two at most 1) are chosen so
that the sums of max_clients clients cannot leave the signed b-bit range the root reads
them in (SecureDiscretization says how, and what error that leaves). Every array is dense
and floating (sparse and integer arrays are refused); fields are float64 before encoding,
so no cast loses a value on the client, and results come back in the arrays' dtypes.
"""
import math
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .errors import invalid_argument
from .result import Result
from .spec import Field, Leaf, Spec, build_spec
from .update_input import in_declared_dtype
from .value_encoding import DISCRETIZED, PLAIN_ENCODING, QUANTIZED, ValueEncoding

MODEL, NUM_EXAMPLES = "model", "num_examples"
DENSE, SPARSE, ROW_SPARSE = "dense", "sparse", "row_sparse"
_INTRINSIC = {DENSE: "federated_weighted_mean", SPARSE: "sparse_sum", ROW_SPARSE: "row_sparse_sum"}
_KIND_OF_INTRINSIC = {intrinsic: kind for kind, intrinsic in _INTRINSIC.items()}
# Differential privacy: the unweighted means of the clients' changes.
_PRIVATE_INTRINSIC = {DENSE: "federated_mean", SPARSE: "sparse_mean", ROW_SPARSE: "row_sparse_mean"}
_KIND_OF_PRIVATE_INTRINSIC = {intrinsic: kind for kind, intrinsic in _PRIVATE_INTRINSIC.items()}
_FLOAT_DTYPES = ("float16", "float32", "float64")


@dataclass(frozen=True)
class ArrayField:
    """One array of the model: its name in the framework, its fedagg field, how it is
    averaged, the dtype results are handed back in, and how its values travel."""
    key: str
    name: str
    dtype: str
    shape: Tuple[int, ...]
    kind: str
    result_dtype: str
    encoding: ValueEncoding = PLAIN_ENCODING


@dataclass(frozen=True)
class SecureDiscretization:
    """How a secure layout discretizes the clients' weighted arrays (see the module
    comment): `bits` (8, 16 or 32: the modulus 2^bits of the masked sums), `clip_range`
    (each value clipped to [-clip_range, clip_range]), `max_weight` (a client's
    num_examples above it counts as max_weight) and `max_clients` (the most clients one
    sum may hold: the aggregation's max_contributions). Made with parameters that could
    overflow the sums, it raises ValueError saying what to change.

    The root reads each summed field as a signed `bits`-bit integer, so every sum of at
    most max_clients clients must lie in [-(2^(bits-1) - 1), 2^(bits-1) - 1] = [-T, T]:
      - values: a client's weighted, clipped value v = r x~ lies in [-clip_range,
        clip_range] (r <= 1), and stochastic rounding to steps of c = clip_range / L,
        L = floor(T / max_clients) - 1, gives an integer within L + 1 of zero, so
        max_clients of them sum to at most max_clients (L + 1) <= T. L >= 1 is required.
      - weights: n' is a multiple of the weight step s = 2^-k (k >= 0 the largest with
        max_clients * floor(max_weight / s) <= T; num_examples rounded to the nearest
        multiple, at most floor(max_weight / s) steps), so integer num_examples are sent
        exactly; max_clients * floor(max_weight) <= T is required.

    The error this leaves (value_error_bound): each client's discretized v is within one
    step c of v, so the summed values are within n c of their exact sum (n: the clients
    counted) and the new model is within n c max_weight / (sum of n') of the weighted
    mean sum n' x~ / sum n' of the clipped arrays, coordinate by coordinate, before it is
    rounded to the arrays' dtype. With every client at max_weight that is c; clients with
    fewer examples carry fewer of the bits, so choose max_weight near the largest
    num_examples a client has.
    """
    bits: int = 32
    clip_range: float = 8.0
    max_weight: float = 1000.0
    max_clients: int = 100

    def __post_init__(self):
        if not isinstance(self.bits, (int, np.integer)) or int(self.bits) not in (8, 16, 32):
            raise ValueError(f"secure_bits must be 8, 16 or 32 (the widths of a discretized encoding), not "
                             f"{self.bits!r}")
        for name in ("clip_range", "max_weight"):
            value = getattr(self, name)
            if not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(value) \
                    or value <= 0:
                raise ValueError(f"{name} must be finite and > 0, not {value!r}")
        if not isinstance(self.max_clients, (int, np.integer)) or self.max_clients < 1:
            raise ValueError(f"max_clients (the most clients one round's sum holds) must be an integer >= 1, not "
                             f"{self.max_clients!r}")
        top = self.top
        if top // int(self.max_clients) - 1 < 1:
            raise ValueError(
                f"secure_bits={self.bits} cannot hold the sum of max_clients={self.max_clients} clients: the root "
                f"reads each sum as a signed {self.bits}-bit integer (at most {top}), which leaves fewer than 2 "
                f"steps a side per client; use more bits (16 or 32) or fewer clients a round")
        if int(self.max_clients) * math.floor(self.max_weight) > top:
            raise ValueError(
                f"max_clients={self.max_clients} x max_weight={self.max_weight:g} = "
                f"{int(self.max_clients) * math.floor(self.max_weight)} examples could not be summed in "
                f"{self.bits} bits (at most {top}): lower max_weight (a client's num_examples above it counts "
                f"as max_weight) or max_clients, or use more bits (secure_bits=32 sums up to {2 ** 31 - 1})")

    @property
    def top(self) -> int:
        """The largest sum the root can read: 2^(bits-1) - 1."""
        return 2 ** (int(self.bits) - 1) - 1

    @property
    def levels(self) -> int:
        """L: clip_range is L steps of the values."""
        return self.top // int(self.max_clients) - 1

    @property
    def value_scale(self) -> float:
        """c: the value of one step of the weighted, clipped values."""
        return float(self.clip_range) / self.levels

    @property
    def weight_steps(self) -> int:
        """The most steps of the weight field one client sends: floor(max_weight / weight_scale)."""
        return math.floor(self.max_weight / self.weight_scale)

    @property
    def weight_scale(self) -> float:
        """s: the step of the weight field, a power of two at most 1 (so integer num_examples are exact)."""
        k = 0
        while k < 52 and int(self.max_clients) * math.floor(self.max_weight * 2.0 ** (k + 1)) <= self.top:
            k += 1
        return 2.0 ** -k

    def encodings(self) -> Tuple[ValueEncoding, ValueEncoding]:
        """The discretized encodings of the arrays' fields and of num_examples."""
        return (ValueEncoding.discretized(int(self.bits), self.value_scale),
                ValueEncoding.discretized(int(self.bits), self.weight_scale))

    def weight(self, num_examples: float) -> float:
        """n': num_examples capped at max_weight and rounded to the nearest weight step."""
        n = float(num_examples)
        if not math.isfinite(n) or n < 0:
            raise invalid_argument(f"num_examples {num_examples} is invalid: it must be finite and >= 0")
        s = self.weight_scale
        return min(round(n / s), self.weight_steps) * s

    def value_error_bound(self, counted: int, weight_sum: float) -> float:
        """How far each coordinate of the new model can be from the weighted mean of the
        clipped arrays (before rounding to the arrays' dtype), for `counted` clients whose
        n' add up to `weight_sum`."""
        return counted * self.value_scale * float(self.max_weight) / weight_sum

    def describe(self) -> str:
        return (f"{self.bits}-bit sums of at most {self.max_clients} clients: values clipped to "
                f"+-{self.clip_range:g} in steps of {self.value_scale:.3g}, weights up to {self.max_weight:g} "
                f"examples in steps of {self.weight_scale:g}")


def field_dtype(dtype: np.dtype) -> str:
    """The fedagg dtype a model array of `dtype` is averaged in (see the module comment)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.name in _FLOAT_DTYPES:
        return dtype.name
    if dtype.kind in "iub":
        return "float64"
    raise invalid_argument(f"model arrays of dtype {dtype} cannot be averaged; use float or integer arrays")


def layout_encoding(encoding: Union[None, str, ValueEncoding], deterministic: bool = False) -> ValueEncoding:
    """The value encoding of a layout's dense floating arrays: a spelling ("plain",
    "quantized:8", "quantized:4/512") or a ValueEncoding; None is plain. INVALID_ARGUMENT
    (local) for a bad spelling, for a discretized encoding (see the module comment) and,
    for a `deterministic` aggregation, for a quantized one (its decoded values are summed
    in floating point, which a deterministic aggregation does not do)."""
    encoding = ValueEncoding.of(encoding)
    if deterministic and encoding.kind == QUANTIZED:
        raise invalid_argument(
            f"encoding {encoding}: a deterministic aggregation sums exactly, and quantized values are decoded and "
            "summed in floating point; a model layout's dense arrays are weighted means, which take no discretized "
            "encoding either, so a deterministic model layout is sent plain")
    if encoding.kind == DISCRETIZED:
        raise invalid_argument(
            f"encoding {encoding}: a model layout averages its dense arrays with federated_weighted_mean, and a "
            "discretized field is summed as exact integers, which a weight would break; use a quantized encoding "
            "(e.g. quantized:8), or weight the values before discretizing and aggregate them with federated_sum "
            "yourself (fedagg.build_spec)")
    return encoding


def field_names(keys: Sequence[str]) -> List[str]:
    """Unique identifiers for the array names, in order ("fc.weight" -> "fc_weight")."""
    names: List[str] = []
    taken = set()
    for key in keys:
        base = re.sub(r"[^0-9A-Za-z_]", "_", str(key)) or "array"
        if base[0].isdigit():
            base = "a_" + base
        name, n = base, 1
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        names.append(name)
    return names


class ModelLayout:
    """The model's arrays as fedagg fields (server side: from_arrays; client side:
    from_spec with the array names the server sent)."""

    def __init__(self, fields: Sequence[ArrayField], private: bool = False,
                 secure: Optional[SecureDiscretization] = None):
        self.fields = list(fields)
        self.private = private
        self.secure = secure
        self.keys = [f.key for f in self.fields]
        if len(set(self.keys)) != len(self.keys):
            raise invalid_argument("the model's array names are not unique")

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, Any], *, sparse: Sequence[str] = (),
                    row_sparse: Sequence[str] = (),
                    encoding: Union[None, str, ValueEncoding] = None,
                    private: bool = False,
                    secure: Optional[SecureDiscretization] = None) -> "ModelLayout":
        """The layout of a model's arrays. `sparse` / `row_sparse`: names of arrays sent as
        changes (COO entries / rows). `encoding`: the value encoding of the dense arrays of
        a floating dtype (default plain; see the module comment and layout_encoding).
        `private`: differential privacy's layout (unweighted means of the changes).
        `secure`: secure aggregation's layout (weighted, clipped, discretized sums)."""
        encoding = layout_encoding(encoding)
        if private and encoding.encoded:
            raise invalid_argument(f"encoding {encoding}: with differential privacy a model layout's arrays travel "
                                   "plain (its changes are sent exact)")
        keys = list(arrays.keys())
        if not keys:
            raise invalid_argument("the model has no arrays")
        if secure is not None:
            return cls._secure_from_arrays(arrays, keys, sparse, row_sparse, encoding, private, secure)
        unknown = sorted((set(sparse) | set(row_sparse)) - set(keys))
        if unknown:
            raise invalid_argument(f"arrays {unknown} named sparse or row_sparse are not in the model: {keys}")
        both = sorted(set(sparse) & set(row_sparse))
        if both:
            raise invalid_argument(f"arrays {both} are named both sparse and row_sparse")
        fields = []
        for key, name in zip(keys, field_names(keys)):
            array = np.asarray(arrays[key])
            kind = ROW_SPARSE if key in row_sparse else SPARSE if key in sparse else DENSE
            if kind == ROW_SPARSE and array.ndim < 1:
                raise invalid_argument(f"array '{key}' is a scalar: it has no rows to send row-sparse")
            dtype = field_dtype(array.dtype)
            floating = array.dtype.kind == "f"
            fields.append(ArrayField(key, name, dtype, tuple(int(d) for d in array.shape), kind,
                                     array.dtype.name if floating else dtype,
                                     encoding if kind == DENSE and floating else PLAIN_ENCODING))
        return cls(fields, private)

    @classmethod
    def _secure_from_arrays(cls, arrays: Mapping[str, Any], keys: List[str], sparse: Sequence[str],
                            row_sparse: Sequence[str], encoding: ValueEncoding, private: bool,
                            secure: SecureDiscretization) -> "ModelLayout":
        if private:
            raise invalid_argument("secure aggregation with differential privacy is not built (a node cannot clip a "
                                   "masked update): use one or the other")
        if encoding.encoded:
            raise invalid_argument(f"encoding {encoding}: a secure layout discretizes its arrays itself (bits, "
                                   "clip range, max weight); leave the encoding plain")
        if sparse or row_sparse:
            raise invalid_argument(
                f"arrays {sorted(set(sparse) | set(row_sparse))} are named sparse / row_sparse: a secure aggregation "
                "masks dense vectors (the indices of a sparse update would show what a client touched), so every "
                "array is sent dense; do not name sparse arrays")
        values_encoding, _ = secure.encodings()
        fields = []
        for key, name in zip(keys, field_names(keys)):
            array = np.asarray(arrays[key])
            if array.dtype.kind != "f" or array.dtype.name not in _FLOAT_DTYPES:
                raise invalid_argument(
                    f"array '{key}' is {array.dtype}: a secure aggregation sends arrays clipped to "
                    f"+-{secure.clip_range:g} and discretized, which would change integer or boolean values (such as "
                    "a step counter) beyond repair; keep such arrays out of the model the strategy averages, or "
                    "make them float arrays within the clip range")
            fields.append(ArrayField(key, name, "float64", tuple(int(d) for d in array.shape), DENSE,
                                     array.dtype.name, values_encoding))
        return cls(fields, secure=secure)

    @classmethod
    def from_spec(cls, spec: Spec, keys: Sequence[str],
                  secure: Optional[SecureDiscretization] = None) -> "ModelLayout":
        """The layout `spec` (an aggregation made from a layout) declares, for arrays named `keys`
        in the model's order. A secure aggregation's layout needs its `secure`
        discretization (the round config carries it); its encodings must be the spec's."""
        leaves = {leaf.path: leaf for leaf in spec.leaves}
        names = field_names(keys)
        if spec.proto.HasField("secure"):
            return cls._secure_from_spec(spec, keys, names, leaves, secure)
        private = spec.proto.HasField("privacy")
        kinds = _KIND_OF_PRIVATE_INTRINSIC if private else _KIND_OF_INTRINSIC
        expected = {f"{MODEL}.{name}" for name in names} | (set() if private else {NUM_EXAMPLES})
        if set(leaves) != expected:
            raise invalid_argument(f"aggregation '{spec.aggregation_id}' is not a model layout for arrays "
                                   f"{list(keys)}: its fields are {sorted(leaves)}")
        fields = []
        for key, name in zip(keys, names):
            leaf = leaves[f"{MODEL}.{name}"]
            if leaf.intrinsic not in kinds:
                raise invalid_argument(f"{leaf.describe()}: not an intrinsic of a "
                                       f"{'private ' if private else ''}model layout")
            fields.append(ArrayField(key, name, leaf.dtype, leaf.shape, kinds[leaf.intrinsic],
                                     leaf.dtype, leaf.value_encoding))
        return cls(fields, private)

    @classmethod
    def _secure_from_spec(cls, spec: Spec, keys: Sequence[str], names: List[str], leaves: Dict[str, Leaf],
                          secure: Optional[SecureDiscretization]) -> "ModelLayout":
        if secure is None:
            raise invalid_argument(f"aggregation '{spec.aggregation_id}' is secure: its layout needs the clip range, "
                                   "max weight and max clients it was made with (the round config carries them)")
        expected = {f"{MODEL}.{name}" for name in names} | {NUM_EXAMPLES}
        if set(leaves) != expected:
            raise invalid_argument(f"aggregation '{spec.aggregation_id}' is not a secure model layout for arrays "
                                   f"{list(keys)}: its fields are {sorted(leaves)}")
        values_encoding, weight_encoding = secure.encodings()
        for path, encoding in [(p, values_encoding) for p in sorted(expected - {NUM_EXAMPLES})] + \
                [(NUM_EXAMPLES, weight_encoding)]:
            leaf = leaves[path]
            if leaf.intrinsic != "federated_sum" or leaf.value_encoding != encoding:
                raise invalid_argument(f"{leaf.describe()} {leaf.value_encoding}: a secure model layout made with "
                                       f"{secure.describe()} declares federated_sum {encoding}")
        fields = [ArrayField(key, name, "float64", leaves[f"{MODEL}.{name}"].shape, DENSE, "float64",
                             values_encoding) for key, name in zip(keys, names)]
        return cls(fields, secure=secure)

    @property
    def has_sparse(self) -> bool:
        return any(f.kind != DENSE for f in self.fields)

    @property
    def needs_base(self) -> bool:
        """Whether updates and results are changes from the global arrays (sparse arrays,
        or a private layout), so that both sides need those arrays."""
        return self.private or self.has_sparse

    @property
    def encoded(self) -> bool:
        """Whether any array travels in a value encoding."""
        return any(f.encoding.encoded for f in self.fields)

    @property
    def model_bytes(self) -> int:
        return sum(int(np.prod(f.shape, dtype=np.int64)) * np.dtype(f.dtype).itemsize for f in self.fields)

    def value_type(self) -> Dict[str, Any]:
        if self.secure is not None:
            _, weight_encoding = self.secure.encodings()
            return {MODEL: {f.name: Field(f.dtype, f.shape, "federated_sum", encoding=f.encoding)
                            for f in self.fields},
                    NUM_EXAMPLES: Field("float64", (), "federated_sum", encoding=weight_encoding)}
        intrinsics = _PRIVATE_INTRINSIC if self.private else _INTRINSIC
        model = {MODEL: {f.name: Field(f.dtype, f.shape, intrinsics[f.kind], encoding=f.encoding)
                         for f in self.fields}}
        return model if self.private else {**model, NUM_EXAMPLES: Field("float64", (), "federated_sum")}

    def spec(self, aggregation_id: str, **options) -> Any:
        """The fedagg.v1.AggregationSpec of one round (options as fedagg.build_spec takes)."""
        return build_spec(aggregation_id, self.value_type(), **options)

    def _check_keys(self, arrays: Mapping[str, Any], what: str):
        if set(arrays.keys()) != set(self.keys):
            raise invalid_argument(f"{what} has arrays {list(arrays.keys())}; the model has {self.keys}")

    def update(self, arrays: Mapping[str, Any], num_examples: float, base: Optional[Mapping[str, Any]] = None,
               *, allow_lossy_cast: bool = False) -> Tuple[Dict[str, Any], float]:
        """One client's update (fields for Connection.submit) and its weight (None for a
        private layout: every client counts once; None for a secure one, whose weight is in
        its values: fields for fedagg.contribute_securely). `base`, the global arrays the
        client trained from, is needed when the layout has sparse arrays or is private."""
        self._check_keys(arrays, "the update")
        if self.secure is not None:
            return self._secure_update(arrays, num_examples), None
        weight = float(num_examples)
        if not np.isfinite(weight) or weight <= 0:
            raise invalid_argument(f"num_examples {num_examples} is invalid: it must be finite and greater than 0")
        model: Dict[str, Any] = {}
        for f in self.fields:
            value = np.asarray(arrays[f.key])
            if value.shape != f.shape:
                raise invalid_argument(f"array '{f.key}': expected shape {f.shape}, got {value.shape}")
            if f.kind == DENSE and not self.private:
                model[f.name] = value
                continue
            if base is None:
                raise invalid_argument(f"array '{f.key}' is sent {f.kind.replace('_', '-')}: pass the global "
                                       "arrays the update was trained from (base)")
            # In the field's dtype first (refusing a lossy cast like any field), then the
            # weighted change from the global value: zero where the client changed nothing.
            declared = _declared(f, value, allow_lossy_cast)
            start = _declared(f, np.asarray(base[f.key]), allow_lossy_cast)
            if self.private:  # the unweighted change, which fedagg clips
                model[f.name] = declared - start
            else:
                model[f.name] = (declared - start) * np.dtype(f.dtype).type(weight)
        if self.private:
            return {MODEL: model}, None
        return {MODEL: model, NUM_EXAMPLES: np.float64(weight)}, weight

    def _secure_update(self, arrays: Mapping[str, Any], num_examples: float) -> Dict[str, Any]:
        """Each array clipped to the clip range and multiplied by the weight ratio n' / max_weight
        (in float64), and n' (SecureDiscretization)."""
        secure = self.secure
        weight = secure.weight(num_examples)
        ratio = weight / float(secure.max_weight)
        model: Dict[str, Any] = {}
        for f in self.fields:
            value = np.asarray(arrays[f.key])
            if value.shape != f.shape:
                raise invalid_argument(f"array '{f.key}': expected shape {f.shape}, got {value.shape}")
            if value.dtype.kind not in "fiu":
                raise invalid_argument(f"array '{f.key}' is {value.dtype}: a secure layout sends float values")
            value = value.astype(np.float64)
            finite = np.isfinite(value)
            if not finite.all():
                i = int(np.flatnonzero(~finite.reshape(-1))[0])
                raise invalid_argument(f"array '{f.key}': value {value.reshape(-1)[i]!r} at position {i} is not "
                                       "finite (a secure aggregation clips finite values)")
            model[f.name] = np.clip(value, -float(secure.clip_range), float(secure.clip_range)) * ratio
        return {MODEL: model, NUM_EXAMPLES: np.float64(weight)}

    def model_from_result(self, result: Result, base: Optional[Mapping[str, Any]] = None) -> Dict[str, np.ndarray]:
        """The averaged model from a FINALIZED aggregation's result, name -> array."""
        if self.secure is not None:
            total = float(result[NUM_EXAMPLES].values)
            if not total > 0:
                raise invalid_argument(f"aggregation '{result.status.aggregation_id}' holds no examples")
            factor = float(self.secure.max_weight) / total
            return {f.key: np.ascontiguousarray((result[f"{MODEL}.{f.name}"].to_dense().astype(np.float64) * factor)
                                                .astype(f.result_dtype, copy=False)) for f in self.fields}
        if self.private:
            if base is None:
                raise invalid_argument("a private layout's result is the clients' mean change: pass the global arrays (base)")
            return {f.key: np.ascontiguousarray(
                (np.asarray(base[f.key]).astype(f.dtype) + result[f"{MODEL}.{f.name}"].to_dense().astype(f.dtype))
                .astype(f.result_dtype, copy=False)) for f in self.fields}
        total = float(result[NUM_EXAMPLES].values)
        if not total > 0:
            raise invalid_argument(f"aggregation '{result.status.aggregation_id}' holds no examples")
        out: Dict[str, np.ndarray] = {}
        for f in self.fields:
            values = result[f"{MODEL}.{f.name}"].to_dense()
            if f.kind != DENSE:
                if base is None:
                    raise invalid_argument(f"array '{f.key}' was sent as changes: pass the global arrays (base)")
                dtype = np.dtype(f.dtype)
                start = np.asarray(base[f.key]).astype(dtype)
                values = (start + values / dtype.type(total)).astype(dtype)
            out[f.key] = np.ascontiguousarray(values.astype(f.result_dtype, copy=False))
        return out


def _declared(field: ArrayField, value: np.ndarray, allow_lossy_cast: bool) -> np.ndarray:
    """`value` in the field's dtype, by the client's cast rule (fedagg.update_input)."""
    leaf = Leaf(f"{MODEL}.{field.name}", field.dtype, field.shape, _INTRINSIC[field.kind], False)
    return in_declared_dtype(leaf, value, False, allow_lossy_cast).reshape(field.shape)
