// Cohort messages: rosters and records to SecAggCohort, with their checks.
#include "service/secagg/cohort_messages.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"

namespace fedagg {
namespace {

absl::StatusOr<SecAggCohort> Build(const CohortFrame& frame, const std::string& cohort_id, uint32_t degree,
                                   uint32_t threshold, const std::string& graph_seed,
                                   const google::protobuf::RepeatedPtrField<v1::CohortMember>& members,
                                   const Key32& root_public_key) {
  const int n = members.size();
  if (n < 2) return absl::InvalidArgumentError(absl::StrCat("a cohort needs two members or more, not ", n));
  if (degree < 2 || degree % 2 != 0 || degree > (1u << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("the neighbour degree ", degree, " is not even and >= 2"));
  }
  const uint32_t neighbours = std::min<uint32_t>(degree, static_cast<uint32_t>(n - 1));
  if (threshold < 1 || threshold > neighbours || 2 * threshold <= neighbours) {
    return absl::InvalidArgumentError(absl::StrCat("threshold ", threshold, " is not in (", neighbours, " / 2, ",
                                                   neighbours, "] for ", neighbours, " neighbours"));
  }
  FEDAGG_ASSIGN_OR_RETURN(Key32 seed, Key32Of(graph_seed, "the graph seed"));
  SecAggCohort cohort;
  cohort.context = CohortContext(frame, cohort_id);
  cohort.threshold = static_cast<int>(threshold);
  FEDAGG_ASSIGN_OR_RETURN(cohort.graph, NeighbourGraph::Harary(n, static_cast<int>(degree), MaskSeed{seed}));
  for (const v1::CohortMember& member : members) {
    AdvertisedKeys keys;
    FEDAGG_ASSIGN_OR_RETURN(keys.channel_public_key, Key32Of(member.channel_public_key(), "a channel key"));
    FEDAGG_ASSIGN_OR_RETURN(keys.mask_public_key, Key32Of(member.mask_public_key(), "a mask key"));
    cohort.keys.push_back(keys);
  }
  cohort.root_public_key = root_public_key;
  cohort.field_sizes = frame.field_sizes;
  cohort.bits = frame.bits;
  return cohort;
}

}  // namespace

std::string CohortContext(const CohortFrame& frame, const std::string& cohort_id) {
  return absl::StrCat("fedagg secagg cohort|", frame.aggregation_id, "|", frame.incarnation, "|", cohort_id);
}

absl::StatusOr<SecAggCohort> CohortOf(const CohortFrame& frame, const v1::Roster& roster) {
  FEDAGG_ASSIGN_OR_RETURN(Key32 root, Key32Of(roster.root_public_key(), "the root's key"));
  if (roster.index() >= static_cast<uint32_t>(roster.members_size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the roster places this client at ", roster.index(), " of ", roster.members_size()));
  }
  return Build(frame, roster.cohort_id(), roster.degree(), roster.threshold(), roster.graph_seed(), roster.members(),
               root);
}

absl::StatusOr<SecAggCohort> CohortOf(const CohortFrame& frame, const v1::CohortRecord& record,
                                      const Key32& root_public_key) {
  const size_t n = static_cast<size_t>(record.members_size());
  if (static_cast<size_t>(record.shared_size()) != n || static_cast<size_t>(record.masked_size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("cohort ", record.cohort_id(), "'s record has ", n, " members but ",
                                                   record.shared_size(), " and ", record.masked_size(),
                                                   " entries in its sets"));
  }
  return Build(frame, record.cohort_id(), record.degree(), record.threshold(), record.graph_seed(), record.members(),
               root_public_key);
}

std::vector<uint32_t> IntegerWords(absl::Span<const std::byte> bytes, int bits) {
  const size_t width = static_cast<size_t>(bits / 8);
  std::vector<uint32_t> words(bytes.size() / width, 0u);
  for (size_t i = 0; i < words.size(); ++i) std::memcpy(&words[i], bytes.data() + i * width, width);  // little-endian
  return words;
}

std::vector<std::byte> IntegerBytes(absl::Span<const uint32_t> words, int bits) {
  const size_t width = static_cast<size_t>(bits / 8);
  std::vector<std::byte> bytes(words.size() * width);
  for (size_t i = 0; i < words.size(); ++i) std::memcpy(bytes.data() + i * width, &words[i], width);
  return bytes;
}

absl::StatusOr<Key32> Key32Of(const std::string& bytes, const char* what) {
  if (bytes.size() != sizeof(Key32)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", bytes.size(), " bytes, not ", sizeof(Key32)));
  }
  Key32 key{};
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(key.data()));
  return key;
}

std::string BytesOf(const Key32& key) { return std::string(reinterpret_cast<const char*>(key.data()), key.size()); }

}  // namespace fedagg
