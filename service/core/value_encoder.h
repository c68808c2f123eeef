// The client side of the wire encodings (value_encoding.h): a field's values, in its
// declared dtype, written as a quantized or discretized section with stochastic
// rounding, so that a decoded value is the original one in expectation (unbiased).
// The rounding's random numbers come from a counter-based generator (SplitMix64's
// mixing function over (seed, field, coordinate)), so the same seed gives the same bytes
// in every client library: the Python package's fedagg.encoding writes byte for byte what
// this does (tests/python check it). Used by the C++ client library and fedagg-loadgen.
#ifndef FEDAGG_SERVICE_CORE_VALUE_ENCODER_H_
#define FEDAGG_SERVICE_CORE_VALUE_ENCODER_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "portable/portable_math.h"
#include "service/core/dtype.h"
#include "service/core/value_encoding.h"

namespace fedagg {

// SplitMix64's output function and increment (portable/portable_math.h, shared with the
// device code that draws a rotation's signs).
using portable::kGoldenGamma;
using portable::Mix64;

// The random stream of field `field` (its leaf index) of an update encoded with `seed`.
inline uint64_t RoundingStream(uint64_t seed, size_t field) {
  return Mix64(seed + (static_cast<uint64_t>(field) + 1) * kGoldenGamma);
}
// The uniform number in [0, 1) (a multiple of 2^-53) that rounds coordinate i.
inline double RoundingUniform(uint64_t stream, int64_t i) {
  return static_cast<double>(Mix64(stream + (static_cast<uint64_t>(i) + 1) * kGoldenGamma) >> 11) * 0x1p-53;
}

// Writes `values` (elements of `dtype`, a floating dtype) into `out`, which must hold
// encoding.EncodedBytes(n) bytes. Quantized: each block's scale is the smallest float32
// at or above its largest |value|; a value x becomes code q = floor(y) or floor(y) + 1,
// with y = (x + s) * (2^b - 1) / (2 s) and the upper one taken when the coordinate's
// uniform number is below y - floor(y); a rotated encoding rotates the values in float64
// first (rotation.h) and quantizes the rotated ones. Discretized: y = x / scale rounded
// the same way.
// INVALID_ARGUMENT (naming the position) for a NaN or Inf value, or an integer outside
// the discretized encoding's b-bit range (clip the update, or declare a larger scale); and
// for a rotated encoding without its seed (a spec not as the server returned it).
absl::Status EncodeValues(const ValueEncoding& encoding, DType dtype, absl::Span<const std::byte> values,
                          uint64_t stream, absl::Span<std::byte> out);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_VALUE_ENCODER_H_
