// ThrustFieldReducer<System, Acc>: every reduction of the portable backends written once
// with Thrust algorithms, for any Thrust system (System supplies its vector type, its
// execution policy and host<->system copies: omp_system.h, cuda/cuda_system.h). Batches
// arrive already in the system's memory, in the staging layout (StagedBatch, laid out by
// batch_packer.h, copied by the staging ring); the entries' indices are checked against
// the field here, one pass on the system before anything is added (the same pass finds
// whether each update's indices increase strictly, where the CSR path needs to know).
//   dense    [B, C] part of a batch: one pass per column over the B rows (each input byte
//            read once), sum / weighted sum / max / min, float16 and bfloat16 decoded in place;
//            a work item takes a run of System::kElementsPerWorkItem columns (a GPU thread
//            one, a CPU thread a vectorised run; the scatter's work items likewise take
//            runs of a row's elements);
//   scatter  sparse_sum / sparse_mean / sparse_weighted_mean / row_sparse_*, by one of
//            three paths: update by update, when every update's indices ascend
//            (validation found it) and the updates are large: one pass per update in
//            batch order (no two entries of one pass touch the same row); CSR + SpMV, into
//            a floating-point accumulator with rows of one element: the batch as a CSR
//            matrix through the system's SpMV (csr_scatter.h, whose Applies() is the rule;
//            a batch whose updates' indices increase strictly is one as staged);
//            otherwise a stable sort of the entries by row and one segmented reduction per
//            (row, element) adding into the dense table in batch order. The update passes
//            go first where they apply, except on a system whose SpMV beats them
//            (System::kUpdatePassesBeforeSpmv false: the CPU's); per-row counts of
//            distinct updates (and their weight sums) each way;
//   union    sparse_sum_sparse: stable sort by index, reduce_by_key (values, and counts of
//            distinct updates), then merge_by_key + reduce_by_key with the running state.
// Each call (Accumulate, Merge, Save, SaveResult, Load, ViewState) waits, when it ends,
// failed or not, for all it queued on the system (Guarded): a device's cuSPARSE calls run
// asynchronously, and the staged batch's slot is reused once the call returns.
// Thrust reports failures by exceptions; they never leave this file: out of memory
// becomes Outcome kResourceExhausted, anything else kInternal.
// Compiles as C++17 with nvcc and with g++ (-fopenmp, Thrust's OpenMP system).
#ifndef FEDAGG_PORTABLE_THRUST_FIELD_REDUCER_H_
#define FEDAGG_PORTABLE_THRUST_FIELD_REDUCER_H_

#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <thrust/copy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/gather.h>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/merge.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>
#include <thrust/tuple.h>

#include "portable/csr_batch.h"
#include "portable/csr_scatter.h"
#include "portable/device_state.h"
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

// 1 where sorted position k starts a new (index, update) pair.
struct NewContributor {
  const int64_t* keys;
  const int32_t* updates;
  FEDAGG_HOST_DEVICE int64_t operator()(int64_t k) const {
    return (k == 0 || keys[k] != keys[k - 1] || updates[k] != updates[k - 1]) ? 1 : 0;
  }
};

}  // namespace functors

template <typename System, typename Acc>
class ThrustFieldReducer final : public StagedFieldReducer<Acc> {
  template <typename T>
  using Vec = typename System::template vector<T>;

 public:
  explicit ThrustFieldReducer(const ReducerSpec& spec) : spec_(spec) {}

  Outcome Accumulate(const StagedBatch& batch) override {
    return Guarded([&] { return AccumulateNow(batch); });
  }
  Outcome Merge(const StagedFieldReducer<Acc>& other_base) override {
    return Guarded([&] { return MergeNow(static_cast<const ThrustFieldReducer&>(other_base)); });
  }
  Outcome Save(HostState<Acc>* out) const override {
    return Guarded([&] { return SaveNow(out); });
  }
  Outcome SaveResult(const ResultRequest& request) const override {
    return Guarded([&] { return SaveResultNow(request); });
  }
  Outcome Load(const HostState<Acc>& in) override {
    return Guarded([&] { return LoadNow(in); });
  }
  uint64_t HostBytes() const override {
    if (!System::kHostMemory) return 0;
    return Bytes(acc_) + Bytes(counts_) + Bytes(weight_sums_) + Bytes(union_indices_) + Bytes(acc_weights_) +
           Bytes(entry_update_) + Bytes(sorted_ids_) + Bytes(order_) + Bytes(segment_rows_) + Bytes(segment_starts_) +
           Bytes(segment_lengths_) + csr_.Bytes();
  }
  // The state arrays of a kDense or kScatter reducer (allocated now if they were not),
  // for summing them in place across devices; kInternal for kUnion, whose size varies.
  Outcome ViewState(DeviceState<Acc>* out) {
    return Guarded([&] { return ViewStateNow(out); });
  }

