// EncodedValues: read access to one field's quantized or discretized section as it
// arrived (ValueEncoding gives the layout): a block's scale, a coordinate's code or
// integer, a coordinate's value in float64. The validator, the float64 reference and the
// client's checks read sections through it; the CPU kernels that add encoded rows
// (cpu_decode_kernels.h) decode the same way, a block at a time.
#ifndef FEDAGG_SERVICE_CORE_ENCODED_VALUES_H_
#define FEDAGG_SERVICE_CORE_ENCODED_VALUES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/types/span.h"
#include "service/core/value_encoding.h"

namespace fedagg {

class EncodedValues {
 public:
  // `bytes` must hold encoding.EncodedBytes(elements) bytes (the validator checks it).
  EncodedValues(const ValueEncoding& encoding, absl::Span<const std::byte> bytes, int64_t elements)
      : encoding_(encoding),
        bytes_(bytes),
        elements_(elements),
        codes_(reinterpret_cast<const uint8_t*>(bytes.data()) +
               static_cast<size_t>(encoding.Blocks(elements)) * sizeof(float)) {}

  int64_t elements() const { return elements_; }
  int64_t blocks() const { return encoding_.Blocks(elements_); }
  // Quantized: the scale of block k.
  float scale(int64_t block) const {
    float s;
    std::memcpy(&s, bytes_.data() + block * static_cast<int64_t>(sizeof(float)), sizeof(float));
    return s;
  }
  // Quantized: the code of coordinate i, in [0, 2^bits).
  uint32_t code(int64_t i) const { return CodeAt(codes_, encoding_.bits, i); }
  // Discretized: the integer of coordinate i.
  int64_t integer(int64_t i) const { return IntegerAt(codes_, encoding_.bits, i); }
  // The value coordinate i stands for.
  double Decode(int64_t i) const {
    if (encoding_.discretized()) return static_cast<double>(integer(i)) * encoding_.scale;
    const double s = scale(i / encoding_.block_size);
    return s * (static_cast<double>(code(i)) * (2.0 / encoding_.MaxCode()) - 1.0);
  }

  // The code of coordinate i among codes of `bits` (1, 2, 4 or 8) bits packed from the
  // lowest bit of each byte up.
  static uint32_t CodeAt(const uint8_t* codes, int bits, int64_t i) {
    const uint64_t bit = static_cast<uint64_t>(i) * static_cast<uint64_t>(bits);
    return (codes[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1);
  }
  // The little-endian two's-complement integer of coordinate i among integers of `bits`
  // (8, 16 or 32) bits.
  static int64_t IntegerAt(const uint8_t* codes, int bits, int64_t i) {
    switch (bits) {
      case 8: return static_cast<int8_t>(codes[i]);
      case 16: {
        int16_t v;
        std::memcpy(&v, codes + 2 * i, sizeof(v));
        return v;
      }
      default: {
        int32_t v;
        std::memcpy(&v, codes + 4 * i, sizeof(v));
        return v;
      }
    }
  }

 private:
  ValueEncoding encoding_;
  absl::Span<const std::byte> bytes_;
  int64_t elements_;
  const uint8_t* codes_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_ENCODED_VALUES_H_
