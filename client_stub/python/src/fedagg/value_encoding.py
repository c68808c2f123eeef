"""Value encodings: how one field's values travel on the wire (a dense field's elements, a
sparse field's values; its indices stay exact), declared in the spec beside its intrinsic (fedagg.v1.FieldEncoding), and the stochastic-rounding encoder that
writes them, byte for byte as the C++ client does (service/core/value_encoder.cc).

    plain                  the declared dtype's elements (the default)
    quantized:BITS[/BLOCK][+rotation:SIZE]
                           BITS (1, 2, 4, 8) a coordinate and one float32 scale per BLOCK
                           coordinates (a multiple of 8 in [8, 65536], default 256): the
                           codes 0..2^b-1 stand for levels spread evenly over [-s, s];
                           with a rotation, each whole run of SIZE coordinates (a power of
                           two in [8, 65536]) is rotated first (random signs the
                           aggregation's rotation seed draws, then a Hadamard transform
                           scaled by 1/sqrt(SIZE)), and the root rotates the result back
    discretized:BITS@SCALE integers of BITS (8, 16, 32) bits, each step worth SCALE;
                           the server sums them exactly

Both round stochastically, so a decoded value is the original in expectation (unbiased).
The random numbers come from a counter-based generator, SplitMix64's mixing function over
(seed, field, coordinate), so the same seed gives the same bytes in every client library:
rounding_stream(seed, field) is a field's stream, rounding_uniforms(stream, n) its numbers.
Everything here is vectorised over coordinates (NumPy uint64 arithmetic wraps modulo
2^64, as C++'s does), in slabs of about 2^20 coordinates to bound the temporaries.
"""
import re
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from .errors import FedaggError, invalid_argument
from .v1 import types_pb2

PLAIN, QUANTIZED, DISCRETIZED = "plain", "quantized", "discretized"
DEFAULT_BLOCK_SIZE = 256
MAX_BLOCK_SIZE = 65536
MIN_ROTATION, MAX_ROTATION = 8, 65536
QUANTIZED_BITS = (1, 2, 4, 8)
DISCRETIZED_BITS = (8, 16, 32)

_KIND_NUMBERS = {PLAIN: types_pb2.FieldEncoding.PLAIN, QUANTIZED: types_pb2.FieldEncoding.QUANTIZED,
                 DISCRETIZED: types_pb2.FieldEncoding.DISCRETIZED}
_KIND_NAMES = {number: name for name, number in _KIND_NUMBERS.items()}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DISCRETIZED_INTS = {8: np.dtype("<i1"), 16: np.dtype("<i2"), 32: np.dtype("<i4")}
_SLAB = 1 << 20  # coordinates encoded at a time (rounded to whole blocks)

