// Bearer-token checks on incoming calls, and the caller identities built from them.
#include "service/rpc/authenticator.h"

#include "absl/strings/str_cat.h"

namespace fedagg {

Authenticator::Authenticator(const std::vector<std::string>& tokens) {
  for (const std::string& token : tokens) tokens_.emplace(token, static_cast<int>(tokens_.size()) + 1);
}

absl::StatusOr<int> Authenticator::TokenNumber(std::optional<std::string_view> authorization,
                                               std::string_view carrier) const {
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(absl::StrCat("missing 'authorization' ", std::string(carrier),
                                                   ": send 'Bearer <token>' with a token this server accepts"));
  }
  constexpr std::string_view kPrefix = "Bearer ";
  auto token = authorization->substr(0, kPrefix.size()) == kPrefix
                   ? tokens_.find(std::string(authorization->substr(kPrefix.size())))
                   : tokens_.end();
  if (token == tokens_.end()) {
    return absl::UnauthenticatedError("the bearer token is not accepted by this server");
  }
  return token->second;
}

absl::StatusOr<int> Authenticator::TokenNumber(const grpc::CallbackServerContext& context) const {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return TokenNumber(std::nullopt, "metadata");
  return TokenNumber(std::string_view(it->second.data(), it->second.size()), "metadata");
}

absl::StatusOr<std::string> Authenticator::IdentifyHttp(std::optional<std::string_view> authorization,
                                                        std::string_view peer_address) const {
  if (tokens_.empty()) return absl::StrCat("peer ", std::string(peer_address));
  absl::StatusOr<int> number = TokenNumber(authorization, "header");
  if (!number.ok()) return number.status();
  return absl::StrCat("bearer token #", *number);
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
