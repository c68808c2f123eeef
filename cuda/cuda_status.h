// Turns CUDA runtime errors into absl::Status: FEDAGG_CUDA_RETURN_IF_ERROR(call) returns
// a Status carrying the runtime's own message. Out-of-memory maps to RESOURCE_EXHAUSTED,
// a missing driver or device to UNAVAILABLE, everything else to INTERNAL. Turning an error
// into a Status also clears it from the thread's last-error slot (ClearLastCudaError):
// once reported by its own call, a failure must not fail the next launch that checks
// cudaGetLastError (a kernel of ours, or Thrust's).
#ifndef FEDAGG_CUDA_CUDA_STATUS_H_
#define FEDAGG_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fedagg::cuda {

absl::Status CudaStatus(cudaError_t error, absl::string_view call);

// Resets the calling thread's last CUDA error (a sticky error, which spoils the context,
// stays). For every path that reports a failed runtime call by other means than CudaStatus.
void ClearLastCudaError();

}  // namespace fedagg::cuda

#define FEDAGG_CUDA_RETURN_IF_ERROR(call)                                             \
  do {                                                                                \
    if (cudaError_t fedagg_cuda_error_ = (call); fedagg_cuda_error_ != cudaSuccess)   \
      return ::fedagg::cuda::CudaStatus(fedagg_cuda_error_, #call);                   \
  } while (false)

#endif  // FEDAGG_CUDA_CUDA_STATUS_H_
