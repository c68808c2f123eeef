// The thrust-omp backend: the portable reduction (thrust_field_reducer.h) on Thrust's
// OpenMP system, its batches staged through a ring on the CPU copy engine
// (cpu_copy_engine.h). It exists so that the code the CUDA backend runs — staging ring
// included — is built and checked against the CPU reference on machines without a GPU
// (the conformance suite, fedagg-selftest --backend=thrust-omp); it can also serve as a
// reduction backend. With simulated devices (--devices=0,1,2: a test aid) it reduces each
// field on that many "devices" of the CPU, each with its own ring, merged through the
// host, so the multi-device orchestration the cuda backend uses across GPUs
// (multi_device_reducer.h) runs end to end without a GPU.
#ifndef FEDAGG_PORTABLE_OMP_BACKEND_H_
#define FEDAGG_PORTABLE_OMP_BACKEND_H_

#include "portable/staging_ring.h"
#include "service/core/accumulator_factory.h"

namespace fedagg {

// The process-wide thrust-omp backend with these staging options over
// `simulated_devices` (>= 1) devices; one device is the plain backend, with no
// multi-device layer. One per distinct arguments, made on first use and never freed.
const AccumulatorFactory& ThrustOmpBackend(const portable::StagingRingOptions& staging = {},
                                           int simulated_devices = 1);

}  // namespace fedagg

#endif  // FEDAGG_PORTABLE_OMP_BACKEND_H_
