// Turns NCCL errors into absl::Status: FEDAGG_NCCL_RETURN_IF_ERROR(call) returns a Status
// carrying NCCL's own message. Invalid arguments or usage map to INVALID_ARGUMENT, a
// peer's failure to UNAVAILABLE, everything else (CUDA, system, internal) to INTERNAL.
#ifndef FEDAGG_CUDA_NCCL_STATUS_H_
#define FEDAGG_CUDA_NCCL_STATUS_H_

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fedagg::cuda {

absl::Status NcclStatus(ncclResult_t result, absl::string_view call);

}  // namespace fedagg::cuda

#define FEDAGG_NCCL_RETURN_IF_ERROR(call)                                                    \
  do {                                                                                       \
    if (ncclResult_t fedagg_nccl_result_ = (call); fedagg_nccl_result_ != ncclSuccess)       \
      return ::fedagg::cuda::NcclStatus(fedagg_nccl_result_, #call);                         \
  } while (false)

#endif  // FEDAGG_CUDA_NCCL_STATUS_H_
