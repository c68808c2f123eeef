// CPU kernels that add a batch's encoded rows (value_encoding.h) into a dense
// accumulator, decoding as they add: a quantized row block by block (the block's scale
// and the update's weight folded into one factor, each code unpacked, scaled and added),
// a discretized row as integers into int64 sums. No decoded copy of a row exists. Like
// cpu_kernels.h's AddRows, each call covers a column range [begin, end) that one thread
// owns, and every coordinate adds its rows in batch order.
#ifndef FEDAGG_SERVICE_CORE_CPU_DECODE_KERNELS_H_
#define FEDAGG_SERVICE_CORE_CPU_DECODE_KERNELS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "service/core/cpu_kernels.h"
#include "service/core/value_encoding.h"

namespace fedagg::cpu {
namespace decode_internal {

// acc[i] += factor * (q_i * step - 1) for i in [begin, end), q_i the 8-bit codes[i].
template <typename Acc>
FEDAGG_VECTOR_CLONES void AddByteCodes(Acc* __restrict acc, const uint8_t* __restrict codes, Acc factor, Acc step,
                                       int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) acc[i] += factor * (static_cast<Acc>(codes[i]) * step - Acc{1});
}

// The codes of `bytes` bytes of kBits-bit codes (kBits < 8), one byte each: a loop the
// compiler vectorises, where extracting each code where it is added did not (measured:
// BM_DenseSumQuantized at 4 bits ran at an eighth of the 8-bit rate).
template <int kBits>
FEDAGG_VECTOR_CLONES void UnpackCodes(const uint8_t* __restrict packed, int64_t bytes, uint8_t* __restrict out) {
  constexpr int kPerByte = 8 / kBits;
  constexpr uint8_t kMask = (1u << kBits) - 1;
  for (int64_t j = 0; j < bytes; ++j) {
    const uint8_t byte = packed[j];
    for (int k = 0; k < kPerByte; ++k) out[j * kPerByte + k] = static_cast<uint8_t>((byte >> (k * kBits)) & kMask);
  }
}

// acc[i] += factor * (q_i * step - 1) for i in [begin, end), q_i the kBits-bit codes;
// `begin` lies on a byte of codes (a block starts on one). Codes narrower than a byte are
// unpacked a tile at a time, then added as bytes.
template <int kBits, typename Acc>
void AddCodes(Acc* acc, const uint8_t* codes, Acc factor, Acc step, int64_t begin, int64_t end) {
  if constexpr (kBits == 8) {
    AddByteCodes(acc, codes, factor, step, begin, end);
  } else {
    constexpr int64_t kTile = 2048;  // codes: 2 KiB of bytes, beside an L1-sized run of acc
    alignas(64) uint8_t tile[kTile];
    for (int64_t first = begin; first < end; first += kTile) {
      const int64_t count = std::min(kTile, end - first);
      UnpackCodes<kBits>(codes + first * kBits / 8, (count * kBits + 7) / 8, tile);
      AddByteCodes(acc + first, tile, factor, step, 0, count);
    }
  }
}

template <int kBits, typename Acc>
void AddQuantized(Acc* acc, const std::byte* const* rows, const Acc* weights, size_t num_rows,
                  const ValueEncoding& encoding, int64_t elements, int64_t begin, int64_t end) {
  const int64_t block = encoding.block_size;
  const size_t scales_bytes = static_cast<size_t>(encoding.Blocks(elements)) * sizeof(float);
  const Acc step = static_cast<Acc>(2.0 / encoding.MaxCode());
  for (int64_t k = begin / block; k * block < end; ++k) {
    const int64_t lo = std::max(begin, k * block), hi = std::min(end, (k + 1) * block);
    for (size_t r = 0; r < num_rows; ++r) {
      float scale;
      std::memcpy(&scale, rows[r] + k * static_cast<int64_t>(sizeof(float)), sizeof(float));
      if (scale == 0) continue;  // the block is all zeros
      const Acc factor = (weights == nullptr ? Acc{1} : weights[r]) * static_cast<Acc>(scale);
      AddCodes<kBits>(acc, reinterpret_cast<const uint8_t*>(rows[r]) + scales_bytes, factor, step, lo, hi);
    }
  }
}

template <typename Int>
FEDAGG_VECTOR_CLONES void AddIntegers(int64_t* __restrict acc, const std::byte* row, int64_t begin, int64_t end) {
  const Int* values = reinterpret_cast<const Int*>(row);
  for (int64_t i = begin; i < end; ++i) acc[i] = Add(acc[i], static_cast<int64_t>(values[i]));
}

}  // namespace decode_internal

// acc[begin, end) += weights[r] * decoded row r (weight 1 when `weights` is null), for
// every row in order; each row is a quantized section of `elements` values.
template <typename Acc>
void AddQuantizedRows(Acc* acc, const std::byte* const* rows, const Acc* weights, size_t num_rows,
                      const ValueEncoding& encoding, int64_t elements, int64_t begin, int64_t end) {
  switch (encoding.bits) {
    case 1: return decode_internal::AddQuantized<1>(acc, rows, weights, num_rows, encoding, elements, begin, end);
    case 2: return decode_internal::AddQuantized<2>(acc, rows, weights, num_rows, encoding, elements, begin, end);
    case 4: return decode_internal::AddQuantized<4>(acc, rows, weights, num_rows, encoding, elements, begin, end);
    default: return decode_internal::AddQuantized<8>(acc, rows, weights, num_rows, encoding, elements, begin, end);
  }
}

// acc[begin, end) += row r's integers, for every row in order; each row is a discretized
// section of `bits`-bit integers.
inline void AddDiscretizedRows(int64_t* acc, const std::byte* const* rows, size_t num_rows, int bits, int64_t begin,
                               int64_t end) {
  for (size_t r = 0; r < num_rows; ++r) {
    switch (bits) {
      case 8: decode_internal::AddIntegers<int8_t>(acc, rows[r], begin, end); break;
      case 16: decode_internal::AddIntegers<int16_t>(acc, rows[r], begin, end); break;
      default: decode_internal::AddIntegers<int32_t>(acc, rows[r], begin, end);
    }
  }
}

}  // namespace fedagg::cpu

#endif  // FEDAGG_SERVICE_CORE_CPU_DECODE_KERNELS_H_
