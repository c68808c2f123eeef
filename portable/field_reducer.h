// FieldReducer: the reduction of one field on a Thrust system (a GPU through CUDA, or the
// CPU's cores through OpenMP), as a plain C++17 interface. No Abseil and no Thrust here,
// so that nvcc (C++17) and g++ (C++20) both read it. Two layers:
//   StagedFieldReducer  reduces a batch already copied into the system's memory in the
//                       staging layout (StagedBatch); thrust_field_reducer.h implements it
//                       for any Thrust system;
//   FieldReducer        takes a batch in host memory; ring_field_reducer.h packs it into
//                       slots of a staging ring whose copies and reductions overlap, over
//                       a StagedFieldReducer.
// portable_accumulator_factory.cc adapts a FieldReducer to fedagg's FieldAccumulator.
// The state lives in the system's memory for the reducer's life; only Save copies it out.
#ifndef FEDAGG_PORTABLE_FIELD_REDUCER_H_
#define FEDAGG_PORTABLE_FIELD_REDUCER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fedagg::portable {

// The transport dtype of a field's values; numbered as fedagg::DType up to 6. kI8 and kI16
// are a discretized field's 8- and 16-bit integer steps (service/core/value_encoding.h),
// which fedagg::DType has no name for; its 32-bit steps are kI32.
enum class InType : uint8_t { kF32 = 1, kF64 = 2, kI32 = 3, kI64 = 4, kF16 = 5, kBF16 = 6, kI8 = 7, kI16 = 8 };

constexpr size_t InTypeBytes(InType type) {
  switch (type) {
    case InType::kF64:
    case InType::kI64: return 8;
    case InType::kF16:
    case InType::kBF16:
    case InType::kI16: return 2;
    case InType::kI8: return 1;
    default: return 4;
  }
}

enum class ReducerKind : uint8_t {
  kDense,    // [B, D] batches into a dense accumulator of D
  kScatter,  // (row id, row of row_width) entries into a dense [rows, row_width] table
  kUnion,    // (index, value) entries into a sorted coalesced sparse state
};

enum class ReducerOp : uint8_t { kSum, kWeightedSum, kMax, kMin };

struct ReducerSpec {
  ReducerKind kind = ReducerKind::kDense;
  ReducerOp op = ReducerOp::kSum;  // kScatter / kUnion: kSum or kWeightedSum
  InType in = InType::kF32;
  int64_t rows = 1;                // kScatter: table rows; kUnion: index range; kDense: 1
  int64_t row_width = 1;           // kDense: elements; kScatter: row width; kUnion: 1
  bool keeps_counts = false;       // kScatter: per-row contributor counts
  bool keeps_weight_sums = false;  // kScatter: per-row weight sums (weighted mean)
  // kDense only: the values are quantized (service/core/value_encoding.h): each update a
  // section of ceil(row_width / block) float32 scales, then codes of `quantized_bits` bits
  // (1, 2, 4 or 8) packed from each byte's lowest bit up, decoded as they are added.
  // 0: plain values of `in`.
  int quantized_bits = 0;
  int64_t block = 0;  // coordinates per scale, a multiple of 8
};

// A quantized part's bytes of codes and scales per row, for `columns` columns that start
// on a block.
constexpr int64_t QuantizedRowBytes(const ReducerSpec& spec, int64_t columns) {
  return (columns * spec.quantized_bits + 7) / 8;
}
constexpr int64_t QuantizedRowBlocks(const ReducerSpec& spec, int64_t columns) {
  return (columns + spec.block - 1) / spec.block;
}

// What a call came to; the adapter turns it into an absl::Status.
struct Outcome {
  enum class Code : uint8_t { kOk, kResourceExhausted, kInvalidArgument, kInternal };
  Code code = Code::kOk;
  std::string message;

  bool ok() const { return code == Code::kOk; }
};

// One batch, in host memory: update u has entries[u] entries (kDense: row_width values)
// with ids indices[u] (kScatter / kUnion) and values values[u] of the spec's InType.
struct HostBatch {
  int64_t updates = 0;
  const int64_t* const* indices = nullptr;
  const int64_t* entries = nullptr;
  const void* const* values = nullptr;
  const double* weights = nullptr;  // one per update
  // Per update: its indices ascend (repeats allowed), as validation found; null: not known.
  const bool* ascending = nullptr;
};

// One batch (or a slot-sized part of one, see batch_packer.h) in the system's memory, as
// the staging ring delivers it. kDense: the values of `updates` rows restricted to columns
// [column_begin, column_begin + columns), row-major. kScatter / kUnion: `entries` entries,
// update by update, each an index and row_width values, the indices as the caller sent
// them (the staged reducer checks them against [0, rows) before adding anything).
struct StagedBatch {
  int64_t updates = 0;
  int64_t entries = 0;              // kScatter / kUnion
  int64_t column_begin = 0;         // kDense
  int64_t columns = 0;              // kDense
  const void* values = nullptr;     // of the spec's InType
  const int64_t* indices = nullptr;         // [entries]
  const int64_t* update_offsets = nullptr;  // [updates + 1]: first entry of each update, then entries
  const double* weights = nullptr;        // [updates]
  // kDense, quantized: `values` holds each row's codes of the part's columns (which start
  // on a block), QuantizedRowBytes(columns) bytes a row, and `scales` each row's scales of
  // its blocks, QuantizedRowBlocks(columns) a row.
  const float* scales = nullptr;
  // The same offsets in host memory, unchanged while Accumulate runs; null: not at hand.
  const int64_t* host_update_offsets = nullptr;
  bool updates_ascend = false;  // every update's indices ascend (repeats allowed)
};

