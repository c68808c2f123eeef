// Device memory of the cuda backend's devices, through cudaMemGetInfo.
#include "cuda/cuda_device_monitor.h"

#include <cuda_runtime_api.h>

#include "cuda/cuda_status.h"

namespace fedagg::cuda {
namespace {

// cudaMemGetInfo answers for the calling thread's current device.
absl::StatusOr<DeviceMemoryReading> ReadDevice(int device) {
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  return DeviceMemoryReading{device, total_bytes - free_bytes, total_bytes};
}

}  // namespace

absl::StatusOr<std::vector<DeviceMemoryReading>> CudaDeviceMonitor::ReadMemory() const {
  int current = 0;
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
  std::vector<DeviceMemoryReading> readings;
  absl::Status failed;
  for (int device : devices_) {
    absl::StatusOr<DeviceMemoryReading> reading = ReadDevice(device);
    if (!reading.ok()) {
      failed = reading.status();
      break;
    }
    readings.push_back(*reading);
  }
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaSetDevice(current));
  if (!failed.ok()) return failed;
  return readings;
}

}  // namespace fedagg::cuda
