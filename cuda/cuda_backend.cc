// The cuda backend's factory, offered only when a device is present.
#include "cuda/cuda_backend.h"

#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cuda/cuda_copy_engine.h"
#include "cuda/cuda_device_monitor.h"
#include "cuda/cuda_host_pinner.h"
#include "cuda/cuda_reducers.h"
#include "cuda/device_bound_reducer.h"
#include "cuda/device_group.h"
#include "cuda/device_masks.h"
#include "cuda/device_probe.h"
#include "cuda/nccl_device_merger.h"
#include "cuda/temporary_memory_pool.h"
#include "portable/multi_device_reducer.h"
#include "portable/portable_accumulator_factory.h"
#include "portable/ring_field_reducer.h"
#include "service/core/mutex.h"
#include "service/core/status_macros.h"

namespace fedagg::cuda {
namespace {

// Reductions in flight at once on each device: the staging ring's compute lanes, each
// with a stream of its own; an accumulator's batches stay on one lane, in order.
constexpr int kReductionLanes = 4;

struct Backend {
  std::unique_ptr<const CudaDeviceMonitor> monitor;
  std::unique_ptr<const PortableAccumulatorFactory> factory;
};

absl::StatusOr<Backend> MakeBackend(const AccumulatorFactory& host, const portable::StagingRingOptions& staging,
                                     const std::vector<int>& devices) {
  Backend backend;
  backend.monitor = std::make_unique<const CudaDeviceMonitor>(devices);
  std::vector<std::unique_ptr<portable::StagingRing>> rings;
  std::vector<portable::ReducerMakers> per_device;
  for (int device : devices) {
    portable::StagingRingOptions options = staging;
    options.device = device;
    options.lanes = kReductionLanes;
    FEDAGG_ASSIGN_OR_RETURN(std::unique_ptr<CudaCopyEngine> engine, CudaCopyEngine::Create(device, options.lanes));
    // The reductions' temporaries (a sort's buffers of a slot's entries are a few times its
    // size at most) stay mapped between batches, up to the ring's own slot bytes.
    FEDAGG_RETURN_IF_ERROR(
        KeepFreedTemporaryMemory(device, static_cast<uint64_t>(options.slots) * options.slot_bytes));
    rings.push_back(std::make_unique<portable::StagingRing>(std::move(engine), options));
    // The slots' pinned host memory and device memory, now: not in a first round's way.
    if (absl::Status allocated = rings.back()->AllocateSlots(); !allocated.ok()) {
      return absl::Status(allocated.code(),
                          absl::StrCat("device ", device, " cannot hold its staging ring (--staging_slots=",
                                       options.slots, " of --staging_slot_mib=", options.slot_bytes >> 20,
                                       "): ", allocated.message(), "; give fewer or smaller slots"));
    }
    const portable::ReducerMakers staged = portable::RingReducerMakers(*rings.back(), CudaReducerMakers());
    // Device 0 alone is the runtime's default device: its reducers need no binding.
    per_device.push_back(devices == std::vector<int>{0} ? staged : BindToDevice(device, staged));
  }
  portable::DeviceMergers mergers;
  if (devices.size() > 1) {
    absl::StatusOr<std::unique_ptr<DeviceGroup>> group = DeviceGroup::Create(devices);
    if (!group.ok()) {
      return absl::InternalError(absl::StrCat("NCCL could not join devices ", absl::StrJoin(devices, ","), ": ",
                                              group.status().message()));
    }
    mergers = NcclDeviceMergers(std::shared_ptr<DeviceGroup>(*std::move(group)), per_device[0]);
  }
  // A secure aggregation's root expands its masks on the first device.
  MaskAdder add_masks = std::bind_front(AddMasksOnDevice, devices.front());
  backend.factory = std::make_unique<const PortableAccumulatorFactory>(
      "cuda", host, portable::MultiDeviceMakers(per_device, mergers), std::move(rings), std::move(add_masks),
      backend.monitor.get(), std::make_shared<CudaHostPinner>());
  return backend;
}

}  // namespace

absl::StatusOr<const AccumulatorFactory*> CudaBackend(const AccumulatorFactory& host,
                                                      const portable::StagingRingOptions& staging,
                                                      const std::optional<std::vector<int>>& requested) {
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
  // One backend per device list and staging options, made once and kept for the process's life.
  static Mutex* const mutex = new Mutex();
  static auto* const backends = new std::map<std::tuple<std::vector<int>, int, size_t>, Backend>();
  MutexLock lock(mutex);
  const auto key = std::make_tuple(devices, staging.slots, staging.slot_bytes);
  auto found = backends->find(key);
  if (found == backends->end()) {
    FEDAGG_ASSIGN_OR_RETURN(Backend backend, MakeBackend(host, staging, devices));
    found = backends->emplace(key, std::move(backend)).first;
  }
  return found->second.factory.get();
}

}  // namespace fedagg::cuda
