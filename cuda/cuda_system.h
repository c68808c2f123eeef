// CudaSystem: Thrust's CUDA system as a ThrustFieldReducer system — state and working
// memory in device memory (thrust::cuda::vector, freed with the reducer), algorithms
// as CUDA kernels. Copies are synchronous cudaMemcpy calls; a failure throws
// thrust::system_error carrying the runtime's message, which the reducer turns into an
// Outcome. Its SpMV (the sparse family's y += Aᵀx) is cuSPARSE's (device_spmv.h).
// Included only by nvcc-compiled code (cuda_reducers.cu).
#ifndef FEDAGG_CUDA_CUDA_SYSTEM_H_
#define FEDAGG_CUDA_CUDA_SYSTEM_H_

#include <cstddef>

#include <cuda_runtime_api.h>
#include <thrust/system/cuda/error.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/system/cuda/vector.h>
#include <thrust/system_error.h>

#include "cuda/cuda_status.h"
#include "cuda/device_spmv.h"
#include "portable/csr_matrix.h"
#include "portable/field_reducer.h"

namespace fedagg::portable {

struct CudaSystem {
  template <typename T>
  using vector = thrust::cuda::vector<T>;
  static constexpr bool kHostMemory = false;  // its vectors are device memory

  static auto policy() { return thrust::cuda::par; }
  static void ToDevice(void* dst, const void* src, size_t bytes) {
    Copy(dst, src, bytes, cudaMemcpyHostToDevice, "host-to-device cudaMemcpy");
  }
  static void ToHost(void* dst, const void* src, size_t bytes) {
    Copy(dst, src, bytes, cudaMemcpyDeviceToHost, "device-to-host cudaMemcpy");
  }
  // Waits for the work queued on the legacy default stream (Thrust's kernels and the
  // cuSPARSE calls), so that a staged batch's slot may be reused; throws its error.
  static void Finish() {
    if (const cudaError_t error = cudaStreamSynchronize(cudaStreamLegacy); error != cudaSuccess) {
      cuda::ClearLastCudaError();
      throw thrust::system_error(error, thrust::cuda_category(), "cudaStreamSynchronize after a reduction");
    }
  }
  // y[a.columns] += Aᵀ x[a.rows] with cuSPARSE, ordered with Thrust's kernels.
  template <typename Index, typename T>
  static Outcome SpmvTranspose(const CsrMatrix<Index, T>& a, const T* x, T* y) {
    return cuda::SpmvTransposeOnDevice(a, x, y);
  }

 private:
  static void Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* what) {
    if (bytes == 0) return;
    if (const cudaError_t error = cudaMemcpy(dst, src, bytes, kind); error != cudaSuccess) {
      cuda::ClearLastCudaError();
      throw thrust::system_error(error, thrust::cuda_category(), what);
    }
  }
};

}  // namespace fedagg::portable

#endif  // FEDAGG_CUDA_CUDA_SYSTEM_H_
