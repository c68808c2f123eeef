// Bearer-token checks on incoming calls.
#include "service/rpc/authenticator.h"

namespace fedagg {

absl::Status Authenticator::Check(const grpc::CallbackServerContext& context) const {
  if (tokens_.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "missing 'authorization' metadata: send 'Bearer <token>' with a token this server accepts");
  }
  const std::string value(it->second.data(), it->second.size());
  constexpr std::string_view kPrefix = "Bearer ";
  if (value.rfind(kPrefix, 0) != 0 || !tokens_.contains(value.substr(kPrefix.size()))) {
    return absl::UnauthenticatedError("the bearer token is not accepted by this server");
  }
  return absl::OkStatus();
}

}  // namespace fedagg
