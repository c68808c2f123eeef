// y += Aᵀx with cuSPARSE's generic API, for float32 / float64 and 32- / 64-bit indices.
#include "cuda/sparse_spmv.h"

#include <type_traits>

#include "cuda/cuda_status.h"
#include "cuda/cusparse_status.h"
#include "service/core/status_macros.h"

namespace fedagg::cuda {
namespace {
using ConstSpMat = CudaHandle<cusparseConstSpMatDescr_t, &cusparseDestroySpMat>;
using ConstDnVec = CudaHandle<cusparseConstDnVecDescr_t, &cusparseDestroyDnVec>;
using DnVec = CudaHandle<cusparseDnVecDescr_t, &cusparseDestroyDnVec>;

template <typename T>
constexpr cudaDataType kValueType = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_64F;
template <typename Index>
constexpr cusparseIndexType_t kIndexType = std::is_same_v<Index, int32_t> ? CUSPARSE_INDEX_32I : CUSPARSE_INDEX_64I;

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

template <typename Index, typename T>
absl::Status SparseTransposeMultiplier::SpMV(cusparseOperation_t op, cusparseSpMVAlg_t alg,
                                             const DeviceCsr<Index, T>& m, const T* x, T* y) {
  const bool transposed = op != CUSPARSE_OPERATION_NON_TRANSPOSE;
  cusparseConstSpMatDescr_t raw_matrix = nullptr;
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseCreateConstCsr(
      &raw_matrix, m.rows, m.columns, m.nnz, m.row_offsets, m.column_indices, m.values, kIndexType<Index>,
      kIndexType<Index>, CUSPARSE_INDEX_BASE_ZERO, kValueType<T>));
  const ConstSpMat matrix(raw_matrix);
  cusparseConstDnVecDescr_t raw_x = nullptr;
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(
      cusparseCreateConstDnVec(&raw_x, transposed ? m.rows : m.columns, x, kValueType<T>));
  const ConstDnVec x_vector(raw_x);
  cusparseDnVecDescr_t raw_y = nullptr;
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseCreateDnVec(&raw_y, transposed ? m.columns : m.rows, y, kValueType<T>));
  const DnVec y_vector(raw_y);
  const T one = 1;
  size_t bytes = 0;
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseSpMV_bufferSize(handle_.get(), op, &one, matrix.get(),
                                                          x_vector.get(), &one, y_vector.get(),
                                                          kValueType<T>, alg, &bytes));
  FEDAGG_RETURN_IF_ERROR(Reserve(work_, work_bytes_, bytes));
  FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseSpMV(handle_.get(), op, &one, matrix.get(), x_vector.get(), &one,
                                               y_vector.get(), kValueType<T>, alg, work_.get()));
  return absl::OkStatus();
}

template <typename Index, typename T>
absl::Status SparseTransposeMultiplier::AccumulateTranspose(const DeviceCsr<Index, T>& a, const T* x, T* y,
                                                            bool deterministic) {
  if (a.nnz == 0 || a.rows == 0 || a.columns == 0) return absl::OkStatus();
  if (!deterministic) return SpMV(CUSPARSE_OPERATION_TRANSPOSE, CUSPARSE_SPMV_ALG_DEFAULT, a, x, y);
  if constexpr (!std::is_same_v<Index, int32_t>) {
    return absl::InvalidArgumentError(
        "a bitwise-reproducible A^T x needs 32-bit indices (cusparseCsr2cscEx2 has no 64-bit form)");
  } else {
    // Aᵀ in CSR is A in CSC: column offsets, row indices, values.
    const int rows = static_cast<int>(a.rows), columns = static_cast<int>(a.columns), nnz = static_cast<int>(a.nnz);
    const size_t offsets_bytes = Aligned(sizeof(int32_t) * (static_cast<size_t>(columns) + 1));
    const size_t indices_bytes = Aligned(sizeof(int32_t) * static_cast<size_t>(nnz));
    const size_t values_bytes = Aligned(sizeof(T) * static_cast<size_t>(nnz));
    FEDAGG_RETURN_IF_ERROR(
        Reserve(transposed_, transposed_bytes_, offsets_bytes + indices_bytes + values_bytes));
    char* base = static_cast<char*>(transposed_.get());
    int32_t* t_offsets = reinterpret_cast<int32_t*>(base);
    int32_t* t_indices = reinterpret_cast<int32_t*>(base + offsets_bytes);
    T* t_values = reinterpret_cast<T*>(base + offsets_bytes + indices_bytes);
    size_t bytes = 0;
    FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseCsr2cscEx2_bufferSize(
        handle_.get(), rows, columns, nnz, a.values, a.row_offsets, a.column_indices, t_values, t_offsets,
        t_indices, kValueType<T>, CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG1,
        &bytes));
    FEDAGG_RETURN_IF_ERROR(Reserve(work_, work_bytes_, bytes));
    FEDAGG_CUSPARSE_RETURN_IF_ERROR(cusparseCsr2cscEx2(
        handle_.get(), rows, columns, nnz, a.values, a.row_offsets, a.column_indices, t_values, t_offsets,
        t_indices, kValueType<T>, CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG1,
        work_.get()));
    return SpMV(CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_SPMV_CSR_ALG2,
                DeviceCsr<int32_t, T>{a.columns, a.rows, a.nnz, t_offsets, t_indices, t_values}, x, y);
  }
}

template absl::Status SparseTransposeMultiplier::AccumulateTranspose(const DeviceCsr<int32_t, float>&,
                                                                     const float*, float*, bool);
template absl::Status SparseTransposeMultiplier::AccumulateTranspose(const DeviceCsr<int32_t, double>&,
                                                                     const double*, double*, bool);
template absl::Status SparseTransposeMultiplier::AccumulateTranspose(const DeviceCsr<int64_t, float>&,
                                                                     const float*, float*, bool);
template absl::Status SparseTransposeMultiplier::AccumulateTranspose(const DeviceCsr<int64_t, double>&,
                                                                     const double*, double*, bool);

}  // namespace fedagg::cuda
