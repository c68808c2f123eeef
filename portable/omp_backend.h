// The thrust-omp backend: the portable reduction (thrust_field_reducer.h) on Thrust's
// OpenMP system. It exists so that the code the CUDA backend runs is built and checked
// against the CPU reference on machines without a GPU (the conformance suite,
// fedagg-selftest --backend=thrust-omp); it can also serve as a reduction backend.
#ifndef FEDAGG_PORTABLE_OMP_BACKEND_H_
#define FEDAGG_PORTABLE_OMP_BACKEND_H_

#include "service/core/accumulator_factory.h"

namespace fedagg {

// The process-wide thrust-omp backend.
const AccumulatorFactory& ThrustOmpBackend();

}  // namespace fedagg

#endif  // FEDAGG_PORTABLE_OMP_BACKEND_H_
