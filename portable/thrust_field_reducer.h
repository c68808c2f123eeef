// ThrustFieldReducer<System, Acc>: every reduction of the portable backends written once
// with Thrust algorithms, for any Thrust system (System supplies its vector type, its
// execution policy and host<->system copies: omp_system.h, cuda/cuda_system.h). Batches
// arrive already in the system's memory, in the staging layout (StagedBatch, laid out by
// batch_packer.h, copied by the staging ring); the entries' indices are checked against
// the field here, one pass on the system before anything is added (the same pass finds
// whether each update's indices increase strictly, where the CSR path needs to know).
//   dense    [B, C] part of a batch: one pass per column over the B rows (each input byte
//            read once), sum / weighted sum / max / min, float16 and bfloat16 decoded in place,
//            quantized codes unpacked, scaled by their block's scale and added in the same pass;
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
// The per-element functors its passes call are in thrust_reducer_functors.h.
// Compiles as C++17 with nvcc and with g++ (-fopenmp, Thrust's OpenMP system).
#ifndef FEDAGG_PORTABLE_THRUST_FIELD_REDUCER_H_
#define FEDAGG_PORTABLE_THRUST_FIELD_REDUCER_H_

#include <cmath>
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
#include "portable/thrust_reducer_functors.h"

namespace fedagg::portable {

template <typename System, typename Acc>
class ThrustFieldReducer final : public StagedFieldReducer<Acc> {
  template <typename T>
  using Vec = typename System::template vector<T>;

 public:
  explicit ThrustFieldReducer(const ReducerSpec& spec) : spec_(spec) {}

  Outcome Accumulate(const StagedBatch& batch) override {
    const int64_t elements = spec_.kind == ReducerKind::kDense ? batch.updates * batch.columns
                                                               : batch.entries * spec_.row_width;
    const typename System::WorkScope scope(elements);
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
    if (spec_.quantized_bits != 0) return AccumulateQuantized(batch);
    switch (spec_.in) {
      case InType::kF32: return AccumulateTyped<float>(batch);
      case InType::kF64: return AccumulateTyped<double>(batch);
      case InType::kI32: return AccumulateTyped<int32_t>(batch);
      case InType::kI64: return AccumulateTyped<int64_t>(batch);
      case InType::kF16: return AccumulateTyped<Half>(batch);
      case InType::kBF16: return AccumulateTyped<BHalf>(batch);
      case InType::kI8: return AccumulateSteps<int8_t>(batch);
      case InType::kI16: return AccumulateSteps<int16_t>(batch);
    }
    return Outcome{Outcome::Code::kInternal, "unknown input dtype"};
  }

