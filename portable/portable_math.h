// Element arithmetic shared by the host and device code of the portable reducers:
// float16 / bfloat16 decoding, wrapping int64 addition, max/min with NaN propagation, and
// the SplitMix64 mixing that draws the encodings' random numbers and rotation signs, each
// callable from a CUDA kernel and from plain C++ (C++17, no Thrust, no Abseil).
// They match service/core/half_float.h bit for bit; the CPU kernels
// (service/core/cpu_kernels.h) use Extreme from here, the encoder and the rotation
// (service/core/value_encoder.h, rotation.h) Mix64, RotationSignNegative and the
// transform's butterflies.
#ifndef FEDAGG_PORTABLE_PORTABLE_MATH_H_
#define FEDAGG_PORTABLE_PORTABLE_MATH_H_

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define FEDAGG_HOST_DEVICE __host__ __device__
#else
#define FEDAGG_HOST_DEVICE
#endif

namespace fedagg::portable {

// 16-bit transport values as raw bits.
struct Half {
  uint16_t bits;
};
struct BHalf {
  uint16_t bits;
};

FEDAGG_HOST_DEVICE inline float FloatFromBits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

FEDAGG_HOST_DEVICE inline float Decode(BHalf v) { return FloatFromBits(uint32_t{v.bits} << 16); }

FEDAGG_HOST_DEVICE inline float Decode(Half v) {
  const uint32_t sign = uint32_t{static_cast<uint32_t>(v.bits & 0x8000u)} << 16;
  const uint32_t exponent = (v.bits >> 10) & 0x1fu;
  const uint32_t mantissa = v.bits & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;  // 2^-24
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return FloatFromBits(sign | 0x7f800000u | (mantissa << 13));
  return FloatFromBits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

template <typename T>
FEDAGG_HOST_DEVICE inline T Decode(T v) {
  return v;
}

template <typename Acc, typename In>
FEDAGG_HOST_DEVICE inline Acc Widen(In x) {
  return static_cast<Acc>(Decode(x));
}

// Entry k of an array of transport values, widened: for Thrust's transform iterators.
template <typename Acc, typename In>
struct WidenEntry {
  const In* values;
  FEDAGG_HOST_DEVICE Acc operator()(int64_t k) const { return Widen<Acc>(values[k]); }
};

// Wraps modulo 2^64 for int64 (as the CPU backend does); IEEE addition otherwise.
template <typename Acc>
FEDAGG_HOST_DEVICE inline Acc Add(Acc a, Acc b) {
  if constexpr (std::is_integral_v<Acc>) {
    return static_cast<Acc>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}

// The better of a running extreme and a new value; a NaN wins and stays. Selects without
// branches, so CPU loops over it vectorise.
template <bool kMax, typename Acc>
FEDAGG_HOST_DEVICE inline Acc Extreme(Acc running, Acc x) {
  const Acc best = (kMax ? (x > running) : (x < running)) ? x : running;
  if constexpr (std::is_floating_point_v<Acc>) {
    const Acc with_new_nan = (x != x) ? x : best;
    return (running != running) ? running : with_new_nan;
  } else {
    return best;
  }
}

// SplitMix64's output function.
FEDAGG_HOST_DEVICE inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;

// Whether coordinate i's sign is negative in the rotation `seed` draws
// (service/core/rotation.h; docs/PROTOCOL.md 3.3.1).
FEDAGG_HOST_DEVICE inline bool RotationSignNegative(uint64_t seed, int64_t i) {
  return (Mix64(Mix64(seed) + (static_cast<uint64_t>(i) + 1) * kGoldenGamma) >> 63) != 0;
}

// The rotation's Hadamard transform (service/core/rotation.h), one butterfly at a time, so
// that the host and a device compute every value with the same operations in the same
// order: the stage of half-width h (h = 1, 2, ..., R/2 for runs of R values, laid one after
// another) turns each pair (i, i + h), i in the first half of a group of 2h, into
// (a + b, a - b).
FEDAGG_HOST_DEVICE inline void HadamardButterfly(double* x, int64_t i, int64_t h) {
  const double a = x[i], b = x[i + h];
  x[i] = a + b;
  x[i + h] = a - b;
}

// Coordinate i rotated back once its run is transformed: scaled by `norm` (1 / sqrt(R)),
// then negated where the rotation's sign is.
FEDAGG_HOST_DEVICE inline double UnrotatedValue(double transformed, double norm, uint64_t seed, int64_t i) {
  const double scaled = transformed * norm;
  return RotationSignNegative(seed, i) ? -scaled : scaled;
}

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_PORTABLE_MATH_H_
