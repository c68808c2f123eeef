// Secure unmasking: every cohort's masks out of the root's sum, in one uncounted correction.
#include "service/rounds/secure_unmasking.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "fedagg/v1/secure_aggregation.pb.h"
#include "service/core/status_macros.h"

namespace fedagg {

CohortFrame CohortFrameOf(const ReductionSpec& spec, const std::string& aggregation_id,
                          const std::string& incarnation) {
  CohortFrame frame{aggregation_id, incarnation, {}, 32};
  for (const FieldSpec& field : spec.fields()) {
    frame.field_sizes.push_back(static_cast<size_t>(field.type.num_elements()));
    frame.bits = field.modulus_bits;
  }
  return frame;
}

absl::StatusOr<int64_t> RecordedMaskedUpdates(const PartialAggregate& partial) {
  int64_t in_sum = 0;
  for (const std::string& bytes : partial.secure_cohorts()) {
    v1::CohortRecord record;
    if (!record.ParseFromString(bytes)) return absl::DataLossError("a secure cohort's record does not parse");
    for (bool masked : record.masked()) in_sum += masked ? 1 : 0;
  }
  return in_sum;
}

absl::Status UnmaskSecureSum(const CohortFrame& frame, const SecAggUnmasker& unmasker, PartialAggregate& partial,
                             ThreadPool* pool, const SecAggUnmasker::MaskAdder& add_masks) {
  absl::StatusOr<int64_t> in_sum = RecordedMaskedUpdates(partial);
  if (!in_sum.ok()) return in_sum.status();
  if (*in_sum != partial.contributions()) {
    return absl::DataLossError(absl::StrCat("the secure sum holds ", partial.contributions(),
                                            " masked updates, but its cohorts' records account for ", *in_sum,
                                            ": masks would stay in it"));
  }
  std::vector<std::vector<uint32_t>> correction;
  for (size_t size : frame.field_sizes) correction.emplace_back(size, 0u);
  for (const std::string& bytes : partial.secure_cohorts()) {
    v1::CohortRecord record;
    if (!record.ParseFromString(bytes)) return absl::DataLossError("a secure cohort's record does not parse");
    absl::StatusOr<SecAggCohort> cohort = CohortOf(frame, record, unmasker.public_key());
    if (!cohort.ok()) {
      return absl::DataLossError(absl::StrCat("cohort ", record.cohort_id(), "'s record: ", cohort.status().message()));
    }
    const std::vector<bool> shared(record.shared().begin(), record.shared().end());
    const std::vector<bool> masked(record.masked().begin(), record.masked().end());
    for (size_t i = 0; i < masked.size(); ++i) {
      if (masked[i] && !shared[i]) {
        return absl::DataLossError(absl::StrCat("cohort ", record.cohort_id(), "'s record puts client ", i,
                                                " in the sum without its shares"));
      }
    }
    std::vector<UnmaskingShares> responses;
    for (const v1::SealedShare& share : record.unmasking()) {
      responses.push_back(UnmaskingShares{static_cast<int>(std::min<uint32_t>(share.peer(), 1u << 30)), share.sealed()});
    }
    absl::StatusOr<std::vector<std::vector<uint32_t>>> unmasked =
        unmasker.Unmask(*cohort, shared, masked, responses, std::move(correction), pool, add_masks);
    if (!unmasked.ok()) {
      return absl::Status(unmasked.status().code(),
                          absl::StrCat("secure cohort ", record.cohort_id(), ": ", unmasked.status().message()));
    }
    correction = *std::move(unmasked);
  }
  std::vector<std::vector<std::byte>> bytes;
  bytes.reserve(correction.size());  // the views below point into it
  UpdateView view;
  for (size_t f = 0; f < correction.size(); ++f) {
    bytes.push_back(IntegerBytes(correction[f], frame.bits));
    view.fields.push_back(FieldValue{Encoding::kDense, partial.spec().fields()[f].type.dtype, {},
                                     absl::MakeConstSpan(bytes.back())});
  }
  return partial.AddUncounted(view);
}

}  // namespace fedagg