  // A discretized dense part's 8- or 16-bit integer steps, added into an int64 state as
  // any integer values are (its 32-bit steps are kI32 values).
  template <typename Step>
  Outcome AccumulateSteps(const StagedBatch& batch) {
    if constexpr (std::is_same_v<Acc, int64_t>) {
      if (spec_.kind == ReducerKind::kDense && spec_.op == ReducerOp::kSum) {
        return DenseRun<ReducerOp::kSum>(static_cast<const Step*>(batch.values), batch);
      }
    }
    return Outcome{Outcome::Code::kInternal, "8- and 16-bit integer steps are summed dense into an int64 state only"};
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

  // A quantized dense part: one pass that unpacks each code, scales it by its block's
  // scale (and the update's weight) and adds it, rows in batch order.
  Outcome AccumulateQuantized(const StagedBatch& batch) {
    if (spec_.op != ReducerOp::kSum && spec_.op != ReducerOp::kWeightedSum) {
      return Outcome{Outcome::Code::kInternal, "quantized values take a sum or weighted sum only"};
    }
    acc_weights_.resize(static_cast<size_t>(batch.updates));
    thrust::transform(System::policy(), batch.weights, batch.weights + batch.updates, acc_weights_.begin(),
                      functors::CastTo<Acc>());
    switch (spec_.quantized_bits) {
      case 1: return QuantizedRun<1>(batch);
      case 2: return QuantizedRun<2>(batch);
      case 4: return QuantizedRun<4>(batch);
      case 8: return QuantizedRun<8>(batch);
    }
    return Outcome{Outcome::Code::kInternal, "quantized values of an unknown bit width"};
  }

  template <int kBits>
  Outcome QuantizedRun(const StagedBatch& batch) {
    const auto run = [&](auto weighted) {
      thrust::for_each(
          System::policy(), thrust::counting_iterator<int64_t>(0),
          thrust::counting_iterator<int64_t>(RunsOf(batch.columns)),
          functors::DenseQuantizedColumns<decltype(weighted)::value, Acc, kBits, kRun>{
              Raw(acc_) + batch.column_begin, static_cast<const uint8_t*>(batch.values), batch.scales,
              Raw(acc_weights_), batch.updates, batch.columns, QuantizedRowBytes(spec_, batch.columns),
              QuantizedRowBlocks(spec_, batch.columns), spec_.block,
              static_cast<Acc>(2.0 / static_cast<double>((1u << kBits) - 1))});
    };
    if (spec_.op == ReducerOp::kWeightedSum) {
      run(std::true_type{});
    } else {
      run(std::false_type{});
    }
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
    if (request.step != 0 && (!std::is_integral_v<Acc> || request.divide == ResultRequest::Divide::kByRowCount ||
                              request.divide == ResultRequest::Divide::kByRowWeightSum)) {
      return internal("discretized steps asked of a state that is not dense integer sums");
    }
    if (request.counts != nullptr) System::ToHost(request.counts, Raw(counts_), rows * sizeof(int64_t));
    if (request.type == ResultRequest::Type::kState) return WriteResult<Acc>(request);
    if constexpr (std::is_integral_v<Acc>) {
      if (request.type == ResultRequest::Type::kFloat64) return WriteResult<double>(request);
      if (request.step != 0) return WriteResult<float>(request);
    }
    return internal("a result of another type asked of a state that cannot make it");
  }

  // The result values, made on the system into a vector of Out (or, undivided and not
  // rotated, in the state's own type, straight from the state), rotated back where the
  // request says, and copied to the request's host memory.
  template <typename Out>
  Outcome WriteResult(const ResultRequest& request) const {
    using Divide = ResultRequest::Divide;
    if constexpr (std::is_same_v<Out, Acc>) {
      if (request.divide == Divide::kNone && request.rotation == 0 && request.step == 0) {
        System::ToHost(request.values, Raw(acc_), acc_.size() * sizeof(Acc));
        return Outcome{};
      }
    }
    Vec<Out> result(acc_.size());
    const int64_t n = static_cast<int64_t>(acc_.size());
    const thrust::counting_iterator<int64_t> first(0);
    if (request.step != 0) {
      thrust::transform(System::policy(), acc_.begin(), acc_.end(), result.begin(),
                        functors::StepsResult<Acc, Out>{request.step,
                                                        request.divide == Divide::kByScalar ? request.scalar : 1.0,
                                                        request.modulus_bits});
      System::ToHost(request.values, Raw(result), acc_.size() * sizeof(Out));
      return Outcome{};
    }
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
    if constexpr (std::is_floating_point_v<Out>) {
      if (request.rotation > 0) Unrotate(result, request.rotation, request.rotation_seed);
    }
    System::ToHost(request.values, Raw(result), acc_.size() * sizeof(Out));
    return Outcome{};
  }

  // `values` rotated back over each whole run of `run` values, in float64 (a copy when
  // they are float32), as the host's Unrotate does (service/core/rotation.h).
  template <typename Out>
  static void Unrotate(Vec<Out>& values, int64_t run, uint64_t seed) {
    const int64_t whole = static_cast<int64_t>(values.size()) / run * run;
    if (whole == 0) return;
    Vec<double> wide(values.begin(), values.begin() + whole);
    const thrust::counting_iterator<int64_t> first(0);
    for (int64_t h = 1; h < run; h *= 2) {
      thrust::for_each(System::policy(), first, first + whole / 2, functors::HadamardStage{Raw(wide), h});
    }
    thrust::for_each(System::policy(), first, first + whole,
                     functors::UnrotateSigns{Raw(wide), 1.0 / std::sqrt(static_cast<double>(run)), seed});
    thrust::transform(System::policy(), wide.begin(), wide.end(), values.begin(), functors::ConvertResult<double, Out>{});
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
