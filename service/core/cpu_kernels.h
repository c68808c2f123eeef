// Inner loops of the CPU backend, written so the compiler vectorises them: widening of
// transport dtypes, batched dense sums (several updates per pass over the accumulator),
// max/min, and the row scatter of the row-sparse family (the COO family's scatter is in
// cpu_partitioned_scatter.h). Header-only templates; the
// accumulators instantiate them per (input dtype, accumulation dtype).
#ifndef FEDAGG_SERVICE_CORE_CPU_KERNELS_H_
#define FEDAGG_SERVICE_CORE_CPU_KERNELS_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "service/core/dtype.h"
#include "portable/portable_math.h"
#include "service/core/half_float.h"

namespace fedagg::cpu {

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) with T the C++ type of `dtype`.
template <typename Fn>
decltype(auto) DispatchDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(TypeTag<float>{});
    case DType::kFloat64: return fn(TypeTag<double>{});
    case DType::kInt32: return fn(TypeTag<int32_t>{});
    case DType::kInt64: return fn(TypeTag<int64_t>{});
    case DType::kFloat16: return fn(TypeTag<Float16>{});
    case DType::kBFloat16: return fn(TypeTag<BFloat16>{});
  }
  return fn(TypeTag<float>{});
}

template <typename Acc, typename In>
inline Acc Widen(In x) {
  if constexpr (std::is_same_v<In, Float16> || std::is_same_v<In, BFloat16>) {
    return static_cast<Acc>(ToFloat(x));
  } else {
    return static_cast<Acc>(x);
  }
}

// Addition that wraps modulo 2^64 for int64 accumulators (defined behaviour, documented)
// and is plain IEEE addition for floating point.
template <typename Acc>
inline Acc Add(Acc a, Acc b) {
  if constexpr (std::is_integral_v<Acc>) {
    return static_cast<Acc>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}

// The dense loops are memory-bound only when vectorised wide enough: with SSE2 alone
// they are instruction-bound (measured: docs/BENCHMARKS.md). Each is compiled twice,
// for AVX2 and for the x86-64 baseline, and the loader picks one for the CPU it runs on.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define FEDAGG_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FEDAGG_VECTOR_CLONES
#endif

// Elements of the accumulator handled per block: small enough to stay in L1 while
// every row of the batch streams through it.
inline constexpr int64_t kBlockElements = 2048;

// acc[j] += sum over r of rows[r][j] (times weights[r] when weights != nullptr),
// for j in [begin, end). Rows are added four at a time, so the accumulator is read and
// written once per four input rows. The order of additions for a coordinate depends only
// on the batch order, never on threads: results are reproducible.
template <typename Acc, typename In>
FEDAGG_VECTOR_CLONES void AddRows(Acc* __restrict acc, const In* const* rows, const Acc* weights, size_t num_rows,
             int64_t begin, int64_t end) {
  for (int64_t block = begin; block < end; block += kBlockElements) {
    const int64_t stop = std::min(end, block + kBlockElements);
    size_t r = 0;
    for (; r + 4 <= num_rows; r += 4) {
      const In* __restrict a = rows[r];
      const In* __restrict b = rows[r + 1];
      const In* __restrict c = rows[r + 2];
      const In* __restrict d = rows[r + 3];
      if (weights == nullptr) {
        for (int64_t j = block; j < stop; ++j) {
          acc[j] = Add(acc[j], Add(Add(Widen<Acc>(a[j]), Widen<Acc>(b[j])),
                                   Add(Widen<Acc>(c[j]), Widen<Acc>(d[j]))));
        }
      } else {
        const Acc wa = weights[r], wb = weights[r + 1], wc = weights[r + 2], wd = weights[r + 3];
        for (int64_t j = block; j < stop; ++j) {
          acc[j] += (wa * Widen<Acc>(a[j]) + wb * Widen<Acc>(b[j])) +
                    (wc * Widen<Acc>(c[j]) + wd * Widen<Acc>(d[j]));
        }
      }
    }
    for (; r < num_rows; ++r) {
      const In* __restrict a = rows[r];
      const Acc w = weights == nullptr ? Acc{1} : weights[r];
      if (weights == nullptr) {
        for (int64_t j = block; j < stop; ++j) acc[j] = Add(acc[j], Widen<Acc>(a[j]));
      } else {
        for (int64_t j = block; j < stop; ++j) acc[j] += w * Widen<Acc>(a[j]);
      }
    }
  }
}

// The better of a running extreme and a new value (NaN wins, so it propagates), written
// as selects without branches so the loop vectorises: the device reducers' own function.
using portable::Extreme;

template <bool kMax, typename Acc, typename In>
FEDAGG_VECTOR_CLONES void ExtremeRows(Acc* __restrict acc, const In* const* rows, size_t num_rows,
                                      int64_t begin, int64_t end) {
  for (int64_t block = begin; block < end; block += kBlockElements) {
    const int64_t stop = std::min(end, block + kBlockElements);
    size_t r = 0;
    // Four rows per pass over the accumulator block, as in AddRows.
    for (; r + 4 <= num_rows; r += 4) {
      const In* __restrict a = rows[r];
      const In* __restrict b = rows[r + 1];
      const In* __restrict c = rows[r + 2];
      const In* __restrict d = rows[r + 3];
      for (int64_t j = block; j < stop; ++j) {
        const Acc ab = Extreme<kMax>(Widen<Acc>(a[j]), Widen<Acc>(b[j]));
        const Acc cd = Extreme<kMax>(Widen<Acc>(c[j]), Widen<Acc>(d[j]));
        acc[j] = Extreme<kMax>(acc[j], Extreme<kMax>(ab, cd));
      }
    }
    for (; r < num_rows; ++r) {
      const In* __restrict a = rows[r];
      for (int64_t j = block; j < stop; ++j) acc[j] = Extreme<kMax>(acc[j], Widen<Acc>(a[j]));
    }
  }
}

// Entries ahead of the one being added whose target row is prefetched by ScatterAddRows.
inline constexpr size_t kRowPrefetchDistance = 8;

// For each entry k whose row ids[k] lies in [row_begin, row_end):
// acc[ids[k] * width + e] += values[k * width + e]. The target rows of upcoming entries in
// the range are prefetched: each is a cache miss otherwise, and the row adds themselves
// take less time than one. Indices were bounds-checked by the validator; duplicates
// simply add up.
template <typename Acc, typename In>
FEDAGG_VECTOR_CLONES void ScatterAddRows(Acc* __restrict acc, int64_t width, const int64_t* ids,
                                         const In* __restrict values, size_t num_entries,
                                         int64_t row_begin, int64_t row_end) {
  const size_t row_bytes = static_cast<size_t>(width) * sizeof(Acc);
  for (size_t k = 0; k < num_entries; ++k) {
    if (k + kRowPrefetchDistance < num_entries) {
      const int64_t ahead = ids[k + kRowPrefetchDistance];
      if (ahead >= row_begin && ahead < row_end) {
        const char* row = reinterpret_cast<const char*>(acc + ahead * width);
        for (size_t offset = 0; offset < row_bytes; offset += 64) __builtin_prefetch(row + offset, 1);
      }
    }
    const int64_t row = ids[k];
    if (row < row_begin || row >= row_end) continue;
    Acc* __restrict target = acc + row * width;
    const In* __restrict source = values + static_cast<int64_t>(k) * width;
    for (int64_t e = 0; e < width; ++e) target[e] = Add(target[e], Widen<Acc>(source[e]));
  }
}

}  // namespace fedagg::cpu

#endif  // FEDAGG_SERVICE_CORE_CPU_KERNELS_H_
