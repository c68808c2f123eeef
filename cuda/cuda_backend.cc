// The cuda backend's factory, offered only when a device is present.
#include "cuda/cuda_backend.h"

#include "cuda/cuda_device_monitor.h"
#include "cuda/cuda_reducers.h"
#include "cuda/device_probe.h"
#include "portable/portable_accumulator_factory.h"

namespace fedagg::cuda {

absl::StatusOr<const AccumulatorFactory*> CudaBackend() {
  if (absl::StatusOr<int> devices = UsableDeviceCount(); !devices.ok()) return devices.status();
  // The backend reduces on device 0 only (docs/GPU.md), so that is the device it reports.
  static const CudaDeviceMonitor* const monitor = new CudaDeviceMonitor(std::vector<int>{0});
  static const PortableAccumulatorFactory* const backend =
      new PortableAccumulatorFactory("cuda", CudaReducerMakers(), monitor);
  return backend;
}

}  // namespace fedagg::cuda
