// Cohort messages: the protocol's messages (proto/fedagg/v1/secure_aggregation.proto)
// turned into what the cryptography works on (secagg_cohort.h), one way for every party:
// a client reads its Roster, the root a CohortRecord, and both rebuild the same
// SecAggCohort — the same context, graph, keys and threshold — or refuse the message.
#ifndef FEDAGG_SERVICE_SECAGG_COHORT_MESSAGES_H_
#define FEDAGG_SERVICE_SECAGG_COHORT_MESSAGES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fedagg/v1/secure_aggregation.pb.h"
#include "service/secagg/secagg_cohort.h"

namespace fedagg {

// What every cohort of one aggregation shares: the spec's fields and bit width, the
// aggregation's id and incarnation, which bind every derived key and sealed message.
struct CohortFrame {
  std::string aggregation_id;
  std::string incarnation;
  std::vector<size_t> field_sizes;  // coordinates of each field
  int bits = 32;
};

// The context string of cohort `cohort_id` (SecAggCohort::context).
std::string CohortContext(const CohortFrame& frame, const std::string& cohort_id);

// The cohort a roster (or a record) describes. INVALID_ARGUMENT for keys of the wrong
// length, a degree or threshold the cohort cannot have, a graph seed not of 32 bytes.
absl::StatusOr<SecAggCohort> CohortOf(const CohortFrame& frame, const v1::Roster& roster);
absl::StatusOr<SecAggCohort> CohortOf(const CohortFrame& frame, const v1::CohortRecord& record,
                                      const Key32& root_public_key);

// A discretized field's values on the wire: b-bit little-endian two's-complement
// integers, as words modulo 2^b (IntegerWords) and back (IntegerBytes).
std::vector<uint32_t> IntegerWords(absl::Span<const std::byte> bytes, int bits);
std::vector<std::byte> IntegerBytes(absl::Span<const uint32_t> words, int bits);

// Key32 from bytes: INVALID_ARGUMENT (naming `what`) unless exactly 32.
absl::StatusOr<Key32> Key32Of(const std::string& bytes, const char* what);
std::string BytesOf(const Key32& key);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_SECAGG_COHORT_MESSAGES_H_
