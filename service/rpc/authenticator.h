// Authenticator: checks the bearer token of every call ("authorization: Bearer <token>"
// metadata) against the tokens the operator configured, and names the caller for
// per-identity limits. With no tokens configured every call is let in (use TLS client
// certificates, or a private network, then).
#ifndef FEDAGG_SERVICE_RPC_AUTHENTICATOR_H_
#define FEDAGG_SERVICE_RPC_AUTHENTICATOR_H_

#include <grpcpp/server_context.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fedagg {

class Authenticator {
 public:
  // `tokens` in the order of the tokens file (the order names them in identities).
  explicit Authenticator(const std::vector<std::string>& tokens);

  // OK, or UNAUTHENTICATED saying what is missing or wrong (never echoing the token).
  absl::Status Check(const grpc::CallbackServerContext& context) const;
  // Check, then the caller's identity: the verified TLS client certificate's name
  // ("certificate '<name>'"), else the bearer token's line in the tokens file
  // ("bearer token #<n>"; the token itself is never shown), else the peer's address
  // without its port ("peer ipv4:10.0.0.7").
  absl::StatusOr<std::string> Identify(const grpc::CallbackServerContext& context) const;
  // The same for a request of the HTTP path: its Authorization header (nullopt: none)
  // and the peer's address. The identity is the bearer token's line, else the peer.
  absl::StatusOr<std::string> IdentifyHttp(std::optional<std::string_view> authorization,
                                           std::string_view peer_address) const;
  bool enabled() const { return !tokens_.empty(); }

 private:
  // The accepted token's position (1-based) in the tokens file, or UNAUTHENTICATED;
  // `carrier` names where the value travels ("metadata", "header").
  absl::StatusOr<int> TokenNumber(std::optional<std::string_view> authorization,
                                  std::string_view carrier) const;
  absl::StatusOr<int> TokenNumber(const grpc::CallbackServerContext& context) const;

  std::map<std::string, int> tokens_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_AUTHENTICATOR_H_
