// Admission and stall eviction of update streams.
#include "service/rpc/update_stream_limits.h"

#include "absl/strings/str_cat.h"

namespace fedagg {

absl::StatusOr<StreamLimiter::Slot> AdmitStream(const grpc::CallbackServerContext& context,
                                                ServiceContext& service) {
  absl::StatusOr<std::string> identity = service.authenticator.Identify(context);
  if (!identity.ok()) {
    service.metrics.streams_refused.WithLabels({"unauthenticated"}).Increment();
    return identity.status();
  }
  if (service.stream_limiter == nullptr) return StreamLimiter::Slot();
  absl::StatusOr<StreamLimiter::Slot> slot = service.stream_limiter->Acquire(*identity);
  if (!slot.ok()) service.metrics.streams_refused.WithLabels({"identity_limit"}).Increment();
  return slot;
}

std::string StalledUpdateMessage(const std::string& aggregation_id, absl::Duration timeout) {
  return absl::StrCat("the update to aggregation '", aggregation_id, "' received no message for ",
                      absl::FormatDuration(timeout),
                      " (the server's --stall_timeout) and was discarded: nothing of it was counted "
                      "and the client id is free; send the update again on a new stream");
}

}  // namespace fedagg
