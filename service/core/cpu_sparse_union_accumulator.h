// CPU accumulator for sparse_sum_sparse: the result is sparse too — the union of all
// coordinates any update touched, coalesced and sorted, with per-coordinate contributor
// counts. Memory grows with the number of distinct coordinates, not with the dense size.
//
// The coordinates are cut into shards of 2^shard_bits (at most 2^10 shards), and the
// running state is kept per shard: sorted, coalesced (index, value, count) arrays. A batch
// is radix-partitioned by shard (cpu_coordinate_partition.h, one stable pass), then the
// shards are worked on in parallel over the thread pool: each sorts its part of the batch
// (a stable radix sort on the coordinate's offset in the shard, small enough to stay in a
// core's cache) and adds it into its state: coordinates the state has are added in place,
// new ones merged in from the back. A coordinate's values are summed in batch order, then
// added to its running value, as one serial sort of the whole batch would: results are
// bit-identical to that. A batch that touches few shards works on only those, and once
// the coordinates of a round have been seen, batches move no state entries at all.
#ifndef FEDAGG_SERVICE_CORE_CPU_SPARSE_UNION_ACCUMULATOR_H_
#define FEDAGG_SERVICE_CORE_CPU_SPARSE_UNION_ACCUMULATOR_H_

#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "service/core/field_accumulator.h"
#include "service/core/thread_pool.h"

namespace fedagg {

template <typename Acc>
class CpuSparseUnionAccumulator final : public FieldAccumulator {
 public:
  CpuSparseUnionAccumulator(const FieldSpec& field, ThreadPool& pool);

  absl::Status AccumulateBatch(absl::Span<const FieldValue* const> values,
                               absl::Span<const double> weights) override;
  absl::Status MergeWith(const FieldAccumulator& other) override;
  absl::Status SerializeTo(ByteWriter& out) const override;
  absl::Status DeserializeFrom(ByteReader& in, int64_t contributions) override;
  absl::StatusOr<ReportedField> Report(int64_t contributions, double weight_sum) const override;
  uint64_t MemoryBytes() const override;

  // A vector whose resize leaves new elements uninitialised: the merge writes them all.
  template <typename T>
  struct UninitializedAllocator : std::allocator<T> {
    template <typename U>
    struct rebind {
      using other = UninitializedAllocator<U>;
    };
    template <typename U>
    void construct(U* p) noexcept {
      ::new (static_cast<void*>(p)) U;
    }
    template <typename U, typename... Args>
    void construct(U* p, Args&&... args) {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  };
  template <typename T>
  using Array = std::vector<T, UninitializedAllocator<T>>;

  // One shard's coalesced state: strictly increasing indices, one value and count each.
  struct Shard {
    Array<int64_t> indices;
    Array<Acc> values;
    Array<int64_t> counts;
    // What cpu::MergeIntoShard (union_shards.h) asks of a shard's values.
    void ResizeValues(size_t n) { values.resize(n); }
    void CopyValue(size_t i, const Shard& other, size_t j) { values[i] = other.values[j]; }
  };

 private:
  size_t Nonzeros() const;

  const FieldSpec& field_;
  ThreadPool& pool_;
  const int shard_bits_;
  std::vector<Shard> shards_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_CPU_SPARSE_UNION_ACCUMULATOR_H_