 private:
  // Runs one call and waits for the work it queued (System::Finish), failed or not: a
  // device system's asynchronous calls (cuSPARSE's; every algorithm under a policy that
  // does not synchronise) may still read the staged batch's slot, which is reused once
  // the call returns, and the next call may come from another lane's thread, on another
  // stream.
  template <typename Fn>
  static Outcome Guarded(Fn&& fn) {
    try {
      const Outcome outcome = fn();
      System::Finish();
      return outcome;
    } catch (const std::bad_alloc& e) {
      FinishAfterFailure();
      return Outcome{Outcome::Code::kResourceExhausted,
                     std::string("out of memory on the reduction device: ") + e.what()};
    } catch (const std::exception& e) {
      FinishAfterFailure();
      const std::string what = e.what();
      const bool oom = what.find("out of memory") != std::string::npos;
      return Outcome{oom ? Outcome::Code::kResourceExhausted : Outcome::Code::kInternal,
                     std::string("reduction device error: ") + what};
    }
  }

  // Waits for what a failed call queued before it failed; the failure reported is the
  // call's own.
  static void FinishAfterFailure() noexcept {
    try {
      System::Finish();
    } catch (const std::exception&) {
    }
  }

  // Elements of a row one work item of the dense and scatter reductions covers.
  static constexpr int64_t kRun = System::kElementsPerWorkItem;
  static constexpr int64_t RunsOf(int64_t elements) { return (elements + kRun - 1) / kRun; }

  template <typename T>
  static uint64_t Bytes(const Vec<T>& v) {
    return static_cast<uint64_t>(v.capacity()) * sizeof(T);
  }
  template <typename T>
  static T* Raw(Vec<T>& v) {
    return thrust::raw_pointer_cast(v.data());
  }
  template <typename T>
  static const T* Raw(const Vec<T>& v) {
    return thrust::raw_pointer_cast(v.data());
  }
  template <typename T>
  static void ToDevice(Vec<T>& dst, const std::vector<T>& src) {
    dst.resize(src.size());
    System::ToDevice(Raw(dst), src.data(), src.size() * sizeof(T));
  }
  template <typename T>
  static void ToHost(std::vector<T>& dst, const Vec<T>& src) {
    dst.resize(src.size());
    System::ToHost(dst.data(), Raw(src), src.size() * sizeof(T));
  }

  // The state exists from first use on: an accumulator nobody fed costs no device memory.
  void EnsureState() const {
    if (initialized_) return;
    if (spec_.kind == ReducerKind::kDense) {
      acc_.resize(static_cast<size_t>(spec_.row_width));
      thrust::fill(System::policy(), acc_.begin(), acc_.end(), InitialValue());
    } else if (spec_.kind == ReducerKind::kScatter) {
      const size_t rows = static_cast<size_t>(spec_.rows);
      acc_.resize(rows * static_cast<size_t>(spec_.row_width));
      thrust::fill(System::policy(), acc_.begin(), acc_.end(), Acc{0});
      if (spec_.keeps_counts) {
        counts_.resize(rows);
        thrust::fill(System::policy(), counts_.begin(), counts_.end(), int64_t{0});
      }
      if (spec_.keeps_weight_sums) {
        weight_sums_.resize(rows);
        thrust::fill(System::policy(), weight_sums_.begin(), weight_sums_.end(), 0.0);
      }
    }
    initialized_ = true;
  }

  Acc InitialValue() const {
    using Limits = std::numeric_limits<Acc>;
    if (spec_.op == ReducerOp::kMax) return Limits::has_infinity ? -Limits::infinity() : Limits::lowest();
    if (spec_.op == ReducerOp::kMin) return Limits::has_infinity ? Limits::infinity() : Limits::max();
    return Acc{0};
  }

