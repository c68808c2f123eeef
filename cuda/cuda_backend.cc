// The cuda backend's factory, offered only when a device is present.
#include "cuda/cuda_backend.h"

#include <map>
#include <utility>

#include "cuda/cuda_copy_engine.h"
#include "cuda/cuda_device_monitor.h"
#include "cuda/cuda_reducers.h"
#include "cuda/device_probe.h"
#include "portable/portable_accumulator_factory.h"
#include "service/core/mutex.h"
#include "service/core/status_macros.h"

namespace fedagg::cuda {

absl::StatusOr<const AccumulatorFactory*> CudaBackend(const portable::StagingRingOptions& staging) {
  if (absl::StatusOr<int> devices = UsableDeviceCount(); !devices.ok()) return devices.status();
  // The backend reduces on device 0 only (docs/GPU.md), so that is the device it reports.
  static const CudaDeviceMonitor* const monitor = new CudaDeviceMonitor(std::vector<int>{0});
  static Mutex mu;
  static auto* const backends = new std::map<std::pair<int, size_t>, const AccumulatorFactory*>();
  MutexLock lock(&mu);
  const AccumulatorFactory*& backend = (*backends)[{staging.slots, staging.slot_bytes}];
  if (backend == nullptr) {
    portable::StagingRingOptions on_device = staging;
    on_device.device = 0;
    FEDAGG_ASSIGN_OR_RETURN(std::unique_ptr<CudaCopyEngine> engine, CudaCopyEngine::Create(on_device.device));
    backend = new PortableAccumulatorFactory(
        "cuda", CudaReducerMakers(), std::make_unique<portable::StagingRing>(std::move(engine), on_device), monitor);
  }
  return backend;
}

}  // namespace fedagg::cuda
