"""From what a training loop holds to what a field declares: turns each field's Python
value into the arrays of the field's wire encoding, in its declared dtype, and checks the
whole update against the spec before anything is sent (the checks the server makes,
with the same status code, INVALID_ARGUMENT, and the same wording where they overlap).

A field's value may be
  - a NumPy array (or anything np.asarray takes) of the field's shape,
  - Sparse(indices, values): int64 linear indices into the flattened (row-major) field,
    one value each; a plain (indices, values) tuple means the same,
  - a SciPy sparse matrix (COO, CSR, ...): a (1, N) row vector over the flattened field,
    or a matrix of the field's own 2-D shape,
  - RowSparse(row_ids, rows): row ids into dimension 0, one full row each; a plain tuple
    means this for a row-sparse field.
Whatever is given, the client sends what the field's intrinsic takes: a dense array for a
sparse field sends its non-zero entries (a zero is "not touched"; pass indices to send an
explicit zero), for a row-sparse field its rows that hold a non-zero; sparse input for a
dense field is scattered into zeros (repeated indices add up). Values are converted to the
declared dtype (float16 and bfloat16 included) by the rule fedagg-client follows too
(client_stub/dtype_cast.h), so one input means the same in both: a conversion that keeps
every value happens at once (float32 to float64; float64 [1.0, 2.5] to float32; Python
floats that float32 holds exactly); one that would change a value (float64 0.1 to float32,
float32 1/3 to bfloat16) is refused naming the first such element, unless the caller passes
allow_lossy_cast=True, and then values round. Whatever the opt-in, floats never go to an
integer field, and a value that overflows the declared dtype is refused.

A field that declares a value encoding (Leaf.value_encoding: quantized or discretized,
fedagg.value_encoding) sends, in place of its values, their encoded section: the values in
the declared dtype, rounded stochastically with random numbers drawn from the update's
seed (a fresh one per update unless the caller gives one), so the same seed makes the same
bytes as the C++ client. An encoded field takes finite values only.
"""
import math
import operator
import secrets
from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Optional

import numpy as np

from .errors import invalid_argument
from .spec import DENSE, DTYPES, ROW_SPARSE, SPARSE, Leaf, Spec
from .value_encoding import DISCRETIZED, encode_for_field

# Weighted fields accumulated in float32 accept weights in this range (the server's
# kMinFloat32Weight / kMaxFloat32Weight).
_MIN_FLOAT32_WEIGHT, _MAX_FLOAT32_WEIGHT = 2.0 ** -40, 2.0 ** 40


class Sparse(NamedTuple):
    """COO: int64 linear indices into the flattened field, one value each."""
    indices: Any
    values: Any


class RowSparse(NamedTuple):
    """Row ids into dimension 0 of the field, one row (shape[1:]) each."""
    row_ids: Any
    rows: Any


@dataclass
class FieldArrays:
    """One field as it travels: little-endian int64 indices (None for dense) and values
    in the declared dtype's wire form, both 1-D and contiguous; for a field with a value
    encoding, the encoded section's bytes (uint8) in place of the values."""
    indices: Optional[np.ndarray]
    values: np.ndarray


@dataclass
class PreparedUpdate:
    spec: Spec
    fields: List[FieldArrays]
    weight: Optional[float]
    seed: Optional[int] = None  # the rounding seed of its encoded fields (None: it has none)


def _integer_ids(leaf: Leaf, ids: Any, what: str) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.size == 0:
        return np.zeros(0, np.int64)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise invalid_argument(f"{leaf.describe()}: {what} must be a 1-D integer array, got "
                               f"{ids.dtype} of shape {ids.shape}")
    return ids.astype(np.int64)


def _check_bounds(leaf: Leaf, ids: np.ndarray, limit: int, what: str):
    bad = np.flatnonzero((ids < 0) | (ids >= limit))
    if bad.size:
        raise invalid_argument(f"{leaf.describe()}: {what} {ids[bad[0]]} at position {bad[0]} is "
                               f"out of range [0, {limit})")