_MASK64 = (1 << 64) - 1
_GOLDEN_GAMMA = 0x9E3779B97F4A7C15
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass(frozen=True)
class ValueEncoding:
    """One field's value encoding. Make one with parse("quantized:8"),
    ValueEncoding.quantized(bits, block_size) or ValueEncoding.discretized(bits, scale);
    ValueEncoding() is plain."""
    kind: str = PLAIN
    bits: int = 0
    block_size: int = 0  # quantized: coordinates per scale
    scale: float = 0.0   # discretized: the value of one integer step
    rotation: int = 0    # quantized: coordinates rotated together (0: none)
    rotation_seed: int = 0  # the rotation's signs: set by the root when it creates the aggregation

    @classmethod
    def quantized(cls, bits: int, block_size: int = DEFAULT_BLOCK_SIZE, rotation: int = 0,
                  rotation_seed: int = 0) -> "ValueEncoding":
        return cls(QUANTIZED, bits, block_size, 0.0, rotation, rotation_seed).check()

    @classmethod
    def discretized(cls, bits: int, scale: float) -> "ValueEncoding":
        return cls(DISCRETIZED, bits, 0, float(scale)).check()

    @classmethod
    def parse(cls, text: str) -> "ValueEncoding":
        """Reads str()'s spelling (also "none" for plain); checked (see check())."""
        def bad(why: str):
            return invalid_argument(
                f"encoding '{text}' {why}; write plain, quantized:BITS[/BLOCK][+rotation:SIZE] (BITS 1, 2, 4 "
                f"or 8) or discretized:BITS@SCALE (BITS 8, 16 or 32)")
        if not isinstance(text, str):
            raise invalid_argument(f"an encoding is a string such as 'quantized:8' or a ValueEncoding, "
                                   f"not {type(text).__name__}")
        if text in ("plain", "none"):
            return cls()
        if text.startswith("quantized:"):
            body, plus, rotation_text = text[len("quantized:"):].partition("+rotation:")
            if plus and not _INTEGER.fullmatch(rotation_text):
                raise bad("has no valid rotation size")
            bits_text, slash, block_text = body.partition("/")
            if slash and not _INTEGER.fullmatch(block_text):
                raise bad("has no valid block size")
            if not _INTEGER.fullmatch(bits_text):
                raise bad("has no valid bit count")
            return cls(QUANTIZED, int(bits_text), int(block_text) if slash else DEFAULT_BLOCK_SIZE, 0.0,
                       int(rotation_text) if plus else 0).check()
        if text.startswith("discretized:"):
            bits_text, at, scale_text = text[len("discretized:"):].partition("@")
            if not at:
                raise bad("has no @SCALE")
            if not _INTEGER.fullmatch(bits_text):
                raise bad("has no valid bit count")
            try:
                if "_" in scale_text or scale_text != scale_text.strip():
                    raise ValueError(scale_text)
                scale = float(scale_text)
            except ValueError:
                raise bad("has no valid scale") from None
            return cls(DISCRETIZED, int(bits_text), 0, scale).check()
        raise bad("is not an encoding")

    @classmethod
    def of(cls, encoding: Union[None, str, "ValueEncoding"]) -> "ValueEncoding":
        """A ValueEncoding from what Field takes: None (plain), a spelling, or one already made."""
        if encoding is None:
            return cls()
        if isinstance(encoding, ValueEncoding):
            return encoding.check()
        return cls.parse(encoding)

    def check(self) -> "ValueEncoding":
        """Itself, or INVALID_ARGUMENT (local) saying which bits, block size or scale are allowed."""
        if self.kind == PLAIN:
            return self
        if self.kind == QUANTIZED:
            if not _is_int(self.bits) or self.bits not in QUANTIZED_BITS:
                raise invalid_argument(f"a quantized encoding takes 1, 2, 4 or 8 bits a coordinate, not {self.bits}")
            if (not _is_int(self.block_size) or not 8 <= self.block_size <= MAX_BLOCK_SIZE
                    or self.block_size % 8):
                raise invalid_argument(f"a quantized encoding's block size must be a multiple of 8 in [8, "
                                       f"{MAX_BLOCK_SIZE}] (default {DEFAULT_BLOCK_SIZE}), not {self.block_size}")
            r = self.rotation
            if not _is_int(r) or (r != 0 and (not MIN_ROTATION <= r <= MAX_ROTATION or r & (r - 1))):
                raise invalid_argument(f"a quantized encoding's rotation must be a power of two in [{MIN_ROTATION}, "
                                       f"{MAX_ROTATION}] (0: none), not {r}")
            return self
        if self.kind == DISCRETIZED:
            if self.rotation:
                raise invalid_argument("only a quantized encoding is rotated")
            if not _is_int(self.bits) or self.bits not in DISCRETIZED_BITS:
                raise invalid_argument(f"a discretized encoding takes 8, 16 or 32 bits a coordinate, not {self.bits}")
            if not (isinstance(self.scale, (int, float, np.integer, np.floating)) and np.isfinite(self.scale)
                    and self.scale > 0):
                raise invalid_argument(f"a discretized encoding's scale (the value of one integer step) must be "
                                       f"finite and > 0, not {self.scale}")
            return self
        raise invalid_argument(f"unknown value encoding kind '{self.kind}'; use plain, quantized or discretized")

    @property
    def encoded(self) -> bool:
        return self.kind != PLAIN

    @property
    def rotated(self) -> bool:
        return self.kind == QUANTIZED and self.rotation > 0

    @property
    def max_code(self) -> int:
        """The highest code of a quantized encoding, L = 2^b - 1."""
        return (1 << self.bits) - 1

    def blocks(self, n: int) -> int:
        """Quantized: the number of scales ahead of the codes of `n` values."""
        return -(-n // self.block_size) if self.kind == QUANTIZED else 0

    def encoded_bytes(self, n: int) -> int:
        """The bytes of the VALUES section of `n` values in this encoding (not for plain,
        whose size is the dtype's)."""
        if self.kind == PLAIN:
            raise ValueError("a plain field's values take the size of its dtype's elements")
        return self.blocks(n) * 4 + (n * self.bits + 7) // 8

    def step(self, scale: float = 0.0) -> float:
        """The distance between two neighbouring decoded values: 2 s / L for a quantized
        block of scale s, the scale for a discretized encoding. A value is off by less
        than one step after stochastic rounding, and by none in expectation."""
        return 2.0 * scale / self.max_code if self.kind == QUANTIZED else self.scale

    def __str__(self) -> str:
        if self.kind == QUANTIZED:
            return (f"quantized:{self.bits}" + ("" if self.block_size == DEFAULT_BLOCK_SIZE else f"/{self.block_size}")
                    + (f"+rotation:{self.rotation}" if self.rotation else ""))
        if self.kind == DISCRETIZED:
            return f"discretized:{self.bits}@{self.scale!r}"
        return self.kind

    def to_proto(self) -> types_pb2.FieldEncoding:
        return types_pb2.FieldEncoding(kind=_KIND_NUMBERS[self.kind], bits=int(self.bits),
                                       block_size=int(self.block_size), scale=float(self.scale),
                                       rotation=int(self.rotation), rotation_seed=int(self.rotation_seed))

    @classmethod
    def from_proto(cls, proto: types_pb2.FieldEncoding) -> "ValueEncoding":
        """As the server declared it (not checked again); a quantized block size of 0 is the default."""
        kind = _KIND_NAMES.get(proto.kind)
        if kind is None:
            raise invalid_argument(f"value encoding kind {proto.kind} is not known to this client; upgrade fedagg")
        if kind == PLAIN:
            return cls()
        if kind == QUANTIZED:
            return cls(QUANTIZED, proto.bits, proto.block_size or DEFAULT_BLOCK_SIZE, 0.0, proto.rotation,
                       proto.rotation_seed)
        return cls(DISCRETIZED, proto.bits, 0, proto.scale)


PLAIN_ENCODING = ValueEncoding()


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function over a uint64 array, in place (wrapping)."""
    z ^= z >> _S30
    z *= _MIX1
    z ^= z >> _S27
    z *= _MIX2
    z ^= z >> _S31
    return z


def _mix64_int(z: int) -> int:
    """_mix64 of one integer (taken modulo 2^64)."""
    return int(_mix64(np.array([z & _MASK64], dtype=np.uint64))[0])


def rounding_stream(seed: int, field: int) -> int:
    """The random stream of field `field` (its leaf index, depth-first from 0) of an update
    encoded with `seed` (any integer, taken modulo 2^64)."""
    return _mix64_int((seed & _MASK64) + (field + 1) * _GOLDEN_GAMMA)


def rounding_uniforms(stream: int, n: int, start: int = 0) -> np.ndarray:
    """The uniform numbers in [0, 1) (multiples of 2^-53, float64) that round coordinates
    start .. start + n - 1 of a field with random stream `stream`."""
    z = np.arange(start + 1, start + n + 1, dtype=np.uint64)
    z *= np.uint64(_GOLDEN_GAMMA)
    z += np.uint64(stream & _MASK64)
    return (_mix64(z) >> _S11).astype(np.float64) * 2.0 ** -53


def _negative_signs(seed: int, n: int) -> np.ndarray:
    """Which of the first n coordinates' rotation signs are negative (as C++'s
    RotationSignNegative: the top bit of Mix64(Mix64(seed) + (i + 1) G))."""
    z = np.arange(1, n + 1, dtype=np.uint64)
    z *= np.uint64(_GOLDEN_GAMMA)
    z += np.uint64(_mix64_int(seed))
    return (_mix64(z) >> np.uint64(63)).astype(bool)


def _hadamard_runs(x: np.ndarray, run: int) -> None:
    """The unnormalized fast Walsh-Hadamard transform of each run of `run` values of x
    (float64, length a multiple of run), in place: at each stage the pairs (j, j + h) of
    each group of 2h become (a + b, a - b), the same additions as C++'s."""
    table = x.reshape(-1, run)
    h = 1
    while h < run:
        groups = table.reshape(table.shape[0], run // (2 * h), 2, h)
        a = groups[:, :, 0, :].copy()
        b = groups[:, :, 1, :]
        groups[:, :, 0, :] = a + b
        groups[:, :, 1, :] = a - b
        h *= 2


def rotate(values: np.ndarray, encoding: ValueEncoding) -> np.ndarray:
    """y = H D x / sqrt(R) over each whole run of R = encoding.rotation values (float64, a
    new array); a shorter last run is left as it is. Plain copy for an encoding without
    rotation."""
    y = np.array(values, dtype=np.float64).reshape(-1)
    if not encoding.rotated:
        return y
    run = encoding.rotation
    whole = y.size // run * run
    y[:whole][_negative_signs(encoding.rotation_seed, whole)] *= -1.0
    _hadamard_runs(y[:whole], run)
    y[:whole] *= 1.0 / np.sqrt(float(run))
    return y


def unrotate(values: np.ndarray, encoding: ValueEncoding) -> np.ndarray:
    """The inverse of rotate(): x = D H y / sqrt(R) (what the root applies to a rotated
    field's result; decode() returns values still rotated)."""
    x = np.array(values, dtype=np.float64).reshape(-1)
    if not encoding.rotated:
        return x
    run = encoding.rotation
    whole = x.size // run * run
    _hadamard_runs(x[:whole], run)
    x[:whole] *= 1.0 / np.sqrt(float(run))
    x[:whole][_negative_signs(encoding.rotation_seed, whole)] *= -1.0
    return x


def _round_stochastically(y: np.ndarray, stream: int, start: int) -> np.ndarray:
    """floor(y), plus 1 where the coordinate's uniform number falls below y's fraction."""
    low = np.floor(y)
    with np.errstate(invalid="ignore"):  # inf - inf: compares false, stays low
        return low + (rounding_uniforms(stream, y.size, start) < y - low)


def _not_finite(position: int, value: float):
    return invalid_argument(f"value {value!r} at position {position} is not finite; an encoded field takes "
                            f"finite values")


def _widened(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values).reshape(-1)
    if values.dtype.kind != "f":
        raise invalid_argument(f"cannot encode {values.dtype} values: encoded fields hold floating values")
    return values


def _quantize(x: np.ndarray, encoding: ValueEncoding, stream: int, out: np.ndarray) -> None:
    n, size, b = x.size, encoding.block_size, encoding.bits
    levels = float(encoding.max_code)
    blocks = encoding.blocks(n)
    scales = out[:blocks * 4].view("<f4")
    codes = out[blocks * 4:]
    slab = max(size, _SLAB // size * size)  # whole blocks, so a multiple of 8 coordinates: whole code bytes
    per_byte = 8 // b
    shifts = (np.arange(per_byte, dtype=np.uint8) * b).astype(np.uint8)
    for begin in range(0, n, slab):
        end = min(n, begin + slab)
        count, first_block = end - begin, begin // size
        slab_blocks = -(-count // size)
        padded = np.zeros(slab_blocks * size)
        padded[:count] = x[begin:end]
        table = padded.reshape(slab_blocks, size)
        with np.errstate(over="ignore", invalid="ignore"):
            largest = np.abs(table).max(axis=1)
            s = largest.astype(np.float32)
            low = s.astype(np.float64) < largest
            s[low] = np.nextafter(s[low], np.float32(np.inf))
        bad = np.flatnonzero(~np.isfinite(s))
        if bad.size:  # the first block with a non-finite value or a too large scale, as C++ finds it
            k = int(bad[0])
            in_block = np.flatnonzero(~np.isfinite(table[k]))
            if in_block.size:
                i = int(in_block[0])
                raise _not_finite(begin + k * size + i, float(table[k, i]))
            raise invalid_argument(f"block {first_block + k}'s largest |value| {float(largest[k])!r} does not fit "
                                   f"a float32 scale")
        scales[first_block:first_block + slab_blocks] = s
        sd = s.astype(np.float64)
        positive = sd > 0
        factor = np.zeros_like(sd)
        factor[positive] = levels / (2.0 * sd[positive])
        # y = (x + s) * L / (2 s), in this order of float64 operations (as C++ does). A
        # block of scale 0 holds zeros only: y = 0, code 0.
        y = ((table + sd[:, None]) * factor[:, None]).reshape(-1)[:count]
        q = np.clip(_round_stochastically(y, stream, begin), 0.0, levels).astype(np.uint8)
        if per_byte == 1:
            codes[begin:end] = q
        else:
            packed = np.zeros(-(-count // per_byte) * per_byte, np.uint8)
            packed[:count] = q
            byte_begin = begin * b // 8
            packed = np.bitwise_or.reduce(packed.reshape(-1, per_byte) << shifts, axis=1)
            codes[byte_begin:byte_begin + packed.size] = packed


def _discretize(x: np.ndarray, encoding: ValueEncoding, stream: int, out: np.ndarray) -> None:
    n, c = x.size, encoding.scale
    lowest, highest = -2.0 ** (encoding.bits - 1), 2.0 ** (encoding.bits - 1) - 1
    integers = out.view(_DISCRETIZED_INTS[encoding.bits])
    for begin in range(0, n, _SLAB):
        end = min(n, begin + _SLAB)
        v = x[begin:end].astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            q = _round_stochastically(v / c, stream, begin)
            bad = np.flatnonzero(~(np.isfinite(v) & (q >= lowest) & (q <= highest)))
        if bad.size:
            i = int(bad[0])
            value = float(v[i])
            if not np.isfinite(value):
                raise _not_finite(begin + i, value)
            steps = int(q[i]) if np.isfinite(q[i]) else float(q[i])
            raise invalid_argument(
                f"value {value!r} at position {begin + i} is {steps} steps of {c!r}, outside the "
                f"{encoding.bits}-bit range [{int(lowest)}, {int(highest)}] of the field's discretized encoding; "
                f"clip the update or declare a larger scale")
        integers[begin:end] = q


def encode_array(values: np.ndarray, encoding: ValueEncoding, stream: int) -> np.ndarray:
    """encode(), as a uint8 array (no copy into bytes)."""
    if not encoding.encoded:
        raise invalid_argument("a plain field's values are sent as they are, not encoded")
    x = _widened(values)
    out = np.zeros(encoding.encoded_bytes(x.size), np.uint8)
    if encoding.rotated and not encoding.rotation_seed:
        raise invalid_argument("the field is rotated but its rotation seed is not set: encode with the aggregation's "
                               "spec as the server returned it (create's answer, the stream's welcome or get_task), "
                               "whose seed the root drew")
    if encoding.rotated:  # rotated in float64 first (non-finite values refused before), then quantized
        finite = np.isfinite(x)
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            raise _not_finite(i, float(x[i]))
        x = rotate(x, encoding)
    if encoding.kind == QUANTIZED:
        _quantize(x, encoding, stream, out)
    else:
        _discretize(x, encoding, stream, out)
    return out


def encode(values: np.ndarray, encoding: ValueEncoding, stream: int) -> bytes:
    """The VALUES section of a field in `encoding`: `values` (a floating array, already in
    the field's declared dtype; float16 and bfloat16-as-float32 are widened exactly)
    rounded stochastically with the field's random stream (rounding_stream). Quantized: per
    block, the float32 scales (the smallest float32 at or above the block's largest
    |value|), then the codes, b bits each from the lowest bit of each byte up. Discretized:
    little-endian b-bit integers. INVALID_ARGUMENT (local) for a NaN or Inf, naming its
    position, or a value whose integer falls outside the discretized range."""
    return encode_array(values, encoding, stream).tobytes()


def decode(data: bytes, encoding: ValueEncoding, n: int) -> np.ndarray:
    """The float64 values an encoded section of `n` values stands for (what the server adds
    up: for a rotated encoding, still rotated; unrotate() gives the values themselves)."""
    if not encoding.encoded:
        raise invalid_argument("a plain field's values are not encoded")
    raw = np.frombuffer(data, np.uint8)
    if raw.size != encoding.encoded_bytes(n):
        raise invalid_argument(f"an encoded section of {n} values in {encoding} takes {encoding.encoded_bytes(n)} "
                               f"bytes, not {raw.size}")
    if encoding.kind == DISCRETIZED:
        return raw.view(_DISCRETIZED_INTS[encoding.bits]).astype(np.float64) * encoding.scale
    blocks, b = encoding.blocks(n), encoding.bits
    scales = raw[:blocks * 4].view("<f4").astype(np.float64)
    codes = raw[blocks * 4:]
    if b == 8:
        q = codes.astype(np.float64)
    else:
        shifts = (np.arange(8 // b, dtype=np.uint8) * b).astype(np.uint8)
        q = ((codes[:, None] >> shifts) & np.uint8(encoding.max_code)).reshape(-1)[:n].astype(np.float64)
    return np.repeat(scales, encoding.block_size)[:n] * (q * (2.0 / encoding.max_code) - 1.0)


def encode_for_field(values: np.ndarray, encoding: ValueEncoding, seed: int, field: int,
                     what: Optional[str] = None) -> np.ndarray:
    """A field's encoded section (uint8 array) for an update sent with `seed`; refusals
    are prefixed with `what` (the field's description)."""
    try:
        return encode_array(values, encoding, rounding_stream(seed, field))
    except FedaggError as error:
        if what is None:
            raise
        raise invalid_argument(f"{what}: {error.message}") from None