  Outcome AccumulateNow(const StagedBatch& batch) {
    EnsureState();
    if (batch.updates <= 0) return Outcome{};
    switch (spec_.in) {
      case InType::kF32: return AccumulateTyped<float>(batch);
      case InType::kF64: return AccumulateTyped<double>(batch);
      case InType::kI32: return AccumulateTyped<int32_t>(batch);
      case InType::kI64: return AccumulateTyped<int64_t>(batch);
      case InType::kF16: return AccumulateTyped<Half>(batch);
      case InType::kBF16: return AccumulateTyped<BHalf>(batch);
    }
    return Outcome{Outcome::Code::kInternal, "unknown input dtype"};
  }

  template <typename In>
  Outcome AccumulateTyped(const StagedBatch& batch) {
    acc_weights_.resize(static_cast<size_t>(batch.updates));
    thrust::transform(System::policy(), batch.weights, batch.weights + batch.updates, acc_weights_.begin(),
                      functors::CastTo<Acc>());
    const In* values = static_cast<const In*>(batch.values);
    if (spec_.kind == ReducerKind::kDense) return AccumulateDense(values, batch);
    return AccumulateEntries(values, batch);
  }

  template <typename In>
  Outcome AccumulateDense(const In* in, const StagedBatch& batch) {
    switch (spec_.op) {
      case ReducerOp::kSum: return DenseRun<ReducerOp::kSum>(in, batch);
      case ReducerOp::kWeightedSum: return DenseRun<ReducerOp::kWeightedSum>(in, batch);
      case ReducerOp::kMax: return DenseRun<ReducerOp::kMax>(in, batch);
      case ReducerOp::kMin: return DenseRun<ReducerOp::kMin>(in, batch);
    }
    return Outcome{Outcome::Code::kInternal, "unknown reduction"};
  }

  template <ReducerOp kOp, typename In>
  Outcome DenseRun(const In* in, const StagedBatch& batch) {
    thrust::for_each(System::policy(), thrust::counting_iterator<int64_t>(0),
                     thrust::counting_iterator<int64_t>(RunsOf(batch.columns)),
                     functors::DenseColumns<kOp, Acc, In, kRun>{Raw(acc_) + batch.column_begin, in,
                                                                Raw(acc_weights_), batch.updates, batch.columns});
    return Outcome{};
  }

  // Every index checked against the field first (nothing is added when one is outside),
  // in one pass that also finds, where the CSR path will take the batch, whether every
  // update's indices increase strictly (then the batch is a CSR matrix as staged); then
  // the entries added update by update, through CSR and SpMV, or sorted by index (stably:
  // batch order within an index).
  template <typename In>
  Outcome AccumulateEntries(const In* values, const StagedBatch& batch) {
    const int64_t total = batch.entries;
    if (total == 0) return Outcome{};
    const bool csr = CsrScatter<System, Acc>::Applies(spec_, batch.updates);
    const bool update_passes = spec_.kind == ReducerKind::kScatter && AddsUpdateByUpdate(batch) &&
                               (!csr || System::kUpdatePassesBeforeSpmv);
    const bool via_csr = csr && !update_passes;
    const thrust::counting_iterator<int64_t> first(0);
    const functors::IndexScan scan =
        thrust::transform_reduce(System::policy(), first, first + total,
                                 functors::ScanIndex{batch.indices, spec_.rows, via_csr}, functors::IndexScan{},
                                 functors::AddScans{});
    if (scan.outside > 0) {
      return Outcome{Outcome::Code::kInvalidArgument,
                     std::to_string(scan.outside) + " of the batch's indices lie outside the field's " +
                         std::to_string(spec_.rows) + " rows; nothing of the part of the batch that holds them was added"};
    }
    if (update_passes) return ScatterUpdates(values, batch);
    // Only pairs that straddle two updates fall: each update's own indices increase.
    // There are at most updates - 1 such pairs, so the pass over the update starts runs
    // only when the count leaves the answer open.
    const bool rows_increase =
        via_csr && (scan.not_increasing == 0 ||
                    (scan.not_increasing < batch.updates && scan.not_increasing == FallsBetweenUpdates(batch)));
    // Each entry's update, where the path reads it (a CSR matrix built by sorting, the
    // union's counts, the segments' weights and counts; not an unweighted
    // row_sparse_sum's segments).
    if ((via_csr && !rows_increase) ||
        (!via_csr && (spec_.kind == ReducerKind::kUnion || spec_.op == ReducerOp::kWeightedSum ||
                      spec_.keeps_counts || spec_.keeps_weight_sums))) {
      FindEntryUpdates(batch);
    }
    if (via_csr) {
      CooBatch<In> coo{batch.indices, batch.update_offsets, values, total, batch.updates, spec_.rows, rows_increase,
                       rows_increase ? nullptr : Raw(entry_update_)};
      return csr_.Add(coo, ScatterTargets<Acc>{Raw(acc_), spec_.keeps_counts ? Raw(counts_) : nullptr,
                                               spec_.keeps_weight_sums ? Raw(weight_sums_) : nullptr,
                                               spec_.op == ReducerOp::kWeightedSum ? Raw(acc_weights_) : nullptr,
                                               batch.weights});
    }
    sorted_ids_.resize(static_cast<size_t>(total));
    thrust::copy(System::policy(), batch.indices, batch.indices + total, sorted_ids_.begin());
    order_.resize(static_cast<size_t>(total));
    thrust::sequence(System::policy(), order_.begin(), order_.end(), int64_t{0});
    thrust::stable_sort_by_key(System::policy(), sorted_ids_.begin(), sorted_ids_.end(), order_.begin());
    if (spec_.kind == ReducerKind::kUnion) return UnionBatch(values, batch);
    return ScatterBatch(values, batch);
  }

