// Bearer-token checks on incoming calls, and the caller identities built from them.
#include "service/rpc/authenticator.h"

#include "absl/strings/str_cat.h"

namespace fedagg {

Authenticator::Authenticator(const std::vector<std::string>& tokens) {
  for (const std::string& token : tokens) tokens_.emplace(token, static_cast<int>(tokens_.size()) + 1);
}

absl::StatusOr<int> Authenticator::TokenNumber(const grpc::CallbackServerContext& context) const {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "missing 'authorization' metadata: send 'Bearer <token>' with a token this server accepts");
  }
  const std::string value(it->second.data(), it->second.size());
  constexpr std::string_view kPrefix = "Bearer ";
  auto token = value.rfind(kPrefix, 0) == 0 ? tokens_.find(value.substr(kPrefix.size())) : tokens_.end();
  if (token == tokens_.end()) {
    return absl::UnauthenticatedError("the bearer token is not accepted by this server");
  }
  return token->second;
}

absl::Status Authenticator::Check(const grpc::CallbackServerContext& context) const {
  if (tokens_.empty()) return absl::OkStatus();
  return TokenNumber(context).status();
}

absl::StatusOr<std::string> Authenticator::Identify(const grpc::CallbackServerContext& context) const {
  int token_number = 0;
  if (!tokens_.empty()) {
    absl::StatusOr<int> number = TokenNumber(context);
    if (!number.ok()) return number.status();
    token_number = *number;
  }
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    const std::vector<grpc::string_ref> names = auth->GetPeerIdentity();
    if (!names.empty()) return absl::StrCat("certificate '", std::string(names.front().data(), names.front().size()), "'");
  }
  if (token_number > 0) return absl::StrCat("bearer token #", token_number);
  // "ipv4:10.0.0.7:53211" or "ipv6:[::1]:53211": the host, without the port.
  std::string peer = context.peer();
  const size_t colon = peer.rfind(':');
  if (colon != std::string::npos && colon > peer.find(':')) peer.resize(colon);
  return absl::StrCat("peer ", peer);
}

}  // namespace fedagg
