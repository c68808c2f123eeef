// The cuda backend: the portable reduction (portable/thrust_field_reducer.h) on the
// first CUDA device, its batches staged through a ring of pinned slots whose copies
// overlap the reductions (portable/staging_ring.h over cuda_copy_engine.h), its
// accumulators living in device memory for the aggregation's life and copied back only by
// Serialize and Report. docs/GPU.md describes the data path and what is not built yet.
#ifndef FEDAGG_CUDA_CUDA_BACKEND_H_
#define FEDAGG_CUDA_CUDA_BACKEND_H_

#include "absl/status/statusor.h"
#include "portable/staging_ring.h"
#include "service/core/accumulator_factory.h"

namespace fedagg::cuda {

// The process-wide cuda backend with these staging options (one per distinct options,
// made on first use and never freed); UNAVAILABLE, with the runtime's reason, when this
// machine has no usable CUDA device.
absl::StatusOr<const AccumulatorFactory*> CudaBackend(const portable::StagingRingOptions& staging = {});

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_CUDA_BACKEND_H_