  // How many updates start at or below the index before them (functors::StartsNotAbove).
  int64_t FallsBetweenUpdates(const StagedBatch& batch) const {
    const thrust::counting_iterator<int64_t> first(0);
    return thrust::transform_reduce(System::policy(), first, first + batch.updates,
                                    functors::StartsNotAbove{batch.indices, batch.update_offsets}, int64_t{0},
                                    thrust::plus<int64_t>());
  }

  // entry_update_: each entry's update, from the offsets (the packer sends no per-entry
  // owners): entry k belongs to the update u with offsets[u] <= k < offsets[u + 1]. Each
  // update's number at its first entry, 0 elsewhere, then a running maximum.
  void FindEntryUpdates(const StagedBatch& batch) {
    entry_update_.resize(static_cast<size_t>(batch.entries));
    thrust::fill(System::policy(), entry_update_.begin(), entry_update_.end(), int32_t{0});
    thrust::for_each(System::policy(), thrust::counting_iterator<int64_t>(1),
                     thrust::counting_iterator<int64_t>(batch.updates),
                     functors::MarkUpdateStart{batch.update_offsets, Raw(entry_update_)});
    thrust::inclusive_scan(System::policy(), entry_update_.begin(), entry_update_.end(), entry_update_.begin(),
                           thrust::maximum<int32_t>());
  }

  // Whether to add the batch's updates one by one (ScatterUpdates) rather than sort its
  // entries: when every update's indices ascend, their offsets are at hand on the host,
  // and each pass has enough work to be worth its launch.
  bool AddsUpdateByUpdate(const StagedBatch& batch) const {
    return batch.updates_ascend && batch.host_update_offsets != nullptr &&
           batch.entries * spec_.row_width >= kMinElementsPerUpdatePass * batch.updates;
  }
  static constexpr int64_t kMinElementsPerUpdatePass = 4096;

  // Each update by a pass of its own, in batch order (functors::ScatterUpdateRuns): no
  // sort, no segments, and the same sums as ScatterBatch's.
  template <typename In>
  Outcome ScatterUpdates(const In* values, const StagedBatch& batch) {
    const int64_t width = spec_.row_width;
    const int64_t runs_per_row = RunsOf(width);
    const thrust::counting_iterator<int64_t> first(0);
    int64_t* counts = spec_.keeps_counts ? Raw(counts_) : nullptr;
    double* weight_sums = spec_.keeps_weight_sums ? Raw(weight_sums_) : nullptr;
    for (int64_t u = 0; u < batch.updates; ++u) {
      const int64_t begin = batch.host_update_offsets[u];
      const int64_t entries = batch.host_update_offsets[u + 1] - begin;
      if (entries == 0) continue;
      const int64_t items = entries * runs_per_row;
      const In* update_values = values + begin * width;
      if (spec_.op == ReducerOp::kWeightedSum) {
        thrust::for_each(System::policy(), first, first + items,
                         functors::ScatterUpdateRuns<true, Acc, In, kRun>{
                             Raw(acc_), counts, weight_sums, width, runs_per_row, entries, batch.indices + begin,
                             update_values, Raw(acc_weights_) + u, batch.weights + u});
      } else {
        thrust::for_each(System::policy(), first, first + items,
                         functors::ScatterUpdateRuns<false, Acc, In, kRun>{
                             Raw(acc_), counts, weight_sums, width, runs_per_row, entries, batch.indices + begin,
                             update_values, Raw(acc_weights_) + u, batch.weights + u});
      }
    }
    return Outcome{};
  }

