// ExactFieldAccumulator: the accumulator of a floating-point field of a deterministic
// aggregation (ReductionOptions::deterministic), on every backend. It keeps exact sums
// (exact_sums.h) instead of float sums, so the field's result is the same, to the bit,
// whatever the order of the updates, their batches and the shape of the tree of
// aggregators: each value (times its update's weight, in float64, for weighted
// intrinsics) is added exactly; a result is the exact sum rounded to float64, divided in
// float64 for the means (by the count, the weight sum, or the coordinate's count or
// weight sum, all exact), then rounded to the result dtype. Serves every intrinsic that
// sums: the dense ones (federated_sum, _mean, _weighted_mean), the dense-result sparse
// family and sparse_sum_sparse. Its state is larger than a float one (ExactSums::
// BytesPerSum per element, per-row weight sums too), so FixedStateBytes counts it. A
// sparse_sum_sparse field keeps its state in an ExactSparseUnion (exact_sparse_union.h).
#ifndef FEDAGG_SERVICE_CORE_EXACT_FIELD_ACCUMULATOR_H_
#define FEDAGG_SERVICE_CORE_EXACT_FIELD_ACCUMULATOR_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "service/core/exact_sparse_union.h"
#include "service/core/exact_sums.h"
#include "service/core/field_accumulator.h"
#include "service/core/thread_pool.h"

namespace fedagg {

class ExactFieldAccumulator final : public FieldAccumulator {
 public:
  // `field.exact_sum` must be set.
  ExactFieldAccumulator(const FieldSpec& field, ThreadPool& pool);

  absl::Status AccumulateBatch(absl::Span<const FieldValue* const> values,
                               absl::Span<const double> weights) override;
  absl::Status MergeWith(const FieldAccumulator& other) override;
  absl::Status SerializeTo(ByteWriter& out) const override;
  absl::Status DeserializeFrom(ByteReader& in, int64_t contributions) override;
  absl::StatusOr<ReportedField> Report(int64_t contributions, double weight_sum) const override;
  uint64_t MemoryBytes() const override;

 private:
  bool is_union() const { return union_.has_value(); }
  void AccumulateDense(absl::Span<const FieldValue* const> values, absl::Span<const double> weights);
  void AccumulateRows(absl::Span<const FieldValue* const> values, absl::Span<const double> weights);
  // The sums rounded to float64, one per element.
  std::vector<double> RoundedSums(const ExactSums& sums) const;

  const FieldSpec& field_;
  ThreadPool& pool_;
  const bool weighted_;
  ExactSums sums_;                 // per element (none for sparse_sum_sparse)
  std::vector<int64_t> counts_;    // per row when kept
  ExactSums weight_sums_;          // per row, sparse_weighted_mean only (float64 grid)
  std::optional<ExactSparseUnion> union_;  // sparse_sum_sparse's state
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_EXACT_FIELD_ACCUMULATOR_H_
