// The cuda backend's factory, offered only when a device is present.
#include "cuda/cuda_backend.h"

#include "cuda/cuda_reducers.h"
#include "cuda/device_probe.h"
#include "portable/portable_accumulator_factory.h"

namespace fedagg::cuda {

absl::StatusOr<const AccumulatorFactory*> CudaBackend() {
  if (absl::StatusOr<int> devices = UsableDeviceCount(); !devices.ok()) return devices.status();
  static const PortableAccumulatorFactory* const backend =
      new PortableAccumulatorFactory("cuda", CudaReducerMakers());
  return backend;
}

}  // namespace fedagg::cuda
