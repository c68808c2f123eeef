// SparseTransposeMultiplier: cuSPARSE's y += Aᵀx for the sparse family into a dense
// result. A batch of B sparse updates of a D-element field is a CSR matrix A [B, D]
// (row = update) in device memory (portable/csr_batch.h builds it); AccumulateTranspose
// adds y += Aᵀx (x = ones, or the update weights) with cusparseSpMV of the generic API,
// float32 or float64, 32- or 64-bit indices. When a bitwise-reproducible result is asked
// for, A is first transposed with cusparseCsr2cscEx2 and multiplied with the deterministic
// CUSPARSE_SPMV_CSR_ALG2 instead of the transposed product; cusparseCsr2cscEx2 takes
// 32-bit indices only, so that mode needs them. CudaSystem::SpmvTranspose
// (cuda_system_spmv.cc) is how the cuda backend's reducers call it.
#ifndef FEDAGG_CUDA_SPARSE_SPMV_H_
#define FEDAGG_CUDA_SPARSE_SPMV_H_

#include <cstddef>
#include <cstdint>
#include <utility>

#include <cuda_runtime_api.h>
#include <cusparse.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda/cuda_resources.h"
#include "portable/csr_matrix.h"

namespace fedagg::cuda {

// A CSR matrix in device memory; Index int32_t or int64_t, T float or double.
template <typename Index, typename T>
using DeviceCsr = portable::CsrMatrix<Index, T>;

using CusparseHandle = CudaHandle<cusparseHandle_t, &cusparseDestroy>;

class SparseTransposeMultiplier {
 public:
  // A cuSPARSE handle whose work goes to `stream`; UNAVAILABLE without a device.
  static absl::StatusOr<SparseTransposeMultiplier> Create(cudaStream_t stream);

  // y[a.columns] += Aᵀ x[a.rows], enqueued on the stream (synchronize before reading y on
  // the host). `deterministic`: the same inputs give the same bits on every run; with
  // 64-bit indices it is refused (INVALID_ARGUMENT).
  template <typename Index, typename T>
  absl::Status AccumulateTranspose(const DeviceCsr<Index, T>& a, const T* x, T* y, bool deterministic);

 private:
  SparseTransposeMultiplier(CusparseHandle handle, cudaStream_t stream)
      : handle_(std::move(handle)), stream_(stream) {}
  // y += op(M) x with the given algorithm.
  template <typename Index, typename T>
  absl::Status SpMV(cusparseOperation_t op, cusparseSpMVAlg_t alg, const DeviceCsr<Index, T>& m, const T* x,
                    T* y);
  // Grows a device buffer to at least `bytes`.
  static absl::Status Reserve(DeviceMemory& buffer, size_t& capacity, size_t bytes);

  CusparseHandle handle_;
  cudaStream_t stream_;
  DeviceMemory work_;        // cuSPARSE's external buffer
  size_t work_bytes_ = 0;
  DeviceMemory transposed_;  // Aᵀ as CSR: offsets, indices, values
  size_t transposed_bytes_ = 0;
};

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_SPARSE_SPMV_H_
