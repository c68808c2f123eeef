// The thrust-omp backend: ThrustFieldReducer instantiated for Thrust's OpenMP system,
// on one or several simulated devices, each fed through its own staging ring.
#include "portable/omp_backend.h"

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "portable/cpu_copy_engine.h"
#include "portable/host_device_merger.h"
#include "portable/multi_device_reducer.h"
#include "portable/omp_mask_accumulator.h"
#include "portable/omp_system.h"
#include "portable/portable_accumulator_factory.h"
#include "portable/ring_field_reducer.h"
#include "portable/thrust_field_reducer.h"
#include "service/core/cpu_accumulator_factory.h"
#include "service/core/mutex.h"

namespace fedagg {

const AccumulatorFactory& ThrustOmpBackend(const portable::StagingRingOptions& staging, int simulated_devices) {
  static Mutex* const mutex = new Mutex();
  static auto* const backends =
      new std::map<std::tuple<int, int, size_t>, std::unique_ptr<const PortableAccumulatorFactory>>();
  MutexLock lock(mutex);
  std::unique_ptr<const PortableAccumulatorFactory>& backend =
      (*backends)[{simulated_devices, staging.slots, staging.slot_bytes}];
  if (backend == nullptr) {
    std::vector<std::unique_ptr<portable::StagingRing>> rings;
    std::vector<portable::ReducerMakers> per_device;
    for (int device = 0; device < simulated_devices; ++device) {
      portable::StagingRingOptions options = staging;
      options.device = device;
      rings.push_back(std::make_unique<portable::StagingRing>(std::make_unique<portable::CpuCopyEngine>(), options));
      // At start, as the cuda backend does (here the memory stays untouched until used).
      // Slots that cannot be had, the ring does without; with none, a batch's Acquire
      // says RESOURCE_EXHAUSTED.
      static_cast<void>(rings.back()->AllocateSlots());
      per_device.push_back(
          portable::RingReducerMakers(*rings.back(), portable::ThrustReducerMakers<portable::OmpSystem>()));
    }
    portable::ReducerMakers makers =
        portable::MultiDeviceMakers(per_device, portable::HostDeviceMergers(per_device.front()));
    // Secure aggregation's masks through the portable ChaCha20 a GPU runs, on the CPU's cores.
    backend = std::make_unique<const PortableAccumulatorFactory>("thrust-omp", CpuAccumulatorFactory::Default(),
                                                                 std::move(makers), std::move(rings),
                                                                 AddMasksOnThrustOmp);
  }
  return *backend;
}

}  // namespace fedagg
