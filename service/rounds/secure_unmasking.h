// Secure unmasking: the root's last step of a secure aggregation (docs/SEMANTICS.md 13).
// The partial it holds sums every cohort's masked inputs (modulo 2^b, in the low bits of
// its int64 state) and carries each cohort's record; for each record the root opens the
// unmasking shares sealed to it, recovers the secrets (SecAggUnmasker) and adds the
// negated masks that did not cancel into one correction, which it adds to the sums once,
// uncounted. Then the partial's report (its low b bits, signed, times the scale) is the
// plain sum. Nothing below the root can do this: only the root holds the key.
#ifndef FEDAGG_SERVICE_ROUNDS_SECURE_UNMASKING_H_
#define FEDAGG_SERVICE_ROUNDS_SECURE_UNMASKING_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/core/partial_aggregate.h"
#include "service/core/thread_pool.h"
#include "service/secagg/cohort_messages.h"
#include "service/secagg/secagg_unmasker.h"

namespace fedagg {

// The frame of `spec`'s cohorts (its fields' sizes and bit width) for an aggregation.
CohortFrame CohortFrameOf(const ReductionSpec& spec, const std::string& aggregation_id,
                          const std::string& incarnation);

// The masked updates `partial`'s cohort records put in its sum; DATA_LOSS for a record
// that does not parse.
absl::StatusOr<int64_t> RecordedMaskedUpdates(const PartialAggregate& partial);

// Unmasks `partial` in place. DATA_LOSS when a record is malformed, a share does not open
// or disagrees, or the records' clients in the sum are not the partial's contributions;
// FAILED_PRECONDITION (naming the cohort) when too many of a cohort dropped out to recover
// a secret. On error the partial may hold part of the correction: the aggregation fails.
absl::Status UnmaskSecureSum(const CohortFrame& frame, const SecAggUnmasker& unmasker, PartialAggregate& partial,
                             ThreadPool* pool = nullptr, const SecAggUnmasker::MaskAdder& add_masks = nullptr);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_SECURE_UNMASKING_H_