// A report's last step done where a kDense / kScatter state is (service/core/
// field_report.h has the same step over host arrays): each value converted to the result
// type — the state's type, or for an integer state float64 (its mean; a discretized
// field's result) or float32 (a discretized float32 field's result) — after a division in
// the state's precision (float64 for an integer state) by nothing, by `scalar`, or by its
// row's count or weight sum (a row whose divisor is 0 reports 0); the results written to
// `values` (`count` of them, the state's rows × row_width) in host memory, and the per-row
// counts to `counts` (rows of them) unless it is null. A discretized field's integer steps
// (`step` > 0, its scale) become float64(value) × step ÷ (nothing or `scalar`). A rotated
// field's result (`rotation` R > 0: service/core/rotation.h) is rotated back on the
// system, in float64, over each whole run of R values, before it is written.
struct ResultRequest {
  enum class Divide : uint8_t { kNone, kByScalar, kByRowCount, kByRowWeightSum };
  enum class Type : uint8_t { kState, kFloat64, kFloat32 };
  Divide divide = Divide::kNone;
  double scalar = 0;  // kByScalar
  Type type = Type::kState;
  double step = 0;  // an integer state's discretized steps: kNone or kByScalar only
  int modulus_bits = 0;  // with `step`: the steps are the state's low bits, signed (secure aggregation)
  int64_t rotation = 0;        // a power of two, or 0: not rotated
  uint64_t rotation_seed = 0;  // draws the rotation's signs
  void* values = nullptr;
  size_t count = 0;
  int64_t* counts = nullptr;
};

// The state copied to the host, laid out as the partial aggregate format stores it:
// kDense: values; kScatter: values, counts, weight_sums; kUnion: indices, values, counts.
template <typename Acc>
struct HostState {
  std::vector<int64_t> indices;
  std::vector<Acc> values;
  std::vector<int64_t> counts;
  std::vector<double> weight_sums;
};

// Reduces batches that are already in its system's memory. Accumulate runs on the
// staging ring's compute thread and returns only once nothing on the device reads the
// batch any more (its slot is reused next); the other calls run on the caller's thread,
// never at the same time as an Accumulate of the same reducer.
template <typename Acc>
class StagedFieldReducer {
 public:
  using Accumulated = Acc;
  virtual ~StagedFieldReducer() = default;

  // kInvalidArgument, with nothing added, when an entry's index lies outside [0, rows).
  virtual Outcome Accumulate(const StagedBatch& batch) = 0;
  // Adds a reducer of the same spec and system.
  virtual Outcome Merge(const StagedFieldReducer& other) = 0;
  virtual Outcome Save(HostState<Acc>* out) const = 0;
  // kDense / kScatter: writes the field's result as `request` says, made on the system
  // from the state (no host copy of the state); kInternal for a kUnion state, or sizes
  // other than the state's.
  virtual Outcome SaveResult(const ResultRequest& request) const = 0;
  // Replaces the state; `in` must be valid for the spec (the adapter checks it first).
  virtual Outcome Load(const HostState<Acc>& in) = 0;
  // Bytes of host memory the reducer holds (state and working memory), for the node's
  // memory budget; 0 when they live on a device, whose memory the budget does not cover.
  virtual uint64_t HostBytes() const = 0;
};

template <typename Acc>
class FieldReducer {
 public:
  virtual ~FieldReducer() = default;

  // Adds a batch. The reduction may finish after the call returns: a failure found then
  // is returned by the next call (and every one after). Indices outside [0, rows) are
  // such a failure (kInvalidArgument), found on the device before the part of the batch
  // that holds them adds anything; a batch staged in several parts may have had earlier
  // parts added, so the reducer is failed from then on. Callers validate indices first
  // (fedagg's accumulators trust their input): this guards the device's memory.
  virtual Outcome Accumulate(const HostBatch& batch) = 0;
  // Adds a reducer of the same spec and system.
  virtual Outcome Merge(const FieldReducer& other) = 0;
  virtual Outcome Save(HostState<Acc>* out) const = 0;
  // kDense / kScatter: writes the field's result as `request` says, made on the system
  // from the state (no host copy of the state); kInternal for a kUnion state, or sizes
  // other than the state's.
  virtual Outcome SaveResult(const ResultRequest& request) const = 0;
  // Replaces the state; `in` must be valid for the spec (the adapter checks it first).
  virtual Outcome Load(const HostState<Acc>& in) = 0;
  // Bytes of host memory the reducer holds (state and working memory), for the node's
  // memory budget; 0 when they live on a device, whose memory the budget does not cover.
  virtual uint64_t HostBytes() const = 0;
};

// One Thrust system's reducers, made by the library that instantiates them
// (thrust_field_reducer.h); StagedReducerMakers has one maker per accumulator type.
template <typename Acc>
using StagedReducerMaker = std::unique_ptr<StagedFieldReducer<Acc>> (*)(const ReducerSpec& spec);

struct StagedReducerMakers {
  StagedReducerMaker<float> f32;
  StagedReducerMaker<double> f64;
  StagedReducerMaker<int64_t> i64;
};

// A backend's field reducers: one device's, fed through its staging ring
// (ring_field_reducer.h), or a composition of those, one per device
// (multi_device_reducer.h).
template <typename Acc>
using ReducerMaker = std::function<std::unique_ptr<FieldReducer<Acc>>(const ReducerSpec& spec)>;

struct ReducerMakers {
  ReducerMaker<float> f32;
  ReducerMaker<double> f64;
  ReducerMaker<int64_t> i64;
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_FIELD_REDUCER_H_
