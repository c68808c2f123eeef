// Batched dense sum kernel: one thread per accumulator column, rows read coalesced.
#include "cuda/cuda_status.h"
#include "cuda/dense_sum_kernel.h"

namespace fedagg::cuda {
namespace {

__global__ void DenseSumKernel(float* __restrict__ accumulator, const float* __restrict__ batch,
                               const float* __restrict__ weights, int64_t rows, int64_t columns) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < columns;
       j += stride) {
    float sum = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const float x = batch[r * columns + j];
      sum += weights == nullptr ? x : weights[r] * x;
    }
    accumulator[j] += sum;
  }
}

}  // namespace

absl::Status LaunchDenseSum(float* accumulator, const float* batch, const float* weights,
                            int64_t rows, int64_t columns, cudaStream_t stream) {
  if (rows <= 0 || columns <= 0) return absl::OkStatus();
  constexpr int kThreads = 256;
  const int64_t wanted_blocks = (columns + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted_blocks < 65535 ? wanted_blocks : 65535);
  // The launch checks its own error only: whatever an earlier call left in the thread's
  // last-error slot was that call's to report.
  ClearLastCudaError();
  DenseSumKernel<<<blocks, kThreads, 0, stream>>>(accumulator, batch, weights, rows, columns);
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace fedagg::cuda
