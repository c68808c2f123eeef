// The cuda backend's pinning of received update memory: cudaHostRegister / Unregister.
#include "cuda/cuda_host_pinner.h"

#include <cuda_runtime.h>

#include "cuda/cuda_status.h"

namespace fedagg::cuda {

bool CudaHostPinner::Pin(void* data, size_t bytes) {
  if (cudaHostRegister(data, bytes, cudaHostRegisterPortable) == cudaSuccess) return true;
  ClearLastCudaError();
  return false;
}

void CudaHostPinner::Unpin(void* data, size_t) {
  // Fails only when the runtime is already torn down (process exit): nothing to undo then.
  if (cudaHostUnregister(data) != cudaSuccess) ClearLastCudaError();
}

}  // namespace fedagg::cuda
