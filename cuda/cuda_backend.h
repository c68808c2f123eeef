// The cuda backend: the portable reduction (portable/thrust_field_reducer.h) on the CUDA
// devices chosen by --devices, each device's batches staged through its own ring of
// pinned slots whose copies overlap the reductions (portable/staging_ring.h over
// cuda_copy_engine.h), the accumulators living in device memory for the aggregation's
// life and copied back only by Serialize and Report. With several devices each field's
// batches go to the devices in turn and Serialize / Report first sum the devices' states
// into the first one with NCCL (portable/multi_device_reducer.h, nccl_device_merger.h).
// docs/GPU.md describes the data path and what is not built yet.
#ifndef FEDAGG_CUDA_CUDA_BACKEND_H_
#define FEDAGG_CUDA_CUDA_BACKEND_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "portable/staging_ring.h"
#include "service/core/accumulator_factory.h"

namespace fedagg::cuda {

// The process-wide cuda backend with these staging options on `devices` (distinct CUDA
// device ids; nullopt: every device cudaGetDeviceCount finds), one per distinct
// arguments, made on first use and never freed. `host` is the process's CPU backend
// (CpuAccumulatorFactory::Default() of the program, which lives as long as it): what the
// backend keeps on the host's cores (a deterministic aggregation's exact sums, the checks
// of serialized partials) runs there (portable_accumulator_factory.h); the first call's is
// kept. UNAVAILABLE, with the runtime's reason, when this machine has no usable CUDA
// device; INVALID_ARGUMENT for an empty list or an id the machine does not have; INTERNAL
// when NCCL cannot join the devices.
absl::StatusOr<const AccumulatorFactory*> CudaBackend(
    const AccumulatorFactory& host, const portable::StagingRingOptions& staging = {},
    const std::optional<std::vector<int>>& devices = std::nullopt);

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_CUDA_BACKEND_H_
