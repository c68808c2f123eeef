// CUDA device discovery.
#include "cuda/device_probe.h"

#include <cuda_runtime_api.h>

#include "cuda/cuda_status.h"

namespace fedagg::cuda {

absl::StatusOr<int> UsableDeviceCount() {
  int count = 0;
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (count == 0) return absl::UnavailableError("the CUDA runtime reports no devices");
  return count;
}

}  // namespace fedagg::cuda