def _coo(leaf: Leaf, indices: Any, values: Any):
    indices = _integer_ids(leaf, indices, "indices")
    values = np.asarray(values)
    if values.shape != indices.shape:
        raise invalid_argument(f"{leaf.describe()}: {indices.size} indices but values of shape "
                               f"{values.shape}; send one value per index")
    _check_bounds(leaf, indices, leaf.num_elements, "index")
    return ("coo", indices, values)


def _rows(leaf: Leaf, row_ids: Any, rows: Any):
    if not leaf.shape:
        raise invalid_argument(f"{leaf.describe()}: a scalar field has no rows")
    row_ids = _integer_ids(leaf, row_ids, "row ids")
    rows = np.asarray(rows)
    expected = (row_ids.size,) + leaf.shape[1:]
    if rows.shape != expected:
        raise invalid_argument(f"{leaf.describe()}: {row_ids.size} row ids need rows of shape "
                               f"{expected}, got {rows.shape}")
    _check_bounds(leaf, row_ids, leaf.shape[0], "row id")
    return ("rows", row_ids, rows)


def _parse(leaf: Leaf, value: Any):
    """The value in one of three checked forms: dense, coo or rows."""
    if isinstance(value, Sparse):
        return _coo(leaf, *value)
    if isinstance(value, RowSparse):
        return _rows(leaf, *value)
    if isinstance(value, tuple) and len(value) == 2:
        return _rows(leaf, *value) if leaf.encoding == ROW_SPARSE else _coo(leaf, *value)
    if hasattr(value, "tocoo") and hasattr(value, "nnz"):  # a SciPy sparse matrix or array
        matrix = value.tocoo()
        if matrix.shape not in ((1, leaf.num_elements), leaf.shape):
            raise invalid_argument(f"{leaf.describe()}: a sparse matrix of shape {matrix.shape}; use a "
                                   f"(1, {leaf.num_elements}) row vector or the field's own shape")
        return _coo(leaf, matrix.row.astype(np.int64) * matrix.shape[1] + matrix.col, matrix.data)
    array = np.asarray(value)
    if array.shape != leaf.shape:
        raise invalid_argument(f"{leaf.describe()}: expected shape {leaf.shape}, got {array.shape}")
    return ("dense", array)


def _row_width(leaf: Leaf) -> int:
    return leaf.num_elements // leaf.shape[0] if leaf.shape and leaf.shape[0] else 0


