// The thrust-omp backend: ThrustFieldReducer instantiated for Thrust's OpenMP system,
// on one or several simulated devices.
#include "portable/omp_backend.h"

#include <map>
#include <memory>
#include <vector>

#include "portable/host_device_merger.h"
#include "portable/multi_device_reducer.h"
#include "portable/omp_system.h"
#include "portable/portable_accumulator_factory.h"
#include "portable/thrust_field_reducer.h"
#include "service/core/mutex.h"

namespace fedagg {

const AccumulatorFactory& ThrustOmpBackend(int simulated_devices) {
  static Mutex* const mutex = new Mutex();
  static auto* const backends = new std::map<int, std::unique_ptr<const PortableAccumulatorFactory>>();
  MutexLock lock(mutex);
  std::unique_ptr<const PortableAccumulatorFactory>& backend = (*backends)[simulated_devices];
  if (backend == nullptr) {
    const portable::ReducerMakers device = portable::ThrustReducerMakers<portable::OmpSystem>();
    backend = std::make_unique<const PortableAccumulatorFactory>(
        "thrust-omp",
        portable::MultiDeviceMakers(std::vector<portable::ReducerMakers>(static_cast<size_t>(simulated_devices), device),
                                    portable::HostDeviceMergers(device)));
  }
  return *backend;
}

}  // namespace fedagg
