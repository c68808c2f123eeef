// The release threshold of a device's default stream-ordered pool.
#include "cuda/temporary_memory_pool.h"

#include <cuda_runtime_api.h>

#include "cuda/cuda_status.h"

namespace fedagg::cuda {

absl::Status KeepFreedTemporaryMemory(int device, uint64_t bytes) {
  cudaMemPool_t pool = nullptr;
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t threshold = bytes;  // the attribute's value type (cuuint64_t)
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  return absl::OkStatus();
}

}  // namespace fedagg::cuda
