// The thrust-omp backend: ThrustFieldReducer instantiated for Thrust's OpenMP system.
#include "portable/omp_backend.h"

#include "portable/omp_system.h"
#include "portable/portable_accumulator_factory.h"
#include "portable/thrust_field_reducer.h"

namespace fedagg {

const AccumulatorFactory& ThrustOmpBackend() {
  static const PortableAccumulatorFactory* const backend = new PortableAccumulatorFactory(
      "thrust-omp", portable::ThrustReducerMakers<portable::OmpSystem>());
  return *backend;
}

}  // namespace fedagg
