// The per-element work of ThrustFieldReducer's passes (thrust_field_reducer.h): functors
// that a Thrust algorithm calls once per work item, on a GPU thread or a CPU thread alike —
// the dense columns' reductions, the scatter's segments and update passes, the index scan
// that checks a sparse batch, the counts and weight sums per row, and the result's
// conversion and division. They hold raw pointers into the system's memory and nothing
// else; each work item's arithmetic is the same whatever thread runs it, so a result does
// not depend on the system or its thread count.
// Compiles as C++17 with nvcc and with g++.
#ifndef FEDAGG_PORTABLE_THRUST_REDUCER_FUNCTORS_H_
#define FEDAGG_PORTABLE_THRUST_REDUCER_FUNCTORS_H_

#include <cstdint>
#include <type_traits>

#include <thrust/tuple.h>

#include "portable/field_reducer.h"
#include "portable/portable_math.h"

namespace fedagg::portable {
namespace functors {

template <typename Acc>
struct AddOp {
  FEDAGG_HOST_DEVICE Acc operator()(Acc a, Acc b) const { return Add(a, b); }
};

template <typename Acc>
struct AddWithCount {
  using Pair = thrust::tuple<Acc, int64_t>;
  FEDAGG_HOST_DEVICE Pair operator()(const Pair& a, const Pair& b) const {
    return Pair(Add(thrust::get<0>(a), thrust::get<0>(b)), thrust::get<1>(a) + thrust::get<1>(b));
  }
};

// Combines two accumulator values of a dense field (merging two reducers).
template <ReducerOp kOp, typename Acc>
struct Combine {
  FEDAGG_HOST_DEVICE Acc operator()(Acc a, Acc b) const {
    if constexpr (kOp == ReducerOp::kMax) return Extreme<true>(a, b);
    if constexpr (kOp == ReducerOp::kMin) return Extreme<false>(a, b);
    return Add(a, b);
  }
};

// A report's division is in the state's precision, float64 for an integer state (as
// service/core/field_report.cc divides on the host).
template <typename Acc>
using DivisorOf = std::conditional_t<std::is_integral_v<Acc>, double, Acc>;

// The result of one state value: converted, or divided by one divisor first.
template <typename Acc, typename Out>
struct ConvertResult {
  FEDAGG_HOST_DEVICE Out operator()(Acc a) const { return static_cast<Out>(a); }
};
template <typename Acc, typename Out>
struct DivideResult {
  DivisorOf<Acc> divisor;
  FEDAGG_HOST_DEVICE Out operator()(Acc a) const { return static_cast<Out>(static_cast<DivisorOf<Acc>>(a) / divisor); }
};
// A discretized field's result from its integer steps: float64(steps) times the step,
// divided by the divisor (1 for a sum), written as Out; with `modulus_bits` (a secure
// aggregation's sum modulo 2^b) the steps are the state's low b bits read as a signed
// integer. service/core/field_report.cc's ReportDense computes the same.
template <typename Acc, typename Out>
struct StepsResult {
  double step;
  double divisor;
  int modulus_bits;
  FEDAGG_HOST_DEVICE Out operator()(Acc a) const {
    if (modulus_bits > 0) {
      const int shift = 64 - modulus_bits;
      a = static_cast<Acc>(static_cast<int64_t>(static_cast<uint64_t>(a) << shift) >> shift);
    }
    return static_cast<Out>(static_cast<double>(a) * step / divisor);
  }
};
// The result of element i of a [rows, width] table: divided by its row's count or weight
// sum; a row whose divisor is 0 (nobody touched it) reports 0.
template <typename Acc, typename Out, typename PerRow>
struct DivideByRow {
  const Acc* acc;
  const PerRow* per_row;
  int64_t width;
  FEDAGG_HOST_DEVICE Out operator()(int64_t i) const {
    const DivisorOf<Acc> divisor = static_cast<DivisorOf<Acc>>(per_row[i / width]);
    return divisor == 0 ? Out{0} : static_cast<Out>(static_cast<DivisorOf<Acc>>(acc[i]) / divisor);
  }
};

// A run length known at compile time.
template <int64_t kN>
struct FixedLength {
  FEDAGG_HOST_DEVICE constexpr operator int64_t() const { return kN; }
};

// Runs body(n) for the run of n = min(remaining, kRun) elements that starts a row's
// `remaining` ones: with n a FixedLength when the run is whole, so that a CPU thread's
// loop over it vectorises.
template <int64_t kRun, typename Body>
FEDAGG_HOST_DEVICE void ForRun(int64_t remaining, Body&& body) {
  if (remaining >= kRun) {
    body(FixedLength<kRun>{});
  } else {
    body(remaining);
  }
}

// Columns [t * kRun, t * kRun + kRun) of a [rows, columns] batch: acc[j] op= in[r][j] for
// every row r, in row order (each column's arithmetic is the same whatever kRun is).
template <ReducerOp kOp, typename Acc, typename In, int64_t kRun>
struct DenseColumns {
  Acc* acc;
  const In* in;
  const Acc* weights;
  int64_t rows;
  int64_t columns;

