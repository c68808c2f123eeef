// PartialAggregate: the mergeable state of one aggregation at one node — per field the
// running reduction, plus the number of contributions and their total weight.
//   Accumulate / AccumulateBatch  add validated client updates (all or nothing)
//   MergeWith                     adds another node's partial aggregate of the same spec
//   Serialize / Deserialize       the versioned binary format of
//                                 docs/PARTIAL_AGGREGATE_FORMAT.md (travels up the tree)
//   Report                        the result: sums, means, extremes, sparse unions, counts
// Sum and merge are associative: any partition of the same updates, merged in any order,
// reports the same result (exactly for integers, within float rounding otherwise).
// Not thread-safe: one owner at a time (the reduction itself uses the thread pool).
#ifndef FEDAGG_SERVICE_CORE_PARTIAL_AGGREGATE_H_
#define FEDAGG_SERVICE_CORE_PARTIAL_AGGREGATE_H_

#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/core/aggregate_result.h"
#include "service/core/field_accumulator.h"
#include "service/core/field_value.h"
#include "service/core/reduction_spec.h"
#include "service/core/thread_pool.h"

namespace fedagg {

class PartialAggregate {
 public:
  // Version of the serialized format written by Serialize().
  static constexpr uint32_t kFormatVersion = 1;

  explicit PartialAggregate(std::shared_ptr<const ReductionSpec> spec,
                            ThreadPool& pool = ThreadPool::Default());
  PartialAggregate(PartialAggregate&&) = default;
  PartialAggregate& operator=(PartialAggregate&&) = default;

  // Validates the update completely, then adds it. On error nothing changed.
  absl::Status Accumulate(const UpdateView& update);
  // Validates every update, then adds them all in one pass per field. On error (naming
  // the first bad update by its position) nothing changed.
  absl::Status AccumulateBatch(absl::Span<const UpdateView> updates);
  // FAILED_PRECONDITION when `other` was built for a different spec; nothing changes then.
  absl::Status MergeWith(const PartialAggregate& other);

  std::string Serialize() const;
  // DATA_LOSS for malformed bytes, FAILED_PRECONDITION for another spec's aggregate.
  static absl::StatusOr<PartialAggregate> Deserialize(std::shared_ptr<const ReductionSpec> spec,
                                                      absl::string_view bytes,
                                                      ThreadPool& pool = ThreadPool::Default());

  // FAILED_PRECONDITION when nothing was contributed (a mean of nothing is undefined).
  absl::StatusOr<AggregateResult> Report() const;

  // Heap bytes held by the field accumulators.
  uint64_t MemoryBytes() const;
  int64_t contributions() const { return contributions_; }
  double weight_sum() const { return weight_sum_; }
  const ReductionSpec& spec() const { return *spec_; }

 private:
  void AddValidated(absl::Span<const UpdateView> updates);

  std::shared_ptr<const ReductionSpec> spec_;
  ThreadPool* pool_;
  std::vector<std::unique_ptr<FieldAccumulator>> fields_;
  int64_t contributions_ = 0;
  double weight_sum_ = 0;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_PARTIAL_AGGREGATE_H_