  template <typename In>
  Outcome ScatterBatch(const In* values, const StagedBatch& batch) {
    const int64_t total = batch.entries;
    segment_rows_.resize(static_cast<size_t>(total));
    segment_lengths_.resize(static_cast<size_t>(total));
    const auto ends = thrust::reduce_by_key(System::policy(), sorted_ids_.begin(), sorted_ids_.end(),
                                            thrust::constant_iterator<int64_t>(1),
                                            segment_rows_.begin(), segment_lengths_.begin());
    const int64_t segments = ends.first - segment_rows_.begin();
    segment_starts_.resize(static_cast<size_t>(segments));
    thrust::exclusive_scan(System::policy(), segment_lengths_.begin(),
                           segment_lengths_.begin() + segments, segment_starts_.begin());
    const int64_t width = spec_.row_width;
    const int64_t runs_per_row = RunsOf(width);
    const int64_t items = segments * runs_per_row;
    const thrust::counting_iterator<int64_t> first(0);
    if (spec_.op == ReducerOp::kWeightedSum) {
      thrust::for_each(System::policy(), first, first + items,
                       functors::ScatterSegment<true, Acc, In, kRun>{
                           Raw(acc_), width, runs_per_row, items, Raw(segment_rows_), Raw(segment_starts_),
                           Raw(segment_lengths_), Raw(order_), Raw(entry_update_), values, Raw(acc_weights_)});
    } else {  // unweighted: the entries' updates are not read (nor derived, without counts)
      thrust::for_each(System::policy(), first, first + items,
                       functors::ScatterSegment<false, Acc, In, kRun>{
                           Raw(acc_), width, runs_per_row, items, Raw(segment_rows_), Raw(segment_starts_),
                           Raw(segment_lengths_), Raw(order_), nullptr, values, Raw(acc_weights_)});
    }
    if (spec_.keeps_counts || spec_.keeps_weight_sums) {
      thrust::for_each(System::policy(), first, first + segments,
                       functors::CountSegment{spec_.keeps_counts ? Raw(counts_) : nullptr,
                                              spec_.keeps_weight_sums ? Raw(weight_sums_) : nullptr,
                                              Raw(segment_rows_), Raw(segment_starts_),
                                              Raw(segment_lengths_), Raw(order_), Raw(entry_update_),
                                              batch.weights});
    }
    return Outcome{};
  }

  template <typename In>
  Outcome UnionBatch(const In* values, const StagedBatch& batch) {
    const int64_t total = batch.entries;
    // Values widened and updates, both in sorted order.
    Vec<Acc> sorted_values(static_cast<size_t>(total));
    Vec<int32_t> sorted_updates(static_cast<size_t>(total));
    const thrust::counting_iterator<int64_t> first(0);
    thrust::gather(System::policy(), order_.begin(), order_.end(),
                   thrust::make_transform_iterator(first, WidenEntry<Acc, In>{values}),
                   sorted_values.begin());
    thrust::gather(System::policy(), order_.begin(), order_.end(), entry_update_.begin(), sorted_updates.begin());
    Vec<int64_t> flags(static_cast<size_t>(total));
    thrust::transform(System::policy(), first, first + total, flags.begin(),
                      functors::NewContributor{Raw(sorted_ids_), Raw(sorted_updates)});
    Vec<int64_t> batch_indices(static_cast<size_t>(total));
    Vec<Acc> batch_values(static_cast<size_t>(total));
    Vec<int64_t> batch_counts(static_cast<size_t>(total));
    const auto ends = thrust::reduce_by_key(System::policy(), sorted_ids_.begin(), sorted_ids_.end(),
                                            sorted_values.begin(), batch_indices.begin(),
                                            batch_values.begin(), thrust::equal_to<int64_t>(),
                                            functors::AddOp<Acc>());
    thrust::reduce_by_key(System::policy(), sorted_ids_.begin(), sorted_ids_.end(), flags.begin(),
                          thrust::make_discard_iterator(), batch_counts.begin());
    const int64_t unique = ends.first - batch_indices.begin();
    batch_indices.resize(static_cast<size_t>(unique));
    batch_values.resize(static_cast<size_t>(unique));
    batch_counts.resize(static_cast<size_t>(unique));
    MergeUnion(batch_indices, batch_values, batch_counts);
    return Outcome{};
  }

