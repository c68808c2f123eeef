// Batched dense sum on the GPU: adds the column sums of a [rows, columns] float32 batch
// (one update per row, in device memory) into a device accumulator, weighted per row.
// This is the CUDA counterpart of cpu::AddRows, and the first kernel of the CUDA backend
// (docs/ARCHITECTURE.md lists what that backend still lacks).
#ifndef FEDAGG_CUDA_DENSE_SUM_KERNEL_H_
#define FEDAGG_CUDA_DENSE_SUM_KERNEL_H_

#include <cstdint>

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace fedagg::cuda {

// accumulator[j] += sum_r weights[r] * batch[r * columns + j]; weights == nullptr means 1.
// Enqueues on `stream` and returns at once; launch errors come back as a Status.
absl::Status LaunchDenseSum(float* accumulator, const float* batch, const float* weights,
                            int64_t rows, int64_t columns, cudaStream_t stream);

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_DENSE_SUM_KERNEL_H_
