// ClientClaims: how a forwarding mirror (an intermediate aggregator's copy of its parent's
// aggregation) asks its parent for the right to count a client's update. A parent that
// is itself an intermediate claims the client at its own parent first, so the root
// decides and each (aggregation, client id) is counted once in the whole tree, whichever
// aggregator the client's stream reached (docs/PROTOCOL.md 6.4). The parent link
// (service/tier/parent_link.h) implements it over Tier.ClaimClients, in batches.
#ifndef FEDAGG_SERVICE_ROUNDS_CLIENT_CLAIMS_H_
#define FEDAGG_SERVICE_ROUNDS_CLIENT_CLAIMS_H_

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace fedagg {

class ClientClaims {
 public:
  virtual ~ClientClaims() = default;
  // Claims `client_id` in the aggregation `aggregation_id` of incarnation `incarnation`
  // at the parent. `done` gets OK when granted, the parent's refusal (ALREADY_EXISTS,
  // ABORTED, FAILED_PRECONDITION, NOT_FOUND, ...) or UNAVAILABLE when the parent could
  // not be asked; it runs on another thread and must not block.
  virtual void Claim(const std::string& aggregation_id, const std::string& incarnation,
                     const std::string& client_id, std::function<void(absl::Status)> done) = 0;
  // Gives back a granted claim whose update was not counted (best effort).
  virtual void Release(const std::string& aggregation_id, const std::string& incarnation,
                       const std::string& client_id) = 0;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_CLIENT_CLAIMS_H_