  // state = state ∪ other, adding values and counts where indices meet (state first).
  void MergeUnion(const Vec<int64_t>& indices, const Vec<Acc>& values, const Vec<int64_t>& counts) {
    const size_t size = union_indices_.size() + indices.size();
    Vec<int64_t> merged_indices(size);
    Vec<Acc> merged_values(size);
    Vec<int64_t> merged_counts(size);
    thrust::merge_by_key(System::policy(), union_indices_.begin(), union_indices_.end(),
                         indices.begin(), indices.end(),
                         thrust::make_zip_iterator(thrust::make_tuple(acc_.begin(), counts_.begin())),
                         thrust::make_zip_iterator(thrust::make_tuple(values.begin(), counts.begin())),
                         merged_indices.begin(),
                         thrust::make_zip_iterator(thrust::make_tuple(merged_values.begin(), merged_counts.begin())));
    union_indices_.resize(size);
    acc_.resize(size);
    counts_.resize(size);
    const auto ends = thrust::reduce_by_key(
        System::policy(), merged_indices.begin(), merged_indices.end(),
        thrust::make_zip_iterator(thrust::make_tuple(merged_values.begin(), merged_counts.begin())),
        union_indices_.begin(), thrust::make_zip_iterator(thrust::make_tuple(acc_.begin(), counts_.begin())),
        thrust::equal_to<int64_t>(), functors::AddWithCount<Acc>());
    const size_t unique = static_cast<size_t>(ends.first - union_indices_.begin());
    union_indices_.resize(unique);
    acc_.resize(unique);
    counts_.resize(unique);
  }

  Outcome MergeNow(const ThrustFieldReducer& other) {
    EnsureState();
    if (!other.initialized_) return Outcome{};
    if (spec_.kind == ReducerKind::kUnion) {
      MergeUnion(other.union_indices_, other.acc_, other.counts_);
      return Outcome{};
    }
    switch (spec_.op) {
      case ReducerOp::kMax: CombineInto(other.acc_, functors::Combine<ReducerOp::kMax, Acc>()); break;
      case ReducerOp::kMin: CombineInto(other.acc_, functors::Combine<ReducerOp::kMin, Acc>()); break;
      default: CombineInto(other.acc_, functors::AddOp<Acc>());
    }
    thrust::transform(System::policy(), counts_.begin(), counts_.end(), other.counts_.begin(),
                      counts_.begin(), thrust::plus<int64_t>());
    thrust::transform(System::policy(), weight_sums_.begin(), weight_sums_.end(),
                      other.weight_sums_.begin(), weight_sums_.begin(), thrust::plus<double>());
    return Outcome{};
  }

  template <typename Op>
  void CombineInto(const Vec<Acc>& other, Op op) {
    thrust::transform(System::policy(), acc_.begin(), acc_.end(), other.begin(), acc_.begin(), op);
  }

  Outcome SaveNow(HostState<Acc>* out) const {
    EnsureState();
    ToHost(out->values, acc_);
    ToHost(out->counts, counts_);
    ToHost(out->weight_sums, weight_sums_);
    ToHost(out->indices, union_indices_);
    return Outcome{};
  }

  Outcome SaveResultNow(const ResultRequest& request) const {
    if (spec_.kind == ReducerKind::kUnion) {
      return Outcome{Outcome::Code::kInternal, "a sparse_sum_sparse state has no result of a fixed size"};
    }
    EnsureState();
    const size_t rows = static_cast<size_t>(spec_.rows);
    const auto internal = [](std::string message) { return Outcome{Outcome::Code::kInternal, std::move(message)}; };
    if (request.count != acc_.size()) {
      return internal("asked for " + std::to_string(request.count) + " result values of a state of " +
                      std::to_string(acc_.size()));
    }
    if ((request.counts != nullptr || request.divide == ResultRequest::Divide::kByRowCount) && counts_.size() != rows) {
      return internal("per-row counts asked of a state that keeps none");
    }
    if (request.divide == ResultRequest::Divide::kByRowWeightSum && weight_sums_.size() != rows) {
      return internal("per-row weight sums asked of a state that keeps none");
    }
    if (request.counts != nullptr) System::ToHost(request.counts, Raw(counts_), rows * sizeof(int64_t));
    if (!request.to_float64) return WriteResult<Acc>(request);
    if constexpr (std::is_integral_v<Acc>) return WriteResult<double>(request);
    return internal("a float64 result asked of a floating-point state of another type");
  }

