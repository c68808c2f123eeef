// CPU accumulator for the sparse-family intrinsics with a dense result: sparse_sum,
// sparse_mean, sparse_weighted_mean (COO: rows of width 1), row_sparse_sum and
// row_sparse_mean (rows of an [R, ...] table). Values are scattered into a dense
// accumulator; per-row contributor counts (and weight sums, for the weighted mean) are
// kept when the intrinsic needs them or the spec asks. An index repeated inside one
// update adds its values and counts that update once. A large COO batch is partitioned by
// row range first, so that the scatter runs bucket by bucket in cache, on every thread.
#ifndef FEDAGG_SERVICE_CORE_CPU_SCATTER_ACCUMULATOR_H_
#define FEDAGG_SERVICE_CORE_CPU_SCATTER_ACCUMULATOR_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>
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
  bool weighted() const { return field_.intrinsic == Intrinsic::kSparseWeightedMean; }

  const FieldSpec& field_;
  ThreadPool& pool_;
  std::vector<Acc> acc_;              // rows * row_width
  std::vector<int64_t> counts_;       // per row, when field_.keeps_counts
  std::vector<double> weight_sums_;   // per row, for sparse_weighted_mean
  // Per row, the serial of the last update that touched it: lets an update with a
  // repeated index count once. Working state only; not serialized.
  std::vector<uint64_t> last_touch_;
  uint64_t next_serial_ = 1;
  // A large COO batch's entries grouped by row range (buckets of 2^bucket_shift_ rows that
  // fit in cache), in batch order within each bucket; working memory reused between
  // batches (typed per input dtype over one byte buffer).
  template <typename In>
  struct PartitionedEntry {
    int64_t row;
    In value;
    uint32_t update;  // index in the batch
  };
  // Room for `entries` partitioned entries (implicit-lifetime objects in partition_bytes_,
  // whose allocation is aligned for them).
  template <typename In>
  PartitionedEntry<In>* PartitionBuffer(size_t entries) {
    static_assert(std::is_trivially_copyable_v<PartitionedEntry<In>> &&
                  alignof(PartitionedEntry<In>) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    partition_bytes_.resize(entries * sizeof(PartitionedEntry<In>));
    return reinterpret_cast<PartitionedEntry<In>*>(partition_bytes_.data());
  }
  int bucket_shift_ = 0;
  std::vector<std::byte> partition_bytes_;
  std::vector<size_t> bucket_starts_;  // bucket b's entries: [starts[b], starts[b + 1])
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_CPU_SCATTER_ACCUMULATOR_H_
