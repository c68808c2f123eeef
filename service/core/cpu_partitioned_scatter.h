// The CPU backend's scatter of a batch of COO updates (one value per index) into a dense
// table: sparse_sum, sparse_mean and sparse_weighted_mean. A plain scatter of random
// indices into a table far larger than the caches pays one cache miss per entry, with no
// locality to exploit. So the batch's entries are first radix-partitioned by coordinate
// range into buckets whose share of the table (and of the counts and weight sums) fits
// in a core's L2 cache, in one stable pass; then the buckets are scattered one by one,
// spread over the thread pool, each touching only its share of the table. Per coordinate,
// values are added in batch order, as a serial scatter would add them, so results are
// bit-identical to one. Counts (each update counted once per coordinate it touches, however
// often it repeats the index) and weight sums are kept in the same pass, with a per-bucket
// bitmap instead of per-coordinate state.
// Updates whose indices ascend (most clients sort them) are already in bucket order: a run
// of them skips the partition pass and its buffer, and each bucket reads its range of every
// update in place (1.4-1.6x faster here: bench/core_reduction_bench.cc,
// BM_SparseSumAscending against BM_SparseSumColdTable). A batch that mixes ascending and
// unsorted updates is cut into runs of one kind, in batch order.
#ifndef FEDAGG_SERVICE_CORE_CPU_PARTITIONED_SCATTER_H_
#define FEDAGG_SERVICE_CORE_CPU_PARTITIONED_SCATTER_H_

#include <cstdint>

#include "absl/types/span.h"
#include "service/core/field_value.h"
#include "service/core/thread_pool.h"

namespace fedagg::cpu {

// The dense arrays a batch adds into: one accumulator element per coordinate, and per
// coordinate the number of updates that touched it and the sum of their weights (each
// empty when the field does not keep it).
template <typename Acc>
struct ScatterTarget {
  absl::Span<Acc> acc;
  absl::Span<int64_t> counts;
  absl::Span<double> weight_sums;
};

// Adds values[i] (weighted by weights[i] when `weighted`) into `target`. Indices were
// validated: each is in [0, target.acc.size()). The partition buffer lives for the call
// only, and is bounded: a large batch is partitioned and scattered a run of whole updates
// at a time (at most 4M entries a run, or one update's when an update alone has more).
template <typename Acc>
void PartitionedScatterAdd(absl::Span<const FieldValue* const> values,
                           absl::Span<const double> weights, bool weighted,
                           ScatterTarget<Acc> target, ThreadPool& pool);

}  // namespace fedagg::cpu

#endif  // FEDAGG_SERVICE_CORE_CPU_PARTITIONED_SCATTER_H_
