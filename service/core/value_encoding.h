// ValueEncoding: how one field's values travel on the wire, declared in the spec beside
// the field's intrinsic (docs/PROTOCOL.md, "Encoded values"). Plain values are the
// declared dtype's elements. A quantized field sends b bits a coordinate and a float32
// scale per block of coordinates; a discretized one sends b-bit integers at a fixed
// scale, which sum exactly. The bytes received are what the node holds: decoding happens
// as they are added (cpu_decode_kernels.h), never into a float copy of the update.
// Not to be confused with Encoding (intrinsic.h): whether a field is sent dense, sparse
// or row-sparse; a ValueEncoding says how the values themselves are written.
#ifndef FEDAGG_SERVICE_CORE_VALUE_ENCODING_H_
#define FEDAGG_SERVICE_CORE_VALUE_ENCODING_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fedagg {

enum class ValueCoding : uint8_t {
  kPlain = 0,
  // Section: ceil(n / block_size) float32 scales s_k (finite, >= 0), then n codes of b
  // bits packed from the lowest bit of each byte up. Code q of block k stands for
  // s_k * (q * 2 / (2^b - 1) - 1), one of 2^b levels spread evenly over [-s_k, s_k].
  kQuantized = 1,
  // Section: n little-endian two's-complement integers of b bits; integer q stands for
  // q * scale. Summed as integers in int64, exactly, in any order and any tree.
  kDiscretized = 2,
};

struct ValueEncoding {
  static constexpr int64_t kDefaultBlockSize = 256;  // 0.125 bit of scale a coordinate
  static constexpr int64_t kMaxBlockSize = 65536;
  static constexpr int64_t kMinRotation = 8, kMaxRotation = 65536;

  ValueCoding coding = ValueCoding::kPlain;
  int bits = 0;            // quantized: 1, 2, 4, 8; discretized: 8, 16, 32
  int64_t block_size = 0;  // quantized: coordinates per scale
  double scale = 0;        // discretized: the value of one integer step
  // Quantized: each whole run of `rotation` coordinates (a power of two; 0: none) is
  // rotated before it is quantized (rotation.h), with the signs `rotation_seed` draws.
  int64_t rotation = 0;
  uint64_t rotation_seed = 0;

  static ValueEncoding Quantized(int bits, int64_t block_size = kDefaultBlockSize, int64_t rotation = 0,
                                 uint64_t rotation_seed = 0);
  static ValueEncoding Discretized(int bits, double scale);

  bool encoded() const { return coding != ValueCoding::kPlain; }
  bool quantized() const { return coding == ValueCoding::kQuantized; }
  bool discretized() const { return coding == ValueCoding::kDiscretized; }
  bool rotated() const { return quantized() && rotation > 0; }
  // Quantized: the scales ahead of the codes.
  int64_t Blocks(int64_t elements) const;
  // The bytes `elements` values take in this encoding (not for kPlain).
  uint64_t EncodedBytes(int64_t elements) const;
  // The highest code (2^b - 1), for a quantized encoding.
  uint32_t MaxCode() const { return (uint32_t{1} << bits) - 1; }

  // "quantized:8", "quantized:4/512" (a block size other than the default),
  // "quantized:8+rotation:4096", "discretized:16@0.001", "plain": what ParseValueEncoding
  // reads. The rotation's seed is not part of it.
  std::string ToString() const;
  // INVALID_ARGUMENT, saying which values are allowed, when bits, block size or scale
  // are out of range for the coding.
  absl::Status Check() const;

  friend bool operator==(const ValueEncoding&, const ValueEncoding&) = default;
};

// Reads ToString()'s spelling; a quantized encoding without "/block" gets the default
// block size. The result is checked (ValueEncoding::Check).
absl::StatusOr<ValueEncoding> ParseValueEncoding(absl::string_view text);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_VALUE_ENCODING_H_