def _encode_as_declared(leaf: Leaf, form) -> FieldArrays:
    """The parsed value in the field's own encoding (indices, values)."""
    kind = form[0]
    if leaf.encoding == DENSE:
        if kind == "dense":
            return FieldArrays(None, form[1])
        ids, values = form[1], form[2]
        dense = np.zeros(leaf.shape, values.dtype)
        if kind == "coo":
            np.add.at(dense.reshape(-1), ids, values)
        else:
            np.add.at(dense, ids, values)
        return FieldArrays(None, dense)
    if leaf.encoding == SPARSE:
        if kind == "coo":
            return FieldArrays(form[1], form[2])
        if kind == "dense":
            flat = form[1].reshape(-1)
            indices = np.flatnonzero(flat)
            return FieldArrays(indices.astype(np.int64), flat[indices])
        width = _row_width(leaf)
        ids, rows = form[1], form[2]
        indices = (ids[:, None] * width + np.arange(width, dtype=np.int64)).reshape(-1)
        return FieldArrays(indices, rows.reshape(-1))
    # ROW_SPARSE
    if kind == "rows":
        return FieldArrays(form[1], form[2])
    width = _row_width(leaf)
    if kind == "dense":
        table = form[1].reshape(leaf.shape[0], width)
        ids = np.flatnonzero((table != 0).any(axis=1))
        return FieldArrays(ids.astype(np.int64), table[ids])
    indices, values = form[1], form[2]
    ids, inverse = np.unique(indices // width, return_inverse=True)
    rows = np.zeros((ids.size, width), values.dtype)
    np.add.at(rows, (inverse, indices % width), values)
    return FieldArrays(ids.astype(np.int64), rows)


def _to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounding to nearest even (as fedagg's ToBFloat16)."""
    bits = values.astype("<f4").view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((bits >> 16) | 0x40).astype("<u2"), rounded)


def _first_changed(values: np.ndarray, kept: np.ndarray) -> Optional[int]:
    """The first position where `kept` (the converted values, widened back) differs from
    `values` (NaN stays NaN), or None."""
    if values.dtype.kind in "iu":
        with np.errstate(over="ignore", invalid="ignore"):
            back = kept.astype(values.dtype) if kept.dtype.kind == "f" else kept
        same = (back == values) & (np.abs(kept.astype(np.float64)) < 2.0 ** 63)
    else:
        same = (kept == values) | (np.isnan(kept) & np.isnan(values))
    changed = np.flatnonzero(~same)
    return int(changed[0]) if changed.size else None


def _in_declared_dtype(leaf: Leaf, values: np.ndarray, require_finite: bool,
                       allow_lossy_cast: bool = False) -> np.ndarray:
    """Values converted to the field's wire dtype, refusing lossy kinds and overflow, a
    conversion that changes a value unless `allow_lossy_cast`, and NaN or Inf when the
    aggregation requires finite values."""
    # Flat from here: a scalar field's 0-d array would take NumPy's scalar casting rules,
    # under which uint64 >> int (the bfloat16 rounding) has no common type.
    values = np.asarray(values).reshape(-1)
    compute = np.dtype("<f4") if leaf.dtype == "bfloat16" else DTYPES[leaf.dtype][1]
    if values.size and (values.dtype == object or not np.can_cast(values.dtype, compute, "same_kind")):
        raise invalid_argument(f"{leaf.describe()}: values of dtype {values.dtype} do not convert to "
                               f"{leaf.dtype}; convert them before sending")
    if compute.kind in "iu" and values.size:
        info = np.iinfo(compute)
        if int(values.min()) < info.min or int(values.max()) > info.max:
            raise invalid_argument(f"{leaf.describe()}: values outside the range of {leaf.dtype}")
    # Values already in the wire dtype are sent from the caller's array as they are: no
    # copy, and nothing to check but finiteness where it is required.
    with np.errstate(over="ignore", invalid="ignore"):
        converted = values.astype(compute, copy=False)
    wire = _to_bfloat16_bits(converted) if leaf.dtype == "bfloat16" else converted
    widened = (wire.astype(np.uint32) << 16).view(np.float32) if leaf.dtype == "bfloat16" else wire
    cast = leaf.dtype == "bfloat16" or values.dtype != widened.dtype
    if compute.kind == "f" and (cast or require_finite):
        finite = np.isfinite(widened)
        if cast and values.dtype.kind == "f" and np.any(np.isfinite(values) & ~finite):
            raise invalid_argument(f"{leaf.describe()}: a value overflows {leaf.dtype}")
    if not allow_lossy_cast and values.size and cast:
        i = _first_changed(values, widened)
        if i is not None:
            original = values[i].item()
            became = widened[i].item()
            raise invalid_argument(
                f"{leaf.describe()}: values are {values.dtype} but the field declares {leaf.dtype}: "
                f"element {i} ({original!r}) would become {became!r} in {leaf.dtype}, so the cast is "
                f"not done silently; convert the array yourself, or ask for the cast "
                f"(fedagg-client --allow_lossy_cast, Python allow_lossy_cast=True)")
    if compute.kind == "f":
        if require_finite and not finite.all():
            raise invalid_argument(f"{leaf.describe()}: holds NaN or Inf, and this aggregation "
                                   f"requires finite values")
    return np.ascontiguousarray(wire)


# For the framework adapters (fedagg.model_layout): the same cast rule, one array at a time.
in_declared_dtype = _in_declared_dtype


def _flatten(prefix: str, fields: Dict[str, Any], flat: Dict[str, Any]) -> None:
    """Adds every value of nested dicts to `flat` by dotted path. A module function, not a
    recursive closure: a closure that calls itself is a reference cycle, and it would keep
    the caller's arrays alive until the cyclic garbage collector ran."""
    for key, value in fields.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            _flatten(path, value, flat)
        else:
            flat[path] = value


def _field_values(spec: Spec, fields: Any) -> List[Any]:
    """The caller's values in leaf order: a dict by path (nested dicts for nested
    structs), a list in leaf order, or one value for a single-field type."""
    paths = [leaf.path for leaf in spec.leaves]
    if isinstance(fields, dict):
        flat: Dict[str, Any] = {}
        _flatten("", fields, flat)
        unknown = sorted(set(flat) - set(paths))
        missing = [p for p in paths if p not in flat]
        if unknown or missing:
            raise invalid_argument(
                f"the update names fields {sorted(flat)} but aggregation '{spec.aggregation_id}' has "
                f"{paths}" + (f"; unknown: {unknown}" if unknown else "") +
                (f"; missing: {missing}" if missing else ""))
        return [flat[p] for p in paths]
    if isinstance(fields, list):
        if len(fields) != len(paths):
            raise invalid_argument(f"update has {len(fields)} fields but aggregation "
                                   f"'{spec.aggregation_id}' has {len(paths)}: {paths}")
        return fields
    if len(paths) != 1:
        raise invalid_argument(f"aggregation '{spec.aggregation_id}' has fields {paths}: pass a dict "
                               f"by path or a list in that order")
    return [fields]


def _check_weight(spec: Spec, weight: Optional[float]) -> Optional[float]:
    if not spec.weighted:
        if weight is not None:
            raise invalid_argument("this aggregation has no weighted field; send the update without a weight")
        return None
    if weight is None:
        raise invalid_argument("this aggregation has a weighted field; send a weight with the update")
    weight = float(weight)
    if not np.isfinite(weight) or weight <= 0:
        raise invalid_argument(f"weight {weight} is invalid: it must be finite and greater than 0")
    if spec.float32_weighted and not _MIN_FLOAT32_WEIGHT <= weight <= _MAX_FLOAT32_WEIGHT:
        raise invalid_argument(
            f"weight {weight} is outside [{_MIN_FLOAT32_WEIGHT}, {_MAX_FLOAT32_WEIGHT}], the range a "
            f"float32-accumulated weighted field supports; rescale the weights or create the "
            f"aggregation with float64_accumulation")
    return weight


def _check_seed(seed: Optional[int]) -> int:
    """The update's rounding seed: the caller's, or a fresh random one."""
    if seed is None:
        return secrets.randbits(64)
    try:
        seed = operator.index(seed)
    except TypeError:
        raise invalid_argument(f"seed must be an integer in [0, 2**64), not {type(seed).__name__}") from None
    if not 0 <= seed < 1 << 64:
        raise invalid_argument(f"seed {seed} is outside [0, 2**64)")
    return seed


def _widened(leaf: Leaf, wire: np.ndarray) -> np.ndarray:
    """A field's values in their wire form as NumPy floats (bfloat16's bits widened)."""
    return (wire.astype(np.uint32) << 16).view(np.float32) if leaf.dtype == "bfloat16" else wire


def _encoded_values(leaf: Leaf, wire: np.ndarray, seed: int, number: int) -> np.ndarray:
    """A field's values (in its wire form) as the section of its value encoding."""
    return encode_for_field(_widened(leaf, wire), leaf.value_encoding, seed, number, leaf.describe())


def prepare_update(spec: Spec, fields: Any, weight: Optional[float] = None, *,
                   allow_lossy_cast: bool = False, seed: Optional[int] = None) -> PreparedUpdate:
    """Checks an update against `spec` and puts every field in its wire form. Raises
    FedaggError (INVALID_ARGUMENT, local=True) for anything the server would refuse, and
    for a dtype conversion that would change a value unless `allow_lossy_cast`. `seed`
    (an integer in [0, 2**64)) draws the stochastic rounding of fields with a value
    encoding; None: a fresh random seed for this update."""
    checked_weight = _check_weight(spec, weight)
    encoded_fields = any(leaf.value_encoding.encoded for leaf in spec.leaves)
    checked_seed = _check_seed(seed) if encoded_fields or seed is not None else None
    plain = []
    for leaf, value in zip(spec.leaves, _field_values(spec, fields)):
        encoded = _encode_as_declared(leaf, _parse(leaf, value))
        indices = None if encoded.indices is None else np.ascontiguousarray(encoded.indices, "<i8")
        plain.append((indices, _in_declared_dtype(leaf, encoded.values, spec.requires_finite(leaf), allow_lossy_cast)))
    if spec.proto.HasField("privacy") and any(leaf.value_encoding.kind == DISCRETIZED for leaf in spec.leaves):
        plain = _clipped(spec, plain)
    arrays = []
    for number, (leaf, (indices, values)) in enumerate(zip(spec.leaves, plain)):
        if leaf.value_encoding.encoded:
            values = _encoded_values(leaf, values, checked_seed, number)
        arrays.append(FieldArrays(indices, values))
    return PreparedUpdate(spec, arrays, checked_weight, checked_seed if encoded_fields else None)


def discretized_clip_margin(clip_norm: float, fields) -> float:
    """How far below the clip norm a client clips an update whose fields `fields` ((scale,
    coordinates) each) it then discretizes: stochastic rounding adds to the squared norm
    about n s^2 / 4 at most (variance s^2 / 4 a coordinate) and moves the norm by a
    fluctuation of sd at most s / 2 · 2 = s; clipping n s^2 / (8 C) + 3 s lower keeps the
    rounded norm within C but for a three-sd fluctuation."""
    scale = max((s for s, _ in fields), default=0.0)
    coordinates = sum(n for _, n in fields)
    return min(clip_norm / 2, coordinates * scale * scale / (8 * clip_norm) + 3 * scale)


def _clipped(spec: Spec, plain):
    """A differentially private update whose discretized fields the client must clip before
    discretizing them (docs/SEMANTICS.md section 12): every field's values scaled so that the
    whole update's L2 norm (repeated sparse indices summed) is within the spec's clip norm
    less a margin for the stochastic rounding to come (discretized_clip_margin), so that the
    rounded update is within the bound as a rule and the server need not truncate it. The
    server clips plain fields itself; it refuses a discretized one beyond the bound by more
    than the rounding's slack."""
    squares = 0.0
    for leaf, (indices, values) in zip(spec.leaves, plain):
        if values.size == 0:
            continue
        rows = _widened(leaf, values).astype(np.float64).reshape(1 if indices is None else len(indices), -1)
        if indices is not None:
            unique, position = np.unique(indices, return_inverse=True)
            summed = np.zeros((len(unique), rows.shape[1]))
            np.add.at(summed, position, rows)
            rows = summed
        squares += float(np.sum(rows * rows))
    clip = spec.proto.privacy.clip_norm
    discretized = [(leaf.value_encoding.scale, values.size) for leaf, (_, values) in zip(spec.leaves, plain)
                   if leaf.value_encoding.kind == DISCRETIZED]
    bound = clip * (1 - 2.0 ** -20) - discretized_clip_margin(clip, discretized)
    norm = math.sqrt(squares)
    if norm <= bound:
        return plain
    clipped = []
    for leaf, (indices, values) in zip(spec.leaves, plain):
        scaled = _widened(leaf, values).astype(np.float64) * (bound / norm)
        clipped.append((indices, _to_bfloat16_bits(scaled.astype(np.float32)) if leaf.dtype == "bfloat16"
                        else scaled.astype(values.dtype)))
    return clipped
