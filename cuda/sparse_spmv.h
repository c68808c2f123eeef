// SparseTransposeMultiplier: the cuSPARSE path for sparse_sum / sparse_mean into a dense
// result. A batch of B sparse updates of a D-element field is a CSR matrix A [B, D]
// (row = update) in device memory; AccumulateTranspose adds y += A^T w (w = ones, or the
// update weights) with cusparseSpMV of the generic API. When a bitwise-reproducible
// result is asked for, A is first transposed with cusparseCsr2cscEx2 and multiplied with
// the deterministic CUSPARSE_SPMV_CSR_ALG2 instead of the transposed product.
// A thin wrapper, tested only where a GPU exists (tests/cuda/sparse_spmv_test.cc); the
// cuda backend's accumulators do not use it yet (they sort and reduce segments:
// docs/GPU.md).
#ifndef FEDAGG_CUDA_SPARSE_SPMV_H_
#define FEDAGG_CUDA_SPARSE_SPMV_H_

#include <cstdint>

#include <cuda_runtime_api.h>
#include <cusparse.h>

#include "absl/status/statusor.h"
#include "cuda/cuda_resources.h"

namespace fedagg::cuda {

// A [rows, columns] float32 CSR matrix with 32-bit indices, in device memory.
struct DeviceCsr {
  int32_t rows = 0;
  int32_t columns = 0;
  int32_t nnz = 0;
  const int32_t* row_offsets = nullptr;     // rows + 1
  const int32_t* column_indices = nullptr;  // nnz, each in [0, columns)
  const float* values = nullptr;            // nnz
};

using CusparseHandle = CudaHandle<cusparseHandle_t, &cusparseDestroy>;

class SparseTransposeMultiplier {
 public:
  // A cuSPARSE handle whose work goes to `stream`; UNAVAILABLE without a device.
  static absl::StatusOr<SparseTransposeMultiplier> Create(cudaStream_t stream);

  // y[columns] += A^T w[rows], enqueued on the stream (call cudaStreamSynchronize before
  // reading y). `deterministic`: the same inputs give the same bits on every run.
  absl::Status AccumulateTranspose(const DeviceCsr& a, const float* w, float* y, bool deterministic);

 private:
  SparseTransposeMultiplier(CusparseHandle handle, cudaStream_t stream)
      : handle_(std::move(handle)), stream_(stream) {}
  // y += M x for the CSR matrix M, with the given operation and algorithm.
  absl::Status SpMV(cusparseOperation_t op, cusparseSpMVAlg_t alg, int32_t rows, int32_t columns,
                    int32_t nnz, const int32_t* offsets, const int32_t* indices, const float* values,
                    const float* x, int64_t x_size, float* y, int64_t y_size);
  // Grows a device buffer to at least `bytes`.
  static absl::Status Reserve(DeviceMemory& buffer, size_t& capacity, size_t bytes);

  CusparseHandle handle_;
  cudaStream_t stream_;
  DeviceMemory work_;        // cuSPARSE's external buffer
  size_t work_bytes_ = 0;
  DeviceMemory transposed_;  // A^T as CSR: offsets, indices, values
  size_t transposed_bytes_ = 0;
};

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_SPARSE_SPMV_H_
