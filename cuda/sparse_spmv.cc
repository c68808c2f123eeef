// y += A^T w with cuSPARSE's generic API.
#include "cuda/sparse_spmv.h"

#include "cuda/cuda_status.h"
#include "cuda/cusparse_status.h"
#include "service/core/status_macros.h"

namespace fedagg::cuda {
namespace {
using ConstSpMat = CudaHandle<cusparseConstSpMatDescr_t, &cusparseDestroySpMat>;
using ConstDnVec = CudaHandle<cusparseConstDnVecDescr_t, &cusparseDestroyDnVec>;
using DnVec = CudaHandle<cusparseDnVecDescr_t, &cusparseDestroyDnVec>;

size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }
}  // namespace

absl::StatusOr<SparseTransposeMultiplier> SparseTransposeMultiplier::Create(cudaStream_t stream) {
  cusparseHandle_t raw = nullptr;
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseCreate(&raw));
  CusparseHandle handle(raw);
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseSetStream(handle.get(), stream));
  return SparseTransposeMultiplier(std::move(handle), stream);
}

absl::Status SparseTransposeMultiplier::Reserve(DeviceMemory& buffer, size_t& capacity, size_t bytes) {
  if (bytes <= capacity) return absl::OkStatus();
  absl::StatusOr<DeviceMemory> grown = AllocateDevice(bytes);
  if (!grown.ok()) return grown.status();
  buffer = *std::move(grown);
  capacity = bytes;
  return absl::OkStatus();
}

absl::Status SparseTransposeMultiplier::SpMV(cusparseOperation_t op, cusparseSpMVAlg_t alg,
                                             int32_t rows, int32_t columns, int32_t nnz,
                                             const int32_t* offsets, const int32_t* indices,
                                             const float* values, const float* x, int64_t x_size,
                                             float* y, int64_t y_size) {
  cusparseConstSpMatDescr_t raw_matrix = nullptr;
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseCreateConstCsr(
      &raw_matrix, rows, columns, nnz, offsets, indices, values, CUSPARSE_INDEX_32I,
      CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  const ConstSpMat matrix(raw_matrix);
  cusparseConstDnVecDescr_t raw_x = nullptr;
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseCreateConstDnVec(&raw_x, x_size, x, CUDA_R_32F));
  const ConstDnVec x_vector(raw_x);
  cusparseDnVecDescr_t raw_y = nullptr;
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseCreateDnVec(&raw_y, y_size, y, CUDA_R_32F));
  const DnVec y_vector(raw_y);
  const float one = 1.0f;
  size_t bytes = 0;
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseSpMV_bufferSize(handle_.get(), op, &one, matrix.get(),
                                                          x_vector.get(), &one, y_vector.get(),
                                                          CUDA_R_32F, alg, &bytes));
  FEDAGG_RETURN_IF_ERROR(Reserve(work_, work_bytes_, bytes));
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseSpMV(handle_.get(), op, &one, matrix.get(), x_vector.get(),
                                               &one, y_vector.get(), CUDA_R_32F, alg, work_.get()));
  return absl::OkStatus();
}

absl::Status SparseTransposeMultiplier::AccumulateTranspose(const DeviceCsr& a, const float* w,
                                                            float* y, bool deterministic) {
  if (a.nnz == 0 || a.rows == 0 || a.columns == 0) return absl::OkStatus();
  if (!deterministic) {
    return SpMV(CUSPARSE_OPERATION_TRANSPOSE, CUSPARSE_SPMV_ALG_DEFAULT, a.rows, a.columns, a.nnz,
                a.row_offsets, a.column_indices, a.values, w, a.rows, y, a.columns);
  }
  // A^T in CSR is A in CSC: column offsets, row indices, values.
  const size_t offsets_bytes = Aligned(sizeof(int32_t) * (static_cast<size_t>(a.columns) + 1));
  const size_t indices_bytes = Aligned(sizeof(int32_t) * static_cast<size_t>(a.nnz));
  const size_t values_bytes = Aligned(sizeof(float) * static_cast<size_t>(a.nnz));
  FEDAGG_RETURN_IF_ERROR(
      Reserve(transposed_, transposed_bytes_, offsets_bytes + indices_bytes + values_bytes));
  char* base = static_cast<char*>(transposed_.get());
  int32_t* t_offsets = reinterpret_cast<int32_t*>(base);
  int32_t* t_indices = reinterpret_cast<int32_t*>(base + offsets_bytes);
  float* t_values = reinterpret_cast<float*>(base + offsets_bytes + indices_bytes);
  size_t bytes = 0;
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseCsr2cscEx2_bufferSize(
      handle_.get(), a.rows, a.columns, a.nnz, a.values, a.row_offsets, a.column_indices, t_values,
      t_offsets, t_indices, CUDA_R_32F, CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO,
      CUSPARSE_CSR2CSC_ALG1, &bytes));
  FEDAGG_RETURN_IF_ERROR(Reserve(work_, work_bytes_, bytes));
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseCsr2cscEx2(
      handle_.get(), a.rows, a.columns, a.nnz, a.values, a.row_offsets, a.column_indices, t_values,
      t_offsets, t_indices, CUDA_R_32F, CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO,
      CUSPARSE_CSR2CSC_ALG1, work_.get()));
  return SpMV(CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_SPMV_CSR_ALG2, a.columns, a.rows, a.nnz,
              t_offsets, t_indices, t_values, w, a.rows, y, a.columns);
}

}  // namespace fedagg::cuda
