// Conversions from the 16-bit transport types (IEEE float16, bfloat16) to float32,
// and their finiteness tests. Header-only so the reduction loops can inline them.
#ifndef FEDAGG_SERVICE_CORE_HALF_FLOAT_H_
#define FEDAGG_SERVICE_CORE_HALF_FLOAT_H_

#include <bit>
#include <cstdint>

namespace fedagg {

// A float16 value as its raw bits; arithmetic happens after widening to float32.
struct Float16 {
  uint16_t bits;
};
// A bfloat16 value (the upper half of a float32) as its raw bits.
struct BFloat16 {
  uint16_t bits;
};

inline float ToFloat(BFloat16 v) { return std::bit_cast<float>(uint32_t{v.bits} << 16); }

inline float ToFloat(Float16 v) {
  // Re-bias the exponent and shift the mantissa; subnormals are scaled exactly by a
  // float multiply, and infinities / NaNs keep their payload.
  const uint32_t sign = uint32_t{v.bits & 0x8000u} << 16;
  const uint32_t exponent = (v.bits >> 10) & 0x1fu;
  const uint32_t mantissa = v.bits & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline bool IsFinite(Float16 v) { return (v.bits & 0x7c00u) != 0x7c00u; }
inline bool IsFinite(BFloat16 v) { return (v.bits & 0x7f80u) != 0x7f80u; }

// Rounds a float32 to the nearest float16 / bfloat16 (ties to even); used by clients and
// tests to produce transport values.
inline BFloat16 ToBFloat16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((bits >> 16) | 0x40u)};
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>(bits >> 16)};
}

inline Float16 ToFloat16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return Float16{static_cast<uint16_t>(sign | 0x7e00u)};  // NaN
  if (abs_bits >= 0x477ff000u) return Float16{static_cast<uint16_t>(sign | 0x7c00u)};  // overflow -> inf
  if (abs_bits < 0x38800000u) {  // result is subnormal or zero: let float rounding do it
    const float scaled = std::bit_cast<float>(abs_bits) * 0x1p24f;
    return Float16{static_cast<uint16_t>(sign | static_cast<uint16_t>(__builtin_nearbyintf(scaled)))};
  }
  uint32_t rounded = abs_bits + 0xfffu + ((abs_bits >> 13) & 1u);
  return Float16{static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13))};
}

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_HALF_FLOAT_H_
