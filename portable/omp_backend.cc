// The thrust-omp backend: ThrustFieldReducer instantiated for Thrust's OpenMP system.
#include "portable/omp_backend.h"

#include <map>
#include <utility>

#include "portable/cpu_copy_engine.h"
#include "portable/omp_system.h"
#include "portable/portable_accumulator_factory.h"
#include "portable/thrust_field_reducer.h"
#include "service/core/mutex.h"

namespace fedagg {

const AccumulatorFactory& ThrustOmpBackend(const portable::StagingRingOptions& staging) {
  static Mutex mu;
  static auto* const backends = new std::map<std::pair<int, size_t>, const AccumulatorFactory*>();
  MutexLock lock(&mu);
  const AccumulatorFactory*& backend = (*backends)[{staging.slots, staging.slot_bytes}];
  if (backend == nullptr) {
    backend = new PortableAccumulatorFactory(
        "thrust-omp", portable::ThrustReducerMakers<portable::OmpSystem>(),
        std::make_unique<portable::StagingRing>(std::make_unique<portable::CpuCopyEngine>(), staging));
  }
  return *backend;
}

}  // namespace fedagg
