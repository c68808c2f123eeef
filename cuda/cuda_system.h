// CudaSystem: Thrust's CUDA system as a ThrustFieldReducer system — state and working
// memory in device memory (thrust::cuda::vector, freed with the reducer), algorithms
// as CUDA kernels on the calling thread's reduction stream (reduction_stream.h: a staging
// lane's own stream, so lanes reduce at once), their temporary storage from the device's
// stream-ordered pool (cudaMallocAsync / cudaFreeAsync on that stream, never cudaFree,
// which waits for the whole device). Copies wait for their stream; a failure throws
// thrust::system_error carrying the runtime's message, which the reducer turns into an
// Outcome. Its SpMV (the sparse family's y += Aᵀx) is cuSPARSE's (device_spmv.h), on the
// same stream.
// Included only by nvcc-compiled code (cuda_reducers.cu).
#ifndef FEDAGG_CUDA_CUDA_SYSTEM_H_
#define FEDAGG_CUDA_CUDA_SYSTEM_H_

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>
#include <thrust/system/cuda/error.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/system/cuda/vector.h>
#include <thrust/system_error.h>

#include "cuda/cuda_status.h"
#include "cuda/device_spmv.h"
#include "cuda/reduction_stream.h"
#include "portable/csr_matrix.h"
#include "portable/field_reducer.h"

namespace fedagg::portable {

// Thrust's temporary storage, stream-ordered on `stream`.
struct StreamOrderedAllocator {
  using value_type = char;
  cudaStream_t stream = nullptr;

  char* allocate(std::ptrdiff_t bytes) {
    void* memory = nullptr;
    if (const cudaError_t error = cudaMallocAsync(&memory, static_cast<size_t>(bytes), stream);
        error != cudaSuccess) {
      cuda::ClearLastCudaError();
      throw thrust::system_error(error, thrust::cuda_category(), "cudaMallocAsync of Thrust's temporary storage");
    }
    return static_cast<char*>(memory);
  }
  void deallocate(char* memory, size_t) {
    if (cudaFreeAsync(memory, stream) != cudaSuccess) cuda::ClearLastCudaError();
  }
};

struct CudaSystem {
  template <typename T>
  using vector = thrust::cuda::vector<T>;
  static constexpr bool kHostMemory = false;  // its vectors are device memory
  // Elements of a row one work item of an elementwise reduction covers: one, so that
  // consecutive threads of a warp read consecutive elements.
  static constexpr int64_t kElementsPerWorkItem = 1;
  // Whether a float sum of one-element rows whose updates' indices ascend goes update by
  // update (ThrustFieldReducer::ScatterUpdates) rather than through CSR + SpMV: yes — no
  // CSR build, no transposition, no SpMV; the sparse_sum row's reductions took half the
  // time on an H200 (docs/BENCHMARKS.md item 52).
  static constexpr bool kUpdatePassesBeforeSpmv = true;
  // Whether its SpMV gives the same bits with 64-bit indices as with 32-bit ones: no —
  // cuSPARSE's reproducible Aᵀx transposes A with cusparseCsr2cscEx2, which has no 64-bit
  // form, so a batch that fits 32-bit indices is narrowed to them (csr_scatter.h).
  static constexpr bool kWideSpmvReproducible = false;

  // The device sizes its own launches, whatever the batch (OmpSystem bounds its threads).
  struct WorkScope {
    explicit WorkScope(int64_t) {}
  };

  // Thrust's policy on this thread's reduction stream, with stream-ordered temporaries
  // (the allocator lives as long as the thread; the policy refers to it). Each algorithm
  // waits for its stream before it returns. par_nosync, which does not, cut the sparse
  // rows' reduction time on an H200 but is not adopted until a GPU run says whether it
  // slowed dense 1 MiB updates (docs/BENCHMARKS.md item 52).
  static auto policy() {
    thread_local StreamOrderedAllocator allocator;
    allocator.stream = cuda::CurrentReductionStream();
    return thrust::cuda::par(allocator).on(allocator.stream);
  }
  static void ToDevice(void* dst, const void* src, size_t bytes) {
    Copy(dst, src, bytes, cudaMemcpyHostToDevice, "host-to-device cudaMemcpy");
  }
  static void ToHost(void* dst, const void* src, size_t bytes) {
    Copy(dst, src, bytes, cudaMemcpyDeviceToHost, "device-to-host cudaMemcpy");
  }
  // Waits for the work queued on this thread's reduction stream (Thrust's kernels and the
  // cuSPARSE calls), so that a staged batch's slot may be reused; throws its error.
  static void Finish() {
    if (const cudaError_t error = cudaStreamSynchronize(cuda::CurrentReductionStream()); error != cudaSuccess) {
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
    const cudaStream_t stream = cuda::CurrentReductionStream();
    cudaError_t error = cudaMemcpyAsync(dst, src, bytes, kind, stream);
    if (error == cudaSuccess) error = cudaStreamSynchronize(stream);
    if (error != cudaSuccess) {
      cuda::ClearLastCudaError();
      throw thrust::system_error(error, thrust::cuda_category(), what);
    }
  }
};

}  // namespace fedagg::portable

#endif  // FEDAGG_CUDA_CUDA_SYSTEM_H_
