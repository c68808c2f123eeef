// The thrust-omp backend: the portable reduction (thrust_field_reducer.h) on Thrust's
// OpenMP system, its batches staged through a ring on the CPU copy engine
// (cpu_copy_engine.h). It exists so that the code the CUDA backend runs — staging ring
// included — is built and checked against the CPU reference on machines without a GPU
// (the conformance suite, fedagg-selftest --backend=thrust-omp); it can also serve as a
// reduction backend.
#ifndef FEDAGG_PORTABLE_OMP_BACKEND_H_
#define FEDAGG_PORTABLE_OMP_BACKEND_H_

#include "portable/staging_ring.h"
#include "service/core/accumulator_factory.h"

namespace fedagg {

// The process-wide thrust-omp backend with these staging options (one per distinct
// options, made on first use and never freed).
const AccumulatorFactory& ThrustOmpBackend(const portable::StagingRingOptions& staging = {});

}  // namespace fedagg

#endif  // FEDAGG_PORTABLE_OMP_BACKEND_H_