  FEDAGG_HOST_DEVICE void operator()(int64_t t) const {
    const int64_t first = t * kRun;
    ForRun<kRun>(columns - first, [&](auto n) {
      Acc running[kRun];
      for (int64_t i = 0; i < n; ++i) running[i] = acc[first + i];
      for (int64_t r = 0; r < rows; ++r) {
        const In* row = in + r * columns + first;
        for (int64_t i = 0; i < n; ++i) {
          const Acc x = Widen<Acc>(row[i]);
          if constexpr (kOp == ReducerOp::kWeightedSum) {
            running[i] += weights[r] * x;
          } else if constexpr (kOp == ReducerOp::kMax) {
            running[i] = Extreme<true>(running[i], x);
          } else if constexpr (kOp == ReducerOp::kMin) {
            running[i] = Extreme<false>(running[i], x);
          } else {
            running[i] = Add(running[i], x);
          }
        }
      }
      for (int64_t i = 0; i < n; ++i) acc[first + i] = running[i];
    });
  }
};

// Columns [t * kRun, t * kRun + kRun) of a quantized [rows, columns] part whose columns
// start on a block (service/core/value_encoding.h): acc[j] += w_r * s * (q * step - 1) for
// every row r in order, q the kBits-bit code of column j in row r's codes, s the scale of
// its block, w_r 1 unless kWeighted: a coordinate decoded as it is added, the arithmetic
// of the CPU backend's kernel (service/core/cpu_decode_kernels.h).
template <bool kWeighted, typename Acc, int kBits, int64_t kRun>
struct DenseQuantizedColumns {
  Acc* acc;
  const uint8_t* codes;  // [rows, row_code_bytes]
  const float* scales;   // [rows, row_blocks]
  const Acc* weights;
  int64_t rows;
  int64_t columns;
  int64_t row_code_bytes;
  int64_t row_blocks;
  int64_t block;
  Acc step;  // 2 / (2^kBits - 1)

  FEDAGG_HOST_DEVICE void operator()(int64_t t) const {
    constexpr uint32_t kMask = (1u << kBits) - 1;
    const int64_t first = t * kRun;
    ForRun<kRun>(columns - first, [&](auto n) {
      Acc running[kRun];
      for (int64_t i = 0; i < n; ++i) running[i] = acc[first + i];
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = codes + r * row_code_bytes;
        const float* row_scales = scales + r * row_blocks;
        const Acc weight = kWeighted ? weights[r] : Acc{1};
        for (int64_t i = 0; i < n; ++i) {
          const uint64_t bit = static_cast<uint64_t>(first + i) * kBits;
          const uint32_t q = (row[bit >> 3] >> (bit & 7)) & kMask;
          const Acc factor = weight * static_cast<Acc>(row_scales[(first + i) / block]);
          running[i] += factor * (static_cast<Acc>(q) * step - Acc{1});
        }
      }
      for (int64_t i = 0; i < n; ++i) acc[first + i] = running[i];
    });
  }
};

template <typename Acc>
struct CastTo {
  FEDAGG_HOST_DEVICE Acc operator()(double x) const { return static_cast<Acc>(x); }
};

// Segment u of the sorted entries holds every entry of row rows[u]. Work item t covers
// elements [r * kRun, r * kRun + kRun) of segment u = t / runs_per_row (r = t % runs_per_row);
// each element gets the entries' values added in batch order (the sort was stable), the
// same arithmetic whatever kRun is.
template <bool kWeighted, typename Acc, typename In, int64_t kRun>
struct ScatterSegment {
  // A CPU thread takes consecutive work items: it prefetches the table run of the item this
  // far ahead, a cache miss otherwise that takes longer than the adds of a run.
  static constexpr int64_t kPrefetchItems = 8;

  Acc* table;
  int64_t width;
  int64_t runs_per_row;
  int64_t items;           // segments * runs_per_row
  const int64_t* rows;
  const int64_t* starts;
  const int64_t* lengths;
  const int64_t* order;    // entry of the k-th sorted position
  const int32_t* update;   // update of each entry
  const In* values;        // width values per entry
  const Acc* weights;      // per update

