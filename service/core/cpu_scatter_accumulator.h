// CPU accumulator for the sparse-family intrinsics with a dense result: sparse_sum,
// sparse_mean, sparse_weighted_mean (COO: rows of width 1), row_sparse_sum and
// row_sparse_mean (rows of an [R, ...] table). Values are scattered into a dense
// accumulator; per-row contributor counts (and weight sums, for the weighted mean) are
// kept when the intrinsic needs them or the spec asks. An index repeated inside one
// update adds its values and counts that update once. COO batches are radix-partitioned
// by coordinate range first (cpu_partitioned_scatter.h); row-sparse batches add whole
// rows, threads owning disjoint row ranges.
#ifndef FEDAGG_SERVICE_CORE_CPU_SCATTER_ACCUMULATOR_H_
#define FEDAGG_SERVICE_CORE_CPU_SCATTER_ACCUMULATOR_H_

#include <cstdint>
#include <vector>

#include "service/core/field_accumulator.h"
#include "service/core/thread_pool.h"

namespace fedagg {

template <typename Acc>
class CpuScatterAccumulator final : public FieldAccumulator {
 public:
  CpuScatterAccumulator(const FieldSpec& field, ThreadPool& pool);

  absl::Status AccumulateBatch(absl::Span<const FieldValue* const> values,
                               absl::Span<const double> weights) override;
  absl::Status MergeWith(const FieldAccumulator& other) override;
  absl::Status SerializeTo(ByteWriter& out) const override;
  absl::Status DeserializeFrom(ByteReader& in, int64_t contributions) override;
  absl::StatusOr<ReportedField> Report(int64_t contributions, double weight_sum) const override;
  uint64_t MemoryBytes() const override;

 private:
  bool weighted() const { return IsWeighted(field_.intrinsic); }
  void AccumulateRows(absl::Span<const FieldValue* const> values);

  const FieldSpec& field_;
  ThreadPool& pool_;
  std::vector<Acc> acc_;              // rows * row_width
  std::vector<int64_t> counts_;       // per row, when field_.keeps_counts
  std::vector<double> weight_sums_;   // per row, when field_.keeps_weight_sums
  // Row-sparse fields with counts: per row, the serial of the last update that touched
  // it, so that an update with a repeated row id counts once (8 bytes a row of
  // row_width elements; the COO family dedupes per bucket instead). Working state only;
  // not serialized.
  std::vector<uint64_t> last_touch_;
  uint64_t next_serial_ = 1;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_CPU_SCATTER_ACCUMULATOR_H_
