// The cuda backend: the portable reduction (portable/thrust_field_reducer.h) on the
// first CUDA device, its accumulators living in device memory for the aggregation's life
// and copied back only by Serialize and Report. docs/GPU.md describes the data path and
// what is not built yet (pinned staging ring, streams, cuSPARSE, NCCL across GPUs).
#ifndef FEDAGG_CUDA_CUDA_BACKEND_H_
#define FEDAGG_CUDA_CUDA_BACKEND_H_

#include "absl/status/statusor.h"
#include "service/core/accumulator_factory.h"

namespace fedagg::cuda {

// The process-wide cuda backend; UNAVAILABLE, with the runtime's reason, when this
// machine has no usable CUDA device.
absl::StatusOr<const AccumulatorFactory*> CudaBackend();

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_CUDA_BACKEND_H_