  FEDAGG_HOST_DEVICE void operator()(int64_t t) const {
#if !defined(__CUDA_ARCH__)
    // Written out here: GCC drops a prefetch in a callee it finds free of side effects.
    if (t + kPrefetchItems < items) {
      const int64_t ahead = (t + kPrefetchItems) / runs_per_row;
      const int64_t ahead_first = (t + kPrefetchItems - ahead * runs_per_row) * kRun;
      const int64_t ahead_bytes = (width - ahead_first < kRun ? width - ahead_first : kRun) * sizeof(Acc);
      const char* run = reinterpret_cast<const char*>(table + rows[ahead] * width + ahead_first);
      for (int64_t offset = 0; offset < ahead_bytes; offset += 64) __builtin_prefetch(run + offset, 1);
    }
#endif
    const int64_t u = t / runs_per_row;
    const int64_t first = (t - u * runs_per_row) * kRun;
    Acc* target = table + rows[u] * width + first;
    ForRun<kRun>(width - first, [&](auto n) {
      Acc running[kRun];
      for (int64_t i = 0; i < n; ++i) running[i] = target[i];
      for (int64_t k = starts[u]; k < starts[u] + lengths[u]; ++k) {
        const int64_t entry = order[k];
        const In* x = values + entry * width + first;
        if constexpr (kWeighted) {
          const Acc weight = weights[update[entry]];
          for (int64_t i = 0; i < n; ++i) running[i] += weight * Widen<Acc>(x[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) running[i] = Add(running[i], Widen<Acc>(x[i]));
        }
      }
      for (int64_t i = 0; i < n; ++i) target[i] = running[i];
    });
  }
};

// One update's entries, whose indices ascend (a repeated index's entries adjacent), added
// into the table: a work item per (entry, run of its row's elements); the first entry of
// each index adds that index's entries in entry order, the others do nothing. Over the
// updates of a batch in turn, the table's elements see the additions ScatterSegment makes
// of the same batch, in the same order: the sums are the same, bit for bit. The row's
// count (once per update) and weight sum are added by its first work item.
template <bool kWeighted, typename Acc, typename In, int64_t kRun>
struct ScatterUpdateRuns {
  // Work items of prefetch ahead: a row of many elements, as ScatterSegment's; a narrow
  // row's item is a few adds, and needs more to hide the miss.
  static constexpr int64_t kPrefetchItems = 8;
  static constexpr int64_t kNarrowRowPrefetchItems = 48;
  static constexpr int64_t kNarrowRow = 16;  // elements

  Acc* table;
  int64_t* counts;      // null when not kept
  double* weight_sums;  // null when not kept
  int64_t width;
  int64_t runs_per_row;
  int64_t entries;       // of the update
  const int64_t* ids;    // its indices
  const In* values;      // its values, width per entry
  const Acc* weight;     // its weight as Acc (read when kWeighted)
  const double* weight_term;  // its weight (read when weight sums are kept)

  FEDAGG_HOST_DEVICE void operator()(int64_t t) const {
    const int64_t k = t / runs_per_row;
#if !defined(__CUDA_ARCH__)
    // As ScatterSegment's, written out for the same reason.
    const int64_t distance = width < kNarrowRow ? kNarrowRowPrefetchItems : kPrefetchItems;
    if (t + distance < entries * runs_per_row) {
      const int64_t ahead = (t + distance) / runs_per_row;
      const int64_t ahead_first = (t + distance - ahead * runs_per_row) * kRun;
      const int64_t ahead_bytes = (width - ahead_first < kRun ? width - ahead_first : kRun) * sizeof(Acc);
      const char* run = reinterpret_cast<const char*>(table + ids[ahead] * width + ahead_first);
      for (int64_t offset = 0; offset < ahead_bytes; offset += 64) __builtin_prefetch(run + offset, 1);
    }
#endif
    if (k > 0 && ids[k] == ids[k - 1]) return;  // added by the index's first entry
    const int64_t row = ids[k];
    const int64_t first = (t - k * runs_per_row) * kRun;
    Acc* target = table + row * width + first;
    ForRun<kRun>(width - first, [&](auto n) {
      Acc running[kRun];
      for (int64_t i = 0; i < n; ++i) running[i] = target[i];
      for (int64_t j = k; j < entries && ids[j] == row; ++j) {
        const In* x = values + j * width + first;
        if constexpr (kWeighted) {
          const Acc w = *weight;
          for (int64_t i = 0; i < n; ++i) running[i] += w * Widen<Acc>(x[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) running[i] = Add(running[i], Widen<Acc>(x[i]));
        }
      }
      for (int64_t i = 0; i < n; ++i) target[i] = running[i];
    });
    if (first == 0) {
      if (counts != nullptr) counts[row] += 1;
      if (weight_sums != nullptr) weight_sums[row] += *weight_term;
    }
  }
};

// Per segment: how many distinct updates touched the row, and their weight sum.
struct CountSegment {
  int64_t* counts;      // null when not kept
  double* weight_sums;  // null when not kept
  const int64_t* rows;
  const int64_t* starts;
  const int64_t* lengths;
  const int64_t* order;
  const int32_t* update;
  const double* weights;  // per update; read only when weight_sums is kept

