// Authenticator: checks the bearer token of every call ("authorization: Bearer <token>"
// metadata) against the tokens the operator configured. With no tokens configured every
// call is let in (use TLS client certificates, or a private network, then).
#ifndef FEDAGG_SERVICE_RPC_AUTHENTICATOR_H_
#define FEDAGG_SERVICE_RPC_AUTHENTICATOR_H_

#include <grpcpp/server_context.h>

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace fedagg {

class Authenticator {
 public:
  explicit Authenticator(std::vector<std::string> tokens) : tokens_(tokens.begin(), tokens.end()) {}

  // OK, or UNAUTHENTICATED saying what is missing or wrong (never echoing the token).
  absl::Status Check(const grpc::CallbackServerContext& context) const;
  bool enabled() const { return !tokens_.empty(); }

 private:
  std::set<std::string> tokens_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_AUTHENTICATOR_H_
