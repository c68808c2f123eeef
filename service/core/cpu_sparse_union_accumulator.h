// CPU accumulator for sparse_sum_sparse: the result is sparse too — the union of all
// coordinates any update touched, coalesced and sorted, with per-coordinate contributor
// counts. Memory grows with the number of distinct coordinates, not with the dense size.
// A batch is sorted by coordinate (a stable radix sort, so sums keep batch order),
// reduced by key, then merged linearly into the running sorted state.
#ifndef FEDAGG_SERVICE_CORE_CPU_SPARSE_UNION_ACCUMULATOR_H_
#define FEDAGG_SERVICE_CORE_CPU_SPARSE_UNION_ACCUMULATOR_H_

#include <cstdint>
#include <vector>

#include "service/core/field_accumulator.h"

namespace fedagg {

template <typename Acc>
class CpuSparseUnionAccumulator final : public FieldAccumulator {
 public:
  explicit CpuSparseUnionAccumulator(const FieldSpec& field) : field_(field) {}

  absl::Status AccumulateBatch(absl::Span<const FieldValue* const> values,
                               absl::Span<const double> weights) override;
  absl::Status MergeWith(const FieldAccumulator& other) override;
  absl::Status SerializeTo(ByteWriter& out) const override;
  absl::Status DeserializeFrom(ByteReader& in, int64_t contributions) override;
  absl::StatusOr<ReportedField> Report(int64_t contributions, double weight_sum) const override;
  uint64_t MemoryBytes() const override;

 private:
  // Coalesced state: strictly increasing indices, one value and count each.
  struct Coalesced {
    std::vector<int64_t> indices;
    std::vector<Acc> values;
    std::vector<int64_t> counts;
  };
  // this = this ∪ other, adding values and counts where indices meet.
  void MergeSorted(const Coalesced& other);

  const FieldSpec& field_;
  Coalesced state_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_CPU_SPARSE_UNION_ACCUMULATOR_H_
