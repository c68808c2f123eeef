"""Value encodings in the Python package, without a server: spellings, sizes, the
vectorised stochastic-rounding encoder against a scalar transcription of the C++ one
(service/core/value_encoder.cc), error bounds, unbiasedness over seeds, refusals, the
spec and update paths of encoded fields, and golden bytes that the C++ tests assert too."""
import math
import struct

import crc32c
import numpy as np
import pytest

import fedagg
from fedagg import value_encoding as ve
from fedagg.update_encoder import encode_update
from fedagg.update_input import prepare_update
from fedagg.v1 import aggregation_pb2, types_pb2

F = fedagg.Field
E = fedagg.ValueEncoding
rng = np.random.default_rng(11)
MASK = (1 << 64) - 1


# A scalar transcription of value_encoder.cc, one coordinate at a time in Python floats
# (IEEE doubles, as C++'s), to hold the vectorised encoder to.
def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def uniform(stream, i):
    return (mix64((stream + (i + 1) * 0x9E3779B97F4A7C15) & MASK) >> 11) * 2.0 ** -53


def round_stochastically(y, stream, i):
    low = float(math.floor(y))
    return low + 1 if uniform(stream, i) < y - low else low


def reference_encode(values, encoding, stream):
    x = [float(v) for v in np.asarray(values).reshape(-1)]
    n, b = len(x), encoding.bits
    if encoding.kind == "discretized":
        lowest, highest = -2.0 ** (b - 1), 2.0 ** (b - 1) - 1
        out = b""
        for i, v in enumerate(x):
            assert math.isfinite(v)
            q = round_stochastically(v / encoding.scale, stream, i)
            assert lowest <= q <= highest
            out += struct.pack({8: "<b", 16: "<h", 32: "<i"}[b], int(q))
        return out
    levels = float((1 << b) - 1)
    size = encoding.block_size
    scales, codes = b"", bytearray((n * b + 7) // 8)
    for begin in range(0, n, size):
        end = min(n, begin + size)
        largest = 0.0
        for v in x[begin:end]:
            assert math.isfinite(v)
            largest = max(largest, abs(v))
        s = np.float32(largest)
        if float(s) < largest:
            s = np.nextafter(s, np.float32(np.inf))
        scales += struct.pack("<f", s)
        if s == 0:
            continue
        sd = float(s)
        factor = levels / (2.0 * sd)
        for i in range(begin, end):
            q = min(max(round_stochastically((x[i] + sd) * factor, stream, i), 0.0), levels)
            codes[i * b >> 3] |= int(q) << (i * b & 7)
    return scales + bytes(codes)


def golden_values():
    return np.array([(((i * 7919) % 1000) - 500) / 37.0 for i in range(1000)]).astype(np.float32)


# The golden vector: encode(golden_values(), e, rounding_stream(42, 0)) (the stream is
# 0xBDD732262FEB6E95). The C++ encoder must write the same bytes; its tests assert these
# constants too. Per encoding: the section's size, its CRC-32C, its first 16 bytes (a
# quantized section's are its first scales) and the first 16 bytes of its codes.
GOLDEN_STREAM = 0xBDD732262FEB6E95
GOLDEN = {
    "quantized:8": (1016, 0x5416181E, "5a375841a6c85741a6c857413eeb5641", "00ead6c1ac98836e5a45301c07f2dcc8"),
    "quantized:4/64": (564, 0xA0C81CB2, "5a375841239f5541eb0653416f305541", "d0cd9a684623e1cd9b784623e1cd9b78"),
    "quantized:1": (141, 0xE2D71B83, "5a375841a6c85741a6c857413eeb5641", "6ca18b1ec0033cccc778a00578003bf1"),
    "discretized:16@0.01": (2000, 0xD5F052E8, "b9fa6c049203b702db01010126004bff",
                            "b9fa6c049203b702db01010126004bff"),
}


def test_golden_vector():
    x = golden_values()
    assert x[:4].tobytes().hex() == "5a3758c16f303541832912413045de40"  # -500/37, 419/37, ...
    stream = ve.rounding_stream(42, 0)
    assert stream == GOLDEN_STREAM
    for text, (size, crc, prefix, codes) in GOLDEN.items():
        encoding = E.parse(text)
        data = ve.encode(x, encoding, stream)
        first_code = encoding.blocks(x.size) * 4
        print(f"{text}: {len(data)} bytes, crc32c 0x{crc32c.crc32c(data):08X}, first 16 bytes {data[:16].hex()}, "
              f"first 16 code bytes {data[first_code:first_code + 16].hex()}")
        assert data == reference_encode(x, encoding, stream), text
        assert (len(data), crc32c.crc32c(data)) == (size, crc), text
        assert data[:16].hex() == prefix and data[first_code:first_code + 16].hex() == codes, text


# Rotated encodings of the golden vector (rotation seeds 7 and 123456789, rounding stream
# as above): the rotation is computed in float64 the same way in both libraries, and
# service/core's value_encoding_test asserts the same CRCs.
ROTATED_GOLDEN = [((8, 256, 64, 7), 0x611FBC26), ((4, 64, 256, 123456789), 0x2D438B21)]


def test_rotated_golden_vector():
    x = golden_values()
    for (bits, block, rotation, seed), crc in ROTATED_GOLDEN:
        encoding = E.quantized(bits, block, rotation, seed)
        data = ve.encode(x, encoding, GOLDEN_STREAM)
        assert crc32c.crc32c(data) == crc, str(encoding)


def test_rotation_is_undone_and_leaves_the_short_last_run():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(64 * 5 + 17)
    encoding = E.quantized(8, 256, 64, 99)
    y = ve.rotate(x, encoding)
    assert np.isclose(np.sum(y[:320] ** 2), np.sum(x[:320] ** 2), rtol=1e-12)  # orthonormal
    assert np.array_equal(y[320:], x[320:]) and not np.allclose(y[:320], x[:320])
    assert np.allclose(ve.unrotate(y, encoding), x, rtol=0, atol=1e-12)
    assert not np.allclose(ve.rotate(x, E.quantized(8, 256, 64, 100)), y)  # other signs
    assert np.array_equal(ve.rotate(x, E.quantized(8)), x)  # no rotation: a copy
    with pytest.raises(fedagg.FedaggError, match="rotation seed is not set"):  # the spec must be the server's
        ve.encode(x, E.quantized(8, 256, 64), 3)
    # A rotated update decodes (then unrotates) to within the rotated levels of the values.
    data = ve.encode(x, encoding, 3)
    decoded = ve.decode(data, encoding, x.size)
    assert np.all(np.abs(decoded - y) <= _quantized_steps(y, encoding, data) * (1 + 1e-12))


def test_the_random_streams_are_splitmix64():
    # SplitMix64 seeded with 0 gives 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f:
    # the streams of fields 0, 1, 2 under seed 0 are those outputs.
    assert [ve.rounding_stream(0, f) for f in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
                                                            0x06C45D188009454F]
    assert ve.rounding_stream(MASK, 5) == mix64((MASK + 6 * 0x9E3779B97F4A7C15) & MASK)
    assert ve.rounding_stream(-1, 5) == ve.rounding_stream(MASK, 5)  # taken modulo 2^64
    for stream in (0, 1, MASK, ve.rounding_stream(7, 3)):
        u = ve.rounding_uniforms(stream, 100)
        assert u.dtype == np.float64
        assert list(u) == [uniform(stream, i) for i in range(100)]
        assert list(ve.rounding_uniforms(stream, 10, start=90)) == list(u[90:])
    u = ve.rounding_uniforms(12345, 1 << 16)
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01


@pytest.mark.parametrize("text", ["quantized:1", "quantized:2/8", "quantized:4/24", "quantized:8", "quantized:8/1000",
                                  "discretized:8@0.25", "discretized:16@0.001", "discretized:32@1e-06"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_the_vectorised_encoder_writes_what_the_scalar_one_does(text, dtype):
    encoding = E.parse(text)
    for n in (1, 7, 8, 9, 255, 257, 1029):
        x = rng.normal(size=n) * 10.0 ** rng.uniform(-3, 1, size=n)
        if encoding.kind == "discretized":
            x = np.clip(x, -100 * encoding.scale, 100 * encoding.scale)
        x = x.astype(dtype)
        x[rng.integers(0, n, n // 5)] = 0  # zeros, and (n = 1..) whole blocks of them below
        if n >= 255:
            x[:24] = 0
        stream = ve.rounding_stream(int(rng.integers(0, 1 << 63)), int(rng.integers(0, 8)))
        data = ve.encode(x, encoding, stream)
        assert len(data) == encoding.encoded_bytes(n)
        assert data == reference_encode(x, encoding, stream), (text, dtype, n)


def test_slabs_do_not_change_the_bytes(monkeypatch):
    """Large fields are encoded a slab of whole blocks at a time: the bytes are the same
    whatever the slab."""
    x = rng.normal(size=5000).astype(np.float32)
    for text in ("quantized:1/24", "quantized:2", "quantized:4/40", "quantized:8/8", "discretized:16@0.001"):
        whole = ve.encode(x, E.parse(text), 99)
        monkeypatch.setattr(ve, "_SLAB", 100)
        assert ve.encode(x, E.parse(text), 99) == whole, text
        monkeypatch.undo()


def test_a_million_coordinates():
    x = rng.normal(size=(1 << 20) + 37).astype(np.float32)
    for text in ("quantized:8", "quantized:4/24", "quantized:1", "discretized:32@1e-05"):
        encoding = E.parse(text)
        data = ve.encode(x, encoding, 5)
        assert len(data) == encoding.encoded_bytes(x.size)
        decoded = ve.decode(data, encoding, x.size)
        step = _quantized_steps(x, encoding, data) if encoding.kind == "quantized" else encoding.scale
        assert np.all(np.abs(decoded - x) <= step * (1 + 1e-12)), text


def test_spellings_round_trip():
    cases = {
        "plain": E(), "none": E(),
        "quantized:8": E("quantized", 8, 256), "quantized:4/512": E("quantized", 4, 512),
        "quantized:1/8": E("quantized", 1, 8), "quantized:2/65536": E("quantized", 2, 65536),
        "quantized:8/256": E("quantized", 8, 256),
        "discretized:16@0.001": E("discretized", 16, 0, 0.001), "discretized:8@1e-05": E("discretized", 8, 0, 1e-5),
        "discretized:32@2.5": E("discretized", 32, 0, 2.5), "discretized:32@3": E("discretized", 32, 0, 3.0),
        "quantized:8+rotation:4096": E("quantized", 8, 256, 0.0, 4096),
        "quantized:2/64+rotation:8": E("quantized", 2, 64, 0.0, 8),
    }
    for text, encoding in cases.items():
        parsed = E.parse(text)
        assert parsed == encoding, text
        assert E.parse(str(parsed)) == parsed
        assert E.from_proto(parsed.to_proto()) == parsed
        assert E.of(text) == E.of(parsed) == parsed
    assert str(E.parse("quantized:8")) == "quantized:8" and str(E.parse("quantized:8/256")) == "quantized:8"
    assert str(E.parse("quantized:4/512")) == "quantized:4/512"
    assert str(E.parse("discretized:16@0.001")) == "discretized:16@0.001" and str(E()) == "plain"
    assert str(E.discretized(16, 0.1 + 0.2)) == "discretized:16@0.30000000000000004"  # repr: exact
    assert E.quantized(4) == E.parse("quantized:4") and E.discretized(8, 0.5) == E.parse("discretized:8@0.5")
    assert E.of(None) == E() and not E().encoded and E.parse("quantized:1").encoded
    # The wire: a quantized block size of 0 is the default; plain is an empty message.
    assert E.from_proto(types_pb2.FieldEncoding(kind=types_pb2.FieldEncoding.QUANTIZED, bits=2)) == E.quantized(2)
    assert E.from_proto(types_pb2.FieldEncoding()) == E()
    proto = E.parse("discretized:16@0.001").to_proto()
    assert (proto.kind, proto.bits, proto.scale) == (types_pb2.FieldEncoding.DISCRETIZED, 16, 0.001)


@pytest.mark.parametrize("text, message", [
    ("quantized:3", "takes 1, 2, 4 or 8 bits a coordinate, not 3"),
    ("quantized:16", "takes 1, 2, 4 or 8 bits a coordinate, not 16"),
    ("quantized:8/12", "block size must be a multiple of 8 in [8, 65536] (default 256), not 12"),
    ("quantized:8/0", "not 0"),
    ("quantized:8/65544", "not 65544"),
    ("quantized:8/", "has no valid block size"),
    ("quantized:x", "has no valid bit count"),
    ("quantized:", "has no valid bit count"),
    ("quantized:1_0", "has no valid bit count"),
    ("discretized:16", "has no @SCALE"),
    ("discretized:12@0.1", "takes 8, 16 or 32 bits a coordinate, not 12"),
    ("discretized:16@0", "must be finite and > 0, not 0.0"),
    ("discretized:16@-1", "must be finite and > 0, not -1.0"),
    ("discretized:16@inf", "must be finite and > 0, not inf"),
    ("discretized:16@nan", "must be finite and > 0"),
    ("discretized:16@", "has no valid scale"),
    ("discretized:16@ 1", "has no valid scale"),
    ("discretized:@1", "has no valid bit count"),
    ("quantized:8+rotation:1000", "rotation must be a power of two in [8, 65536] (0: none), not 1000"),
    ("quantized:8+rotation:4", "not 4"),
    ("quantized:8+rotation:131072", "not 131072"),
    ("quantized:8+rotation:", "has no valid rotation size"),
    ("Quantized:8", "is not an encoding; write plain, quantized:BITS[/BLOCK]"),
    ("", "is not an encoding"),
])
def test_bad_spellings_are_refused(text, message):
    with pytest.raises(fedagg.FedaggError) as refused:
        E.parse(text)
    assert refused.value.code_name == "INVALID_ARGUMENT" and refused.value.local
    assert message in refused.value.message, refused.value.message


def test_encoded_bytes():
    assert E.parse("quantized:8").encoded_bytes(1000) == 4 * 4 + 1000
    assert E.parse("quantized:4/64").encoded_bytes(1000) == 16 * 4 + 500
    assert E.parse("quantized:1").encoded_bytes(1000) == 4 * 4 + 125
    assert E.parse("quantized:1").encoded_bytes(1001) == 4 * 4 + 126
    assert E.parse("quantized:2/8").encoded_bytes(9) == 2 * 4 + 3
    assert E.parse("quantized:8").encoded_bytes(256) == 4 + 256
    assert E.parse("quantized:8").encoded_bytes(257) == 8 + 257
    assert E.parse("quantized:8").encoded_bytes(0) == 0
    assert E.parse("discretized:8@1").encoded_bytes(1000) == 1000
    assert E.parse("discretized:16@1").encoded_bytes(1000) == 2000
    assert E.parse("discretized:32@1").encoded_bytes(3) == 12
    with pytest.raises(ValueError):
        E().encoded_bytes(3)


def _quantized_steps(x, encoding, data):
    """Per coordinate: the step 2 s_k / L of its block, from the scales in `data`."""
    scales = np.frombuffer(data[:encoding.blocks(x.size) * 4], "<f4").astype(np.float64)
    return np.repeat(scales, encoding.block_size)[:x.size] * 2 / encoding.max_code


@pytest.mark.parametrize("text", ["quantized:1", "quantized:2", "quantized:4/64", "quantized:8", "quantized:8/8"])
def test_quantized_values_are_within_one_step(text):
    encoding = E.parse(text)
    x = (rng.normal(size=3000) * np.repeat(10.0 ** rng.uniform(-4, 4, size=30), 100)).astype(np.float32)
    x[512:768] = 0  # a block of zeros: scale 0, codes 0, decoded 0
    data = ve.encode(x, encoding, ve.rounding_stream(3, 1))
    scales = np.frombuffer(data[:encoding.blocks(x.size) * 4], "<f4")
    for k, s in enumerate(scales):  # the smallest float32 at or above the block's largest |value|
        largest = np.abs(x[k * encoding.block_size:(k + 1) * encoding.block_size].astype(np.float64)).max()
        assert s >= largest and (s == 0 or np.nextafter(s, np.float32(0)) < largest)
    decoded = ve.decode(data, encoding, x.size)
    step = _quantized_steps(x, encoding, data)
    assert np.all(np.abs(decoded - x) <= step * (1 + 1e-12)), text
    assert np.all(decoded[512:768] == 0)
    # +-s are levels L and 0: never rounded away.
    edge = np.float32([1.0, -1.0, 0.5, -0.25] * 4)
    np.testing.assert_allclose(ve.decode(ve.encode(edge, encoding, 9), encoding, edge.size)[:2], [1.0, -1.0],
                               rtol=0, atol=1e-15)


@pytest.mark.parametrize("text", ["discretized:8@0.5", "discretized:16@0.001", "discretized:32@3e-09"])
def test_discretized_values_are_within_one_step(text):
    encoding = E.parse(text)
    x = rng.uniform(-100, 100, size=2000) * encoding.scale
    for dtype in (np.float64, np.float32, np.float16):
        values = x.astype(dtype)
        decoded = ve.decode(ve.encode(values, encoding, 77), encoding, x.size)
        assert np.all(np.abs(decoded - values) <= encoding.scale * (1 + 1e-12)), (text, dtype)
    # Whole steps are exact.
    steps = np.arange(-100, 101, dtype=np.float64)
    np.testing.assert_array_equal(ve.decode(ve.encode(steps * 0.5, E.parse("discretized:8@0.5"), 1),
                                            E.parse("discretized:8@0.5"), steps.size), steps * 0.5)


@pytest.mark.parametrize("text", ["quantized:1", "quantized:4/64", "quantized:8", "discretized:8@0.01",
                                  "discretized:16@0.003"])
def test_stochastic_rounding_is_unbiased(text):
    """The mean over 2000 seeds of the decoded values is within 5 standard errors of x at
    every coordinate (a rounding to a step of width d has variance at most d^2 / 4)."""
    encoding = E.parse(text)
    x = np.clip(rng.normal(size=4096) * 0.3, -1, 1).astype(np.float32)  # within discretized:8@0.01's range
    seeds = 2000
    total = np.zeros(x.size)
    for seed in range(seeds):
        data = ve.encode(x, encoding, ve.rounding_stream(seed, 0))
        total += ve.decode(data, encoding, x.size)
    mean = total / seeds
    step = _quantized_steps(x, encoding, data) if encoding.kind == "quantized" else encoding.scale
    standard_error = np.sqrt(step ** 2 / 4 / seeds)
    error = np.abs(mean - x)
    assert np.all(error <= 5 * standard_error + 1e-9 * step), (text, np.max(error / standard_error))
    # ... and not by luck of a wide bound: the errors look like rounding noise.
    assert np.mean(error) < 2 * np.mean(standard_error)


def test_non_finite_values_and_out_of_range_integers_are_refused():
    for text in ("quantized:8", "quantized:2/8", "discretized:16@0.01"):
        for bad in (np.nan, np.inf, -np.inf):
            x = np.zeros(300, np.float32)
            x[257] = bad
            with pytest.raises(fedagg.FedaggError) as refused:
                ve.encode(x, E.parse(text), 1)
            assert refused.value.code_name == "INVALID_ARGUMENT" and refused.value.local
            assert (f"value {float(bad)!r} at position 257 is not finite; an encoded field takes finite values"
                    in refused.value.message), refused.value.message
    with pytest.raises(fedagg.FedaggError) as range_:
        ve.encode(np.float64([0, 1.5, 0.5, 400.0]), E.parse("discretized:16@0.01"), 1)
    assert ("value 400.0 at position 3 is 40000 steps of 0.01, outside the 16-bit range [-32768, 32767] of "
            "the field's discretized encoding; clip the update or declare a larger scale") in range_.value.message
    with pytest.raises(fedagg.FedaggError) as low:
        ve.encode(np.float32([-1.29]), E.parse("discretized:8@0.01"), 1)
    assert "is -129 steps of 0.01, outside the 8-bit range [-128, 127]" in low.value.message, low.value.message
    with pytest.raises(fedagg.FedaggError) as huge:  # v / scale overflows: inf steps
        ve.encode(np.float64([1e300]), E.parse("discretized:32@1e-300"), 1)
    assert "is inf steps of 1e-300" in huge.value.message
    # The edges of the range pass: -128 and 127 whole steps.
    assert ve.encode(np.float32([-128, 127]), E.parse("discretized:8@1"), 1) == struct.pack("<bb", -128, 127)
    # float64 values beyond float32: no float32 scale holds them.
    with pytest.raises(fedagg.FedaggError) as scale:
        ve.encode(np.float64([1.0] * 8 + [1e39]), E.parse("quantized:8/8"), 1)
    assert "block 1's largest |value| 1e+39 does not fit a float32 scale" in scale.value.message
    with pytest.raises(fedagg.FedaggError) as integers:
        ve.encode(np.int32([1, 2]), E.parse("quantized:8"), 1)
    assert "cannot encode int32 values" in integers.value.message
    with pytest.raises(fedagg.FedaggError) as plain:
        ve.encode(np.float32([1, 2]), E(), 1)
    assert plain.value.local
    with pytest.raises(fedagg.FedaggError) as short:
        ve.decode(b"\0" * 5, E.parse("quantized:8"), 2)
    assert "takes 6 bytes, not 5" in short.value.message


def test_bits_are_packed_from_the_lowest_bit_up():
    # Values +-1 in blocks of scale 1 are exactly the lowest and highest levels.
    signs = np.float32([1, -1, -1, 1, 1, 1, -1, -1, 1, -1, -1, -1, -1, -1, -1, -1])
    one = np.float32(1.0).tobytes()
    assert ve.encode(signs, E.parse("quantized:1/8"), 3) == one * 2 + bytes([0b00111001, 0b00000001])
    assert ve.encode(signs, E.parse("quantized:2/8"), 3) == one * 2 + bytes([0b11000011, 0b00001111, 0x03, 0x00])
    assert ve.encode(signs[:8], E.parse("quantized:4/8"), 3) == one + bytes([0x0F, 0xF0, 0xFF, 0x00])
    assert ve.encode(signs[:8], E.parse("quantized:8/8"), 3) == one + bytes([255, 0, 0, 255, 255, 255, 0, 0])
    # n not a multiple of the codes a byte holds: the padding bits are zero.
    assert ve.encode(np.float32([1, 1, 1]), E.parse("quantized:1/8"), 3) == one + bytes([0b111])
    assert ve.encode(np.float32([1, 1, 1]), E.parse("quantized:4/8"), 3) == one + bytes([0xFF, 0x0F])


# --- The spec: Field(encoding=...) and Leaf.value_encoding --------------------------------

def test_build_spec_writes_the_encodings():
    proto = fedagg.build_spec("enc", {
        "q": F("float32", (10,), "federated_mean", encoding="quantized:8"),
        "d": F("float64", (3,), "federated_sum", encoding=E.discretized(16, 0.001)),
        "w": F("bfloat16", (4,), "federated_weighted_mean", encoding="quantized:4/512"),
        "h": ("float16", (2,), "federated_sum", False, "quantized:1"),
        "p": F("float32", (2,), "federated_max"),
    })
    kinds = [(i.encoding.kind, i.encoding.bits, i.encoding.block_size, i.encoding.scale) for i in proto.intrinsics]
    Q, D = types_pb2.FieldEncoding.QUANTIZED, types_pb2.FieldEncoding.DISCRETIZED
    assert kinds == [(Q, 8, 256, 0), (D, 16, 0, 0.001), (Q, 4, 512, 0), (Q, 1, 256, 0), (0, 0, 0, 0)]
    assert not proto.intrinsics[4].HasField("encoding")  # plain fields are written as before
    spec = fedagg.Spec(proto)
    assert [str(leaf.value_encoding) for leaf in spec.leaves] == [
        "quantized:8", "discretized:16@0.001", "quantized:4/512", "quantized:1", "plain"]
    assert [leaf.encoding for leaf in spec.leaves] == ["dense"] * 5  # the intrinsic's form, as before
    assert "q: float32[10] federated_mean quantized:8" in repr(spec)
    plain = fedagg.build_spec("plain", F("float32", (2,), "federated_sum", encoding="plain"))
    assert plain == fedagg.build_spec("plain", F("float32", (2,), "federated_sum"))


@pytest.mark.parametrize("field, options, message", [
    (F("int32", (3,), "federated_sum", encoding="quantized:8"), {},
     "field 'x' (int32[3], federated_sum) declares encoding quantized:8: only floating-point fields are encoded"),
    (F("int64", (), "federated_mean", encoding="discretized:16@1"), {}, "only floating-point fields are encoded"),
    (F("float32", (3,), "federated_max", encoding="quantized:8"), {},
     "field 'x' (float32[3], federated_max) declares encoding quantized:8: encoded values are exact only in "
     "expectation (stochastic rounding), which a sum or mean keeps but a maximum or minimum does not"),
    (F("float32", (3,), "federated_min", encoding="discretized:8@1"), {}, "send this field plain"),
    (F("float32", (3,), "federated_weighted_mean", encoding="discretized:16@0.01"), {},
     "a discretized field is summed exactly as integers, which a weight would break"),
    (F("float32", (3,), "sparse_weighted_mean", encoding="discretized:16@0.01"), {},
     "(float32[3], sparse_weighted_mean) declares encoding discretized:16@0.01: a discretized field is summed "
     "exactly as integers"),
    (F("float32", (3,), "federated_mean", encoding="quantized:8"), {"deterministic": True},
     "a deterministic aggregation sums exactly, and quantized values are decoded in floating point"),
    (F("float32", (3,), "federated_mean", encoding="quantized:5"), {},
     "field 'x': a quantized encoding takes 1, 2, 4 or 8 bits a coordinate, not 5"),
    (F("float32", (3,), "federated_mean", encoding="discretized:16@0"), {}, "must be finite and > 0"),
    (F("float32", (3,), "federated_mean", encoding=E("quantized", 8, 7)), {}, "block size must be a multiple of 8"),
    (F("float32", (3,), "federated_mean", encoding="gzip"), {}, "field 'x': encoding 'gzip' is not an encoding"),
    (F("float32", (3,), "federated_mean", encoding=8), {}, "an encoding is a string such as 'quantized:8'"),
])
def test_build_spec_refuses_encodings_a_field_cannot_take(field, options, message):
    with pytest.raises(fedagg.FedaggError) as refused:
        fedagg.build_spec("bad", {"x": field}, **options)
    assert refused.value.code_name == "INVALID_ARGUMENT" and refused.value.local
    assert message in refused.value.message, refused.value.message


def test_a_deterministic_aggregation_takes_discretized_fields():
    proto = fedagg.build_spec("det", {"d": F("float32", (3,), "federated_sum", encoding="discretized:32@1e-06")},
                              deterministic=True)
    assert fedagg.Spec(proto).leaves[0].value_encoding == E.discretized(32, 1e-6)


# --- The update path ----------------------------------------------------------------------

def _spec():
    return fedagg.Spec(fedagg.build_spec("upd", {
        "plain": F("float32", (5,), "federated_sum"),
        "q": F("float32", (300,), "federated_mean", encoding="quantized:4/64"),
        "b": F("bfloat16", (20,), "federated_sum", encoding="quantized:8"),
        "d": F("float64", (10,), "federated_sum", encoding="discretized:16@0.001"),
        "s": F("float32", (8,), "sparse_sum"),
    }))


def _update():
    return {"plain": np.float32([1, 2, 3, 4, 5]), "q": rng.normal(size=300).astype(np.float32),
            "b": np.float32(np.arange(20) - 10.0), "d": rng.uniform(-30, 30, 10), "s": ([1, 7], [2.0, 3.0])}


def test_updates_send_the_encoded_sections():
    spec, update = _spec(), _update()
    prepared = prepare_update(spec, update, seed=1234)
    assert prepared.seed == 1234
    assert prepared.fields[0].values.tobytes() == update["plain"].tobytes()
    for number, name in ((1, "q"), (2, "b"), (3, "d")):
        leaf = spec.leaves[number]
        field = prepared.fields[number]
        assert field.indices is None
        assert field.values.tobytes() == ve.encode(update[name], leaf.value_encoding, ve.rounding_stream(1234, number))
    # bfloat16: the values rounded to bfloat16 (here exact), widened, then encoded.
    np.testing.assert_allclose(ve.decode(prepared.fields[2].values.tobytes(), spec.leaves[2].value_encoding, 20),
                               update["b"], atol=2 * 10 / 255 + 1e-12)
    assert prepare_update(spec, update, seed=1234).fields[1].values.tobytes() == prepared.fields[1].values.tobytes()
    assert prepare_update(spec, update, seed=1235).fields[1].values.tobytes() != prepared.fields[1].values.tobytes()
    random_seeds = {prepare_update(spec, update).seed for _ in range(4)}
    assert len(random_seeds) == 4 and all(0 <= s < 1 << 64 for s in random_seeds)
    # On the wire: the header keeps the declared dtypes and nnz 0 for the dense fields; the
    # VALUES sections are the encoded bytes; the CRC-32C runs over them in order.
    requests = [aggregation_pb2.SubmitRequest.FromString(r)
                for r in encode_update(prepared, aggregation_pb2.SubmitRequest, 100, "c")]
    header = requests[0].header
    assert [f.dtype for f in header.fields] == [types_pb2.DTYPE_FLOAT32, types_pb2.DTYPE_FLOAT32,
                                                types_pb2.DTYPE_BFLOAT16, types_pb2.DTYPE_FLOAT64,
                                                types_pb2.DTYPE_FLOAT32]
    assert [f.nnz for f in header.fields] == [0, 0, 0, 0, 2]
    sections = {}
    for request in requests[1:-1]:
        key = (request.chunk.field, request.chunk.section)
        assert request.chunk.offset == len(sections.get(key, b""))
        sections[key] = sections.get(key, b"") + request.chunk.data
    values = aggregation_pb2.VALUES
    assert len(sections[(1, values)]) == E.parse("quantized:4/64").encoded_bytes(300) == 5 * 4 + 150
    assert len(sections[(2, values)]) == 4 + 20 and len(sections[(3, values)]) == 20
    wire_order = sorted(sections, key=lambda key: (key[0], key[1] != aggregation_pb2.INDICES))  # indices first
    ordered = b"".join(sections[key] for key in wire_order)
    assert requests[-1].end.crc32c == crc32c.crc32c(ordered)


def test_update_refusals_of_encoded_fields():
    spec, update = _spec(), _update()
    update["q"][17] = np.nan
    with pytest.raises(fedagg.FedaggError) as nan:
        prepare_update(spec, update)
    assert nan.value.local and nan.value.message == (
        "field 'q' (float32[300], federated_mean): value nan at position 17 is not finite; an encoded field "
        "takes finite values")
    update = _update()
    update["d"][4] = 40.0
    with pytest.raises(fedagg.FedaggError) as range_:
        prepare_update(spec, update, seed=0)
    assert range_.value.message.startswith("field 'd' (float64[10], federated_sum): value 40.0 at position 4 is "
                                           "40000 steps of 0.001, outside the 16-bit range [-32768, 32767]")
    update = _update()
    update["q"] = update["q"].astype(np.float64) + 0.1  # the cast rule comes first, as for plain fields
    with pytest.raises(fedagg.FedaggError) as lossy:
        prepare_update(spec, update)
    assert "the field declares float32" in lossy.value.message
    assert prepare_update(spec, update, allow_lossy_cast=True).fields[1].values.dtype == np.uint8
    for seed, message in ((-1, "seed -1 is outside [0, 2**64)"), (1 << 64, "is outside [0, 2**64)"),
                          (1.5, "seed must be an integer")):
        with pytest.raises(fedagg.FedaggError) as bad_seed:
            prepare_update(spec, _update(), seed=seed)
        assert bad_seed.value.local and message in bad_seed.value.message
    assert prepare_update(spec, _update(), seed=np.uint64(MASK)).seed == MASK


def test_unencoded_updates_are_unchanged():
    spec = fedagg.Spec(fedagg.build_spec("p", {"w": F("float32", (3,), "federated_sum")}))
    prepared = prepare_update(spec, {"w": np.float32([1, 2, 3])})
    assert prepared.seed is None and prepared.fields[0].values.dtype == np.float32
    assert prepare_update(spec, {"w": np.float32([1, 2, 3])}, seed=5).seed is None
