// CUDA runtime errors as absl::Status.
#include "cuda/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace fedagg::cuda {

void ClearLastCudaError() { static_cast<void>(cudaGetLastError()); }

absl::Status CudaStatus(cudaError_t error, absl::string_view call) {
  ClearLastCudaError();
  const std::string message =
      absl::StrCat(call, " failed: ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace fedagg::cuda