  // The result values, made on the system into a vector of Out (or, undivided in the
  // state's own type, straight from the state) and copied to the request's host memory.
  template <typename Out>
  Outcome WriteResult(const ResultRequest& request) const {
    using Divide = ResultRequest::Divide;
    if constexpr (std::is_same_v<Out, Acc>) {
      if (request.divide == Divide::kNone) {
        System::ToHost(request.values, Raw(acc_), acc_.size() * sizeof(Acc));
        return Outcome{};
      }
    }
    Vec<Out> result(acc_.size());
    const int64_t n = static_cast<int64_t>(acc_.size());
    const thrust::counting_iterator<int64_t> first(0);
    switch (request.divide) {
      case Divide::kNone:
        thrust::transform(System::policy(), acc_.begin(), acc_.end(), result.begin(), functors::ConvertResult<Acc, Out>{});
        break;
      case Divide::kByScalar:
        thrust::transform(System::policy(), acc_.begin(), acc_.end(), result.begin(),
                          functors::DivideResult<Acc, Out>{static_cast<functors::DivisorOf<Acc>>(request.scalar)});
        break;
      case Divide::kByRowCount:
        thrust::transform(System::policy(), first, first + n, result.begin(),
                          functors::DivideByRow<Acc, Out, int64_t>{Raw(acc_), Raw(counts_), spec_.row_width});
        break;
      case Divide::kByRowWeightSum:
        thrust::transform(System::policy(), first, first + n, result.begin(),
                          functors::DivideByRow<Acc, Out, double>{Raw(acc_), Raw(weight_sums_), spec_.row_width});
        break;
    }
    System::ToHost(request.values, Raw(result), acc_.size() * sizeof(Out));
    return Outcome{};
  }

  Outcome ViewStateNow(DeviceState<Acc>* out) {
    if (spec_.kind == ReducerKind::kUnion) {
      return Outcome{Outcome::Code::kInternal, "a sparse_sum_sparse state has no fixed arrays to view"};
    }
    EnsureState();
    *out = DeviceState<Acc>{Raw(acc_), acc_.size(), Raw(counts_), counts_.size(), Raw(weight_sums_),
                            weight_sums_.size()};
    return Outcome{};
  }

  Outcome LoadNow(const HostState<Acc>& in) {
    EnsureState();
    ToDevice(acc_, in.values);
    ToDevice(counts_, in.counts);
    ToDevice(weight_sums_, in.weight_sums);
    ToDevice(union_indices_, in.indices);
    return Outcome{};
  }

  const ReducerSpec spec_;
  // State. kDense: acc_; kScatter: acc_ (rows * width), counts_ and weight_sums_ per row
  // when kept; kUnion: union_indices_, acc_ and counts_ per entry. Mutable because it is
  // allocated on first use, which may be a const Save.
  mutable bool initialized_ = false;
  mutable Vec<Acc> acc_;
  mutable Vec<int64_t> counts_;
  mutable Vec<double> weight_sums_;
  Vec<int64_t> union_indices_;
  // Working memory of one batch, kept between batches to avoid reallocating (the batch
  // itself is in the staging ring's slot).
  Vec<Acc> acc_weights_;
  Vec<int32_t> entry_update_;  // the update (0 .. updates - 1) of each entry
  Vec<int64_t> sorted_ids_;
  Vec<int64_t> order_;
  Vec<int64_t> segment_rows_;
  Vec<int64_t> segment_starts_;
  Vec<int64_t> segment_lengths_;
  CsrScatter<System, Acc> csr_;
};

template <typename System, typename Acc>
std::unique_ptr<StagedFieldReducer<Acc>> MakeThrustFieldReducer(const ReducerSpec& spec) {
  return std::make_unique<ThrustFieldReducer<System, Acc>>(spec);
}

template <typename System>
StagedReducerMakers ThrustReducerMakers() {
  return StagedReducerMakers{&MakeThrustFieldReducer<System, float>, &MakeThrustFieldReducer<System, double>,
                       &MakeThrustFieldReducer<System, int64_t>};
}

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_THRUST_FIELD_REDUCER_H_
