// The cuda backend's factory, offered only when a device is present.
#include "cuda/cuda_backend.h"

#include <map>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cuda/cuda_device_monitor.h"
#include "cuda/cuda_reducers.h"
#include "cuda/device_bound_reducer.h"
#include "cuda/device_group.h"
#include "cuda/device_probe.h"
#include "cuda/nccl_device_merger.h"
#include "portable/multi_device_reducer.h"
#include "portable/portable_accumulator_factory.h"
#include "service/core/mutex.h"
#include "service/core/status_macros.h"

namespace fedagg::cuda {
namespace {

struct Backend {
  std::unique_ptr<const CudaDeviceMonitor> monitor;
  std::unique_ptr<const PortableAccumulatorFactory> factory;
};

absl::StatusOr<Backend> MakeBackend(const std::vector<int>& devices) {
  Backend backend;
  backend.monitor = std::make_unique<const CudaDeviceMonitor>(devices);
  const portable::ReducerMakers cuda = CudaReducerMakers();
  if (devices == std::vector<int>{0}) {  // device 0 alone: the reducers as they are
    backend.factory = std::make_unique<const PortableAccumulatorFactory>("cuda", cuda, backend.monitor.get());
    return backend;
  }
  std::vector<portable::ReducerMakers> per_device;
  for (int device : devices) per_device.push_back(BindToDevice(device, cuda));
  portable::DeviceMergers mergers;
  if (devices.size() > 1) {
    absl::StatusOr<std::unique_ptr<DeviceGroup>> group = DeviceGroup::Create(devices);
    if (!group.ok()) {
      return absl::InternalError(absl::StrCat("NCCL could not join devices ", absl::StrJoin(devices, ","), ": ",
                                              group.status().message()));
    }
    mergers = NcclDeviceMergers(std::shared_ptr<DeviceGroup>(*std::move(group)), per_device[0]);
  }
  backend.factory = std::make_unique<const PortableAccumulatorFactory>(
      "cuda", portable::MultiDeviceMakers(per_device, mergers), backend.monitor.get());
  return backend;
}

}  // namespace

absl::StatusOr<const AccumulatorFactory*> CudaBackend(const std::optional<std::vector<int>>& requested) {
  FEDAGG_ASSIGN_OR_RETURN(const int count, UsableDeviceCount());
  std::vector<int> devices(static_cast<size_t>(count));
  std::iota(devices.begin(), devices.end(), 0);
  if (requested.has_value()) devices = *requested;
  if (devices.empty()) return absl::InvalidArgumentError("no CUDA device named");
  for (int device : devices) {
    if (device < 0 || device >= count) {
      return absl::InvalidArgumentError(absl::StrCat("CUDA device ", device, " does not exist here (found ",
                                                     count == 1 ? "device 0 only" : absl::StrCat("devices 0-", count - 1),
                                                     ")"));
    }
  }
  // One backend per device list, made once and kept for the process's life.
  static Mutex* const mutex = new Mutex();
  static auto* const backends = new std::map<std::vector<int>, Backend>();
  MutexLock lock(mutex);
  auto found = backends->find(devices);
  if (found == backends->end()) {
    FEDAGG_ASSIGN_OR_RETURN(Backend backend, MakeBackend(devices));
    found = backends->emplace(devices, std::move(backend)).first;
  }
  return found->second.factory.get();
}

}  // namespace fedagg::cuda
