// PartialAggregate: the mergeable state of one aggregation at one node — per field the
// running reduction, plus the number of contributions and their total weight.
//   Accumulate / AccumulateBatch  add validated client updates (all or nothing)
//   MergeWith                     adds another node's partial aggregate of the same spec
//   Serialize / Deserialize       the versioned binary format of
//                                 docs/PARTIAL_AGGREGATE_FORMAT.md (travels up the tree)
//   Report                        the result: sums, means, extremes, sparse unions, counts
// Sum and merge are associative: any partition of the same updates, merged in any order,
// reports the same result (exactly for integers, within float rounding otherwise, and to
// the bit for a deterministic aggregation, whose float sums and weight sum are exact).
// The accumulators come from a backend (AccumulatorFactory, CPU by default); a device
// backend can fail for lack of memory, which surfaces as RESOURCE_EXHAUSTED here.
// Not thread-safe: one owner at a time (the reduction itself uses the thread pool).
#ifndef FEDAGG_SERVICE_CORE_PARTIAL_AGGREGATE_H_
#define FEDAGG_SERVICE_CORE_PARTIAL_AGGREGATE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "service/core/accumulator_factory.h"
#include "service/core/aggregate_result.h"
#include "service/core/byte_codec.h"
#include "service/core/cpu_accumulator_factory.h"
#include "service/core/exact_sums.h"
#include "service/core/field_accumulator.h"
#include "service/core/field_value.h"
#include "service/core/narrowed_partial.h"
#include "service/core/reduction_spec.h"

namespace fedagg {

class PartialAggregate {
 public:
  // Versions of the serialized format written by Serialize(): 2 for a deterministic
  // aggregation's (exact sums), 1 otherwise.
  static constexpr uint32_t kFormatVersion = 1;
  static constexpr uint32_t kExactFormatVersion = 2;
  // Version 1 with some fields' sums in 16 bits (narrowed_partial.h): what Serialize
  // writes when asked for a narrower precision, for a push up the tree.
  static constexpr uint32_t kNarrowedFormatVersion = 3;

  // `backend` must outlive this partial aggregate.
  explicit PartialAggregate(std::shared_ptr<const ReductionSpec> spec,
                            const AccumulatorFactory& backend = CpuAccumulatorFactory::Default());
  PartialAggregate(PartialAggregate&&) = default;
  PartialAggregate& operator=(PartialAggregate&&) = default;

  // Validates the update completely, then adds it. On error nothing changed.
  absl::Status Accumulate(const UpdateView& update);
  // Validates every update, then adds them all in one pass per field. On a validation
  // error (naming the first bad update by its position) nothing changed. A backend
  // failure (RESOURCE_EXHAUSTED for device memory) leaves the state unspecified: the
  // owner must discard this partial aggregate.
  absl::Status AccumulateBatch(absl::Span<const UpdateView> updates);
  // The same for updates the caller has already validated against this spec
  // (ValidateUpdate), each of them: an owner that validates every update before it counts
  // it (Aggregation) spares a second pass over every index. Backend failures as above.
  absl::Status AccumulateValidatedBatch(absl::Span<const UpdateView> updates);
  // FAILED_PRECONDITION when `other` was built for a different spec or by another
  // backend; nothing changes then. Backend failures as for AccumulateBatch.
  absl::Status MergeWith(const PartialAggregate& other);

  // Secure aggregation (the spec's options().secure): what the root needs to unmask the
  // sum, one opaque record per cohort whose masked inputs this partial holds (a
  // serialized v1::CohortRecord; service/rounds reads them). Merged partials keep both
  // lists; the records travel with the sums they belong to.
  void AddSecureCohort(std::string record) { secure_cohorts_.push_back(std::move(record)); }
  const std::vector<std::string>& secure_cohorts() const { return secure_cohorts_; }
  // Secure aggregation at the root: adds `correction` (validated, one value per field, as
  // an update of this spec) to the sums without counting it as a contribution — the
  // masks' removal, modulo 2^b like the masked inputs. Backend failures as above.
  absl::Status AddUncounted(const UpdateView& correction);

  // The same bytes whatever the backend; fails only when a device backend cannot copy
  // its state back.
  // `precision` other than kFull: the sums of the fields narrowed_partial.h may narrow
  // travel in 16 bits (format version 3; a deterministic aggregation's stay exact).
  absl::StatusOr<std::string> Serialize(PartialPrecision precision = PartialPrecision::kFull) const;
  // DATA_LOSS for malformed bytes, FAILED_PRECONDITION for another spec's aggregate.
  static absl::StatusOr<PartialAggregate> Deserialize(
      std::shared_ptr<const ReductionSpec> spec, absl::string_view bytes,
      const AccumulatorFactory& backend = CpuAccumulatorFactory::Default());
  // The same, reading all of `in`, possibly while it arrives (a child's partial decoded
  // from its stream's chunks: nothing but the decoded aggregate is held). An error of
  // `in`'s source is returned as it is.
  static absl::StatusOr<PartialAggregate> Deserialize(
      std::shared_ptr<const ReductionSpec> spec, ByteReader& in,
      const AccumulatorFactory& backend = CpuAccumulatorFactory::Default());

  // FAILED_PRECONDITION when nothing was contributed (a mean of nothing is undefined).
  absl::StatusOr<AggregateResult> Report() const;

  // Frees the field accumulators of a partial no longer needed (a finished aggregation's,
  // once its result is made and, where it is checkpointed, its last checkpoint is
  // written): every later Accumulate, MergeWith, Serialize or Report answers
  // FAILED_PRECONDITION, and MemoryBytes is 0; contributions() and weight_sum() stay.
  void ReleaseAccumulators();
  bool released() const { return released_; }

  // Heap bytes held by the field accumulators.
  uint64_t MemoryBytes() const;
  int64_t contributions() const { return contributions_; }
  double weight_sum() const { return weight_sum_; }
  // Differential privacy: the contributions the whole update's bound scaled down.
  int64_t clipped_updates() const { return clipped_updates_; }
  const ReductionSpec& spec() const { return *spec_; }
  const AccumulatorFactory& backend() const { return *backend_; }

 private:
  std::shared_ptr<const ReductionSpec> spec_;
  const AccumulatorFactory* backend_;
  std::vector<std::unique_ptr<FieldAccumulator>> fields_;
  // The version Serialize() writes and Deserialize() expects for this spec.
  uint32_t format_version() const;
  void AddWeights(absl::Span<const double> weights);
  // FAILED_PRECONDITION once the accumulators are released.
  absl::Status CheckNotReleased() const;

  bool released_ = false;
  int64_t contributions_ = 0;
  double weight_sum_ = 0;
  int64_t clipped_updates_ = 0;
  std::vector<std::string> secure_cohorts_;
  // A deterministic aggregation with a weighted field: the weights' exact sum, which
  // weight_sum_ is rounded from (one sum on the float64 grid); empty otherwise.
  ExactSums exact_weight_sum_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_PARTIAL_AGGREGATE_H_
