// Stochastic-rounding encoders of the quantized and discretized wire encodings.
#include "service/core/value_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_kernels.h"
#include "service/core/rotation.h"

namespace fedagg {
namespace {

absl::Status NotFinite(int64_t i, double x) {
  return absl::InvalidArgumentError(absl::StrCat("value ", x, " at position ", i,
                                                 " is not finite; an encoded field takes finite values"));
}

// floor(y), plus 1 when the coordinate's uniform number falls below y's fraction.
inline double RoundStochastically(double y, uint64_t stream, int64_t i) {
  const double low = std::floor(y);
  return RoundingUniform(stream, i) < y - low ? low + 1 : low;
}

template <typename T>
absl::Status Quantize(const ValueEncoding& encoding, const T* x, int64_t n, uint64_t stream,
                      absl::Span<std::byte> out) {
  const int64_t blocks = encoding.Blocks(n);
  uint8_t* codes = reinterpret_cast<uint8_t*>(out.data()) + blocks * static_cast<int64_t>(sizeof(float));
  std::memset(codes, 0, out.size() - static_cast<size_t>(blocks) * sizeof(float));
  const double levels = static_cast<double>(encoding.MaxCode());
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t begin = k * encoding.block_size, end = std::min(n, begin + encoding.block_size);
    double largest = 0;
    for (int64_t i = begin; i < end; ++i) {
      const double v = cpu::Widen<double>(x[i]);
      if (!std::isfinite(v)) return NotFinite(i, v);
      largest = std::max(largest, std::abs(v));
    }
    float s = static_cast<float>(largest);
    if (static_cast<double>(s) < largest) s = std::nextafter(s, std::numeric_limits<float>::infinity());
    if (!std::isfinite(s)) {
      return absl::InvalidArgumentError(absl::StrCat("block ", k, "'s largest |value| ", largest,
                                                     " does not fit a float32 scale"));
    }
    std::memcpy(out.data() + k * static_cast<int64_t>(sizeof(float)), &s, sizeof(float));
    if (s == 0) continue;  // every code 0: the block decodes to zeros whatever they are
    const double sd = s, factor = levels / (2.0 * sd);
    for (int64_t i = begin; i < end; ++i) {
      const double y = (cpu::Widen<double>(x[i]) + sd) * factor;
      const double q = std::clamp(RoundStochastically(y, stream, i), 0.0, levels);
      const uint64_t bit = static_cast<uint64_t>(i) * static_cast<uint64_t>(encoding.bits);
      codes[bit >> 3] |= static_cast<uint8_t>(static_cast<uint32_t>(q) << (bit & 7));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Discretize(const ValueEncoding& encoding, const T* x, int64_t n, uint64_t stream,
                        absl::Span<std::byte> out) {
  const double lowest = -std::ldexp(1.0, encoding.bits - 1), highest = std::ldexp(1.0, encoding.bits - 1) - 1;
  for (int64_t i = 0; i < n; ++i) {
    const double v = cpu::Widen<double>(x[i]);
    if (!std::isfinite(v)) return NotFinite(i, v);
    const double q = RoundStochastically(v / encoding.scale, stream, i);
    if (!(q >= lowest && q <= highest)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value ", v, " at position ", i, " is ", q, " steps of ", encoding.scale,
          ", outside the ", encoding.bits, "-bit range [", lowest, ", ", highest,
          "] of the field's discretized encoding; clip the update or declare a larger scale"));
    }
    const int64_t integer = static_cast<int64_t>(q);
    std::byte* dst = out.data() + i * (encoding.bits / 8);
    switch (encoding.bits) {
      case 8: {
        const int8_t v8 = static_cast<int8_t>(integer);
        std::memcpy(dst, &v8, 1);
        break;
      }
      case 16: {
        const int16_t v16 = static_cast<int16_t>(integer);
        std::memcpy(dst, &v16, 2);
        break;
      }
      default: {
        const int32_t v32 = static_cast<int32_t>(integer);
        std::memcpy(dst, &v32, 4);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EncodeValues(const ValueEncoding& encoding, DType dtype, absl::Span<const std::byte> values,
                          uint64_t stream, absl::Span<std::byte> out) {
  if (!encoding.encoded() || !IsFloating(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot encode ", DTypeName(dtype), " values as ",
                                                   encoding.ToString()));
  }
  if (encoding.rotated() && encoding.rotation_seed == 0) {
    return absl::InvalidArgumentError(
        "the field is rotated but its rotation seed is not set: encode with the aggregation's spec as the server "
        "returned it (CreateAggregation's answer, Welcome or GetTask), whose seed the root drew");
  }
  const int64_t n = static_cast<int64_t>(values.size() / DTypeSize(dtype));
  if (out.size() != encoding.EncodedBytes(n)) {
    return absl::InvalidArgumentError(absl::StrCat("an encoded section of ", n, " values takes ",
                                                   encoding.EncodedBytes(n), " bytes, not ", out.size()));
  }
  if (n == 0) return absl::OkStatus();  // a sparse update with no entries: an empty section
  return cpu::DispatchDType(dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* x = reinterpret_cast<const T*>(values.data());
    if (encoding.rotated()) {  // rotated in float64 first, then quantized
      std::vector<double> rotated(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        rotated[static_cast<size_t>(i)] = cpu::Widen<double>(x[i]);
        if (!std::isfinite(rotated[static_cast<size_t>(i)])) return NotFinite(i, rotated[static_cast<size_t>(i)]);
      }
      Rotate(encoding, absl::MakeSpan(rotated));
      return Quantize(encoding, rotated.data(), n, stream, out);
    }
    return encoding.quantized() ? Quantize(encoding, x, n, stream, out) : Discretize(encoding, x, n, stream, out);
  });
}

}  // namespace fedagg
