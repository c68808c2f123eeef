// The driver probe: cuInit and cuDeviceGetCount through dlsym, no CUDA header needed.
#include "service/backend/cuda_driver_probe.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace fedagg {

absl::StatusOr<int> CudaDriverDeviceCount() {
  // Kept loaded for the process's life: the driver is not made to be unloaded once
  // initialised, and the cuda plugin loads it again anyway.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    return absl::UnavailableError(absl::StrCat("no NVIDIA driver on this host (", dlerror(), ")"));
  }
  // CUresult is an int-sized enum; 0 is CUDA_SUCCESS.
  using CuInit = int (*)(unsigned int flags);
  using CuDeviceGetCount = int (*)(int* count);
  auto cu_init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
  auto cu_device_get_count = reinterpret_cast<CuDeviceGetCount>(dlsym(driver, "cuDeviceGetCount"));
  if (cu_init == nullptr || cu_device_get_count == nullptr) {
    return absl::UnavailableError("the NVIDIA driver library libcuda.so.1 lacks cuInit or cuDeviceGetCount");
  }
  if (const int error = cu_init(0); error != 0) {
    return absl::UnavailableError(absl::StrCat("the NVIDIA driver did not initialise (cuInit error ", error,
                                               error == 100 ? ": no CUDA-capable device" : "", ")"));
  }
  int count = 0;
  if (const int error = cu_device_get_count(&count); error != 0) {
    return absl::UnavailableError(absl::StrCat("the NVIDIA driver could not count devices (cuDeviceGetCount error ",
                                               error, ")"));
  }
  if (count == 0) return absl::UnavailableError("the NVIDIA driver reports no devices");
  return count;
}

}  // namespace fedagg
