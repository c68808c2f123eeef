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

// Coordinates of a run the kernel takes at once, every row of the batch adding into its
// accumulator (2 KiB of float) while it stays in L1. Measured with BM_DenseSumQuantized/16
// (medians of 3): 512 coordinates 5.3 ms at 8 bits and 5.4 at 4; 2,048 9.6 and 5.2;
// 8,192 11.8 and 5.6.
inline constexpr int64_t kDecodeRun = 512;

// acc[i] += weight * s_k * (q_i * step - 1) for i in [begin, end) (at most kDecodeRun
// coordinates, `begin` on a byte of codes: a multiple of 8), q_i row's kBits-bit code of
// coordinate i, s_k its block's scale. Codes narrower than a byte are unpacked into a tile
// first (a loop the compiler vectorises, as the add is; extracting each code where it is
// added did not: BM_DenseSumQuantized at 4 bits ran at an eighth of the 8-bit rate), and a
// block whose scale is 0 (all zeros) adds nothing.
template <int kBits, typename Acc>
FEDAGG_VECTOR_CLONES void AddRowRun(Acc* __restrict acc, const uint8_t* __restrict codes,
                                    const float* __restrict scales, Acc weight, Acc step, int64_t block,
                                    int64_t begin, int64_t end) {
  alignas(64) uint8_t tile[kDecodeRun];
  const uint8_t* q = codes;  // q[i] is coordinate i's code
  if constexpr (kBits < 8) {
    constexpr int kPerByte = 8 / kBits;
    constexpr uint8_t kMask = (1u << kBits) - 1;
    const uint8_t* packed = codes + begin / kPerByte;
    const int64_t bytes = (end - begin + kPerByte - 1) / kPerByte;
    for (int64_t j = 0; j < bytes; ++j) {
      const uint8_t byte = packed[j];
      for (int k = 0; k < kPerByte; ++k) tile[j * kPerByte + k] = static_cast<uint8_t>((byte >> (k * kBits)) & kMask);
    }
    q = tile - begin;
  }
  for (int64_t first = begin; first < end;) {
    const int64_t k = first / block;
    const int64_t last = std::min(end, (k + 1) * block);
    const Acc factor = weight * static_cast<Acc>(scales[k]);
    if (factor != Acc{0}) {
      for (int64_t i = first; i < last; ++i) acc[i] += factor * (static_cast<Acc>(q[i]) * step - Acc{1});
    }
    first = last;
  }
}

template <int kBits, typename Acc>
void AddQuantized(Acc* acc, const std::byte* const* rows, const Acc* weights, size_t num_rows,
                  const ValueEncoding& encoding, int64_t elements, int64_t begin, int64_t end) {
  const size_t scales_bytes = static_cast<size_t>(encoding.Blocks(elements)) * sizeof(float);
  const Acc step = static_cast<Acc>(2.0 / encoding.MaxCode());
  for (int64_t first = begin; first < end; first += kDecodeRun) {
    const int64_t last = std::min(end, first + kDecodeRun);
    for (size_t r = 0; r < num_rows; ++r) {
      AddRowRun<kBits>(acc, reinterpret_cast<const uint8_t*>(rows[r]) + scales_bytes,
                       reinterpret_cast<const float*>(rows[r]), weights == nullptr ? Acc{1} : weights[r], step,
                       encoding.block_size, first, last);
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
