// absl::Status <-> grpc::Status: the same code and message on both sides.
#ifndef FEDAGG_SERVICE_RPC_GRPC_STATUS_H_
#define FEDAGG_SERVICE_RPC_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace fedagg {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_GRPC_STATUS_H_