  FEDAGG_HOST_DEVICE void operator()(int64_t u) const {
    int64_t count = 0;
    double weight_sum = 0;
    int32_t last = -1;
    for (int64_t k = starts[u]; k < starts[u] + lengths[u]; ++k) {
      const int32_t up = update[order[k]];
      if (up == last) continue;
      last = up;
      ++count;
      if (weight_sums != nullptr) weight_sum += weights[up];
    }
    if (counts != nullptr) counts[rows[u]] += count;
    if (weight_sums != nullptr) weight_sums[rows[u]] += weight_sum;
  }
};

// Writes u at the first entry of update u when it has entries (so each position is
// written at most once); a running maximum then gives every entry its update.
struct MarkUpdateStart {
  const int64_t* offsets;  // [updates + 1]
  int32_t* entry_update;
  FEDAGG_HOST_DEVICE void operator()(int64_t u) const {
    if (offsets[u + 1] > offsets[u]) entry_update[offsets[u]] = static_cast<int32_t>(u);
  }
};

// What one pass over a batch's indices finds: how many lie outside [0, rows), and how
// many do not come strictly after the entry before them (counted only when asked).
struct IndexScan {
  int64_t outside = 0;
  int64_t not_increasing = 0;
};

struct ScanIndex {
  const int64_t* ids;
  int64_t rows;
  bool order;  // count not_increasing too
  FEDAGG_HOST_DEVICE IndexScan operator()(int64_t k) const {
    IndexScan scan;
    scan.outside = (ids[k] < 0 || ids[k] >= rows) ? 1 : 0;
    scan.not_increasing = (order && k > 0 && ids[k] <= ids[k - 1]) ? 1 : 0;
    return scan;
  }
};

struct AddScans {
  FEDAGG_HOST_DEVICE IndexScan operator()(const IndexScan& a, const IndexScan& b) const {
    IndexScan sum;
    sum.outside = a.outside + b.outside;
    sum.not_increasing = a.not_increasing + b.not_increasing;
    return sum;
  }
};

// 1 where update u has entries and its first index does not come after the last index
// of the entries before it: the pairs of ScanIndex's not_increasing that straddle two
// updates, which do not break either update's order.
struct StartsNotAbove {
  const int64_t* ids;
  const int64_t* offsets;  // [updates + 1]
  FEDAGG_HOST_DEVICE int64_t operator()(int64_t u) const {
    const int64_t first = offsets[u];
    return (first > 0 && first < offsets[u + 1] && ids[first] <= ids[first - 1]) ? 1 : 0;
  }
};

// Rotating a result back (service/core/rotation.h), in float64 over each whole run of R
// values: log2(R) stages of the fast Walsh-Hadamard transform, then each value scaled and
// signed — the host's Unrotate, through the same portable_math.h steps, so both give the
// same bits.
struct HadamardStage {
  double* x;
  int64_t h;
  // Pair p of the stage: i = (p / h) * 2h + p % h.
  FEDAGG_HOST_DEVICE void operator()(int64_t p) const { HadamardButterfly(x, (p / h) * 2 * h + p % h, h); }
};
struct UnrotateSigns {
  double* x;
  double norm;  // 1 / sqrt(R)
  uint64_t seed;
  FEDAGG_HOST_DEVICE void operator()(int64_t i) const { x[i] = UnrotatedValue(x[i], norm, seed, i); }
};

// 1 where sorted position k starts a new (index, update) pair.
struct NewContributor {
  const int64_t* keys;
  const int32_t* updates;
  FEDAGG_HOST_DEVICE int64_t operator()(int64_t k) const {
    return (k == 0 || keys[k] != keys[k - 1] || updates[k] != updates[k - 1]) ? 1 : 0;
  }
};

}  // namespace functors

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_THRUST_REDUCER_FUNCTORS_H_
