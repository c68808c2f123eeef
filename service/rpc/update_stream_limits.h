// The limits every update stream (Aggregation.Contribute and Aggregation.Submit) is held
// to, shared by both reactors so they refuse alike:
//   AdmitStream           at the start of the call: the bearer token, then the caller
//                         identity's open-stream limit (--max_streams_per_identity)
//   StalledUpdateMessage  the DEADLINE_EXCEEDED message of an update evicted after
//                         --stall_timeout without a message (StallWatch)
#ifndef FEDAGG_SERVICE_RPC_UPDATE_STREAM_LIMITS_H_
#define FEDAGG_SERVICE_RPC_UPDATE_STREAM_LIMITS_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/rpc/service_context.h"
#include "service/rpc/stream_limiter.h"

namespace fedagg {

// UNAUTHENTICATED or RESOURCE_EXHAUSTED (counted in fedagg_streams_refused_total), or the
// slot the stream holds until it ends (an empty one when no limit is set).
absl::StatusOr<StreamLimiter::Slot> AdmitStream(const grpc::CallbackServerContext& context,
                                                ServiceContext& service);

std::string StalledUpdateMessage(const std::string& aggregation_id, absl::Duration timeout);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_UPDATE_STREAM_LIMITS_H_
