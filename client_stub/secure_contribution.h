// Secure contribution: one client's part in a secure aggregation (docs/PROTOCOL.md 4b,
// docs/SEMANTICS.md 13). It joins a cohort at the node its channel reaches
// (Cohorts.JoinCohort), shares its secrets with its neighbours, sends its update
// discretized and masked over a ContributeStream on the same channel, and sends the root
// (sealed to the root's key, which the relaying nodes cannot open) the shares that
// unmask the sum. The node never sees the update: only the root, only the sum.
#ifndef FEDAGG_CLIENT_STUB_SECURE_CONTRIBUTION_H_
#define FEDAGG_CLIENT_STUB_SECURE_CONTRIBUTION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client_stub/client.h"
#include "fedagg/v1/types.pb.h"
#include "service/core/field_value.h"

namespace fedagg {

// Where a client stops, for tests and load generation of dropouts: before it sends its
// shares, before its masked update, before its unmasking shares.
enum class SecureDropout { kNone, kBeforeSharing, kBeforeInput, kBeforeUnmasking };

struct SecureContributionOptions {
  // The whole protocol, cohort forming included.
  absl::Duration timeout = absl::Minutes(5);
  SecureDropout dropout = SecureDropout::kNone;
  // The root's public key as the client learnt it from the root itself (32 bytes; empty:
  // the one in `spec`). A node below the root that handed out another key is refused.
  std::string pinned_root_key;
  // The bearer token of the cohort stream (the update's is its ContributeStream's).
  std::string token;
  // The update is in its fields' declared encodings already (their discretized integers):
  // sent masked as it is. Otherwise it holds plain floating values, discretized here.
  bool update_is_encoded = false;
};

// Runs the protocol for `update` (one value per field of `spec`, which must declare
// `secure`: plain floating values, or its discretized integers with update_is_encoded) as `client_id`; `stream` is a ContributeStream opened with that
// client id on `channel`. Returns the ack of the masked update once the client's part is
// done (the cohort completed); a refusal or a stage the node ended without this client
// as the node's status (DEADLINE_EXCEEDED, UNAVAILABLE, FAILED_PRECONDITION, ...).
// With a dropout, returns CANCELLED once it stopped where told.
absl::StatusOr<v1::Ack> ContributeSecurely(const std::shared_ptr<grpc::Channel>& channel, ContributeStream& stream,
                                           const v1::AggregationSpec& spec, const std::string& client_id,
                                           const UpdateView& update, const SecureContributionOptions& options = {});

}  // namespace fedagg

#endif  // FEDAGG_CLIENT_STUB_SECURE_CONTRIBUTION_H_
