// CPU accumulator for the dense intrinsics: federated_sum, federated_mean,
// federated_weighted_mean, federated_max and federated_min. Batches are reduced in one
// pass over the accumulator, split into column ranges across the thread pool; encoded
// values (quantized, discretized) are decoded as they are added.
#ifndef FEDAGG_SERVICE_CORE_CPU_DENSE_ACCUMULATOR_H_
#define FEDAGG_SERVICE_CORE_CPU_DENSE_ACCUMULATOR_H_

#include <vector>

#include "service/core/field_accumulator.h"
#include "service/core/thread_pool.h"

namespace fedagg {

// Acc is the accumulation type: float, double or int64_t (see ReductionSpec).
template <typename Acc>
class CpuDenseAccumulator final : public FieldAccumulator {
 public:
  CpuDenseAccumulator(const FieldSpec& field, ThreadPool& pool);

  absl::Status AccumulateBatch(absl::Span<const FieldValue* const> values,
                               absl::Span<const double> weights) override;
  absl::Status MergeWith(const FieldAccumulator& other) override;
  absl::Status SerializeTo(ByteWriter& out) const override;
  absl::Status DeserializeFrom(ByteReader& in, int64_t contributions) override;
  absl::StatusOr<ReportedField> Report(int64_t contributions, double weight_sum) const override;
  uint64_t MemoryBytes() const override;

 private:
  bool is_extreme() const;
  // A batch of quantized (float Acc) or discretized (int64 Acc) rows, decoded as added.
  void AccumulateEncoded(absl::Span<const FieldValue* const> values, const Acc* weights);

  const FieldSpec& field_;
  ThreadPool& pool_;
  std::vector<Acc> acc_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_CPU_DENSE_ACCUMULATOR_H_
