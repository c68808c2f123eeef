// CsrMatrix<Index, T>: a view of a compressed-sparse-row matrix in one memory space
// (host for OmpSystem, the device for CudaSystem), as the sparse family's batch A [B, D]
// is handed to a system's SpMV (row = update, column = coordinate of the field). Plain
// C++17 with no Thrust and no Abseil: nvcc-compiled reducers and g++-compiled cuSPARSE
// code both read it. Index is int32_t or int64_t, for the offsets and the columns alike.
#ifndef FEDAGG_PORTABLE_CSR_MATRIX_H_
#define FEDAGG_PORTABLE_CSR_MATRIX_H_

#include <cstdint>

namespace fedagg::portable {

template <typename Index, typename T>
struct CsrMatrix {
  int64_t rows = 0;
  int64_t columns = 0;
  int64_t nnz = 0;
  const Index* row_offsets = nullptr;     // rows + 1, row_offsets[rows] == nnz
  const Index* column_indices = nullptr;  // nnz, each in [0, columns), increasing in a row
  const T* values = nullptr;              // nnz

  // The same pattern with other values (e.g. ones, for per-column counts).
  template <typename U>
  CsrMatrix<Index, U> WithValues(const U* other) const {
    return CsrMatrix<Index, U>{rows, columns, nnz, row_offsets, column_indices, other};
  }
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_CSR_MATRIX_H_
