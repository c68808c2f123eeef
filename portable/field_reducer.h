// FieldReducer: the reduction of one field on a Thrust system (a GPU through CUDA, or the
// CPU's cores through OpenMP), as a plain C++17 interface. No Abseil and no Thrust here,
// so that nvcc (C++17) and g++ (C++20) both read it: thrust_field_reducer.h implements it
// for any Thrust system, and portable_accumulator.h adapts it to fedagg's FieldAccumulator.
// The state lives in the system's memory for the reducer's life; only Save copies it out.
#ifndef FEDAGG_PORTABLE_FIELD_REDUCER_H_
#define FEDAGG_PORTABLE_FIELD_REDUCER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fedagg::portable {

// The transport dtype of a field's values; numbered as fedagg::DType.
enum class InType : uint8_t { kF32 = 1, kF64 = 2, kI32 = 3, kI64 = 4, kF16 = 5, kBF16 = 6 };

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
};

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

template <typename Acc>
class FieldReducer {
 public:
  virtual ~FieldReducer() = default;

  // Adds a batch. Indices outside [0, rows) are refused (kInvalidArgument) before any
  // value is scattered, so the state is unchanged then.
  virtual Outcome Accumulate(const HostBatch& batch) = 0;
  // Adds a reducer of the same spec and system.
  virtual Outcome Merge(const FieldReducer& other) = 0;
  virtual Outcome Save(HostState<Acc>* out) const = 0;
  // Replaces the state; `in` must be valid for the spec (the adapter checks it first).
  virtual Outcome Load(const HostState<Acc>& in) = 0;
  // Bytes of host memory the reducer holds (state and working memory), for the node's
  // memory budget; 0 when they live on a device, whose memory the budget does not cover.
  virtual uint64_t HostBytes() const = 0;
};

// One Thrust system's reducers, made by the library that instantiates them (or by a
// composition of such makers: one per device, multi_device_reducer.h).
template <typename Acc>
using ReducerMaker = std::function<std::unique_ptr<FieldReducer<Acc>>(const ReducerSpec& spec)>;

struct ReducerMakers {
  ReducerMaker<float> f32;
  ReducerMaker<double> f64;
  ReducerMaker<int64_t> i64;
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_FIELD_REDUCER_H_
