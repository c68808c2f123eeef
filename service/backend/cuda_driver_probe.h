// Asks the NVIDIA driver (libcuda.so.1, loaded with dlopen) how many CUDA devices this host
// has, without loading any CUDA runtime library: --backend=auto loads the cuda plugin, and
// with it cudart, cuSPARSE and NCCL, only when this finds a device, so a host without a GPU
// maps none of them.
#ifndef FEDAGG_SERVICE_BACKEND_CUDA_DRIVER_PROBE_H_
#define FEDAGG_SERVICE_BACKEND_CUDA_DRIVER_PROBE_H_

#include "absl/status/statusor.h"

namespace fedagg {

// The driver's device count (>= 1); UNAVAILABLE saying why there is none: no driver
// library, a driver that fails to initialise (with its error code), or no device.
absl::StatusOr<int> CudaDriverDeviceCount();

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_BACKEND_CUDA_DRIVER_PROBE_H_
