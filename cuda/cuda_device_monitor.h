// CudaDeviceMonitor: the cuda backend's DeviceMonitor — the memory of each CUDA device
// the backend reduces on, read with cudaMemGetInfo when /metrics is scraped (used = total
// minus free, so it counts every process on the device, not only fedagg). Compiled in CI;
// it has not run on a GPU yet (docs/GPU.md).
#ifndef FEDAGG_CUDA_CUDA_DEVICE_MONITOR_H_
#define FEDAGG_CUDA_CUDA_DEVICE_MONITOR_H_

#include <utility>
#include <vector>

#include "service/core/device_monitor.h"

namespace fedagg::cuda {

class CudaDeviceMonitor final : public DeviceMonitor {
 public:
  // `devices`: the runtime's indices of the devices the backend reduces on.
  explicit CudaDeviceMonitor(std::vector<int> devices) : devices_(std::move(devices)) {}

  // Leaves the calling thread's current device as it found it. UNAVAILABLE without a
  // driver or device, INTERNAL for other runtime errors.
  absl::StatusOr<std::vector<DeviceMemoryReading>> ReadMemory() const override;

 private:
  const std::vector<int> devices_;
};

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_CUDA_DEVICE_MONITOR_H_
