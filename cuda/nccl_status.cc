// NCCL errors as absl::Status.
#include "cuda/nccl_status.h"

#include "absl/strings/str_cat.h"

namespace fedagg::cuda {

absl::Status NcclStatus(ncclResult_t result, absl::string_view call) {
  const std::string message = absl::StrCat(call, " failed: ", ncclGetErrorString(result));
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(message);
    case ncclRemoteError:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace fedagg::cuda
