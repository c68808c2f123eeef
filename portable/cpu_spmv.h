// SpmvTransposeOnCpu: y[columns] += Aᵀ x[rows] for a CSR matrix A in host memory, on the
// CPU's cores with OpenMP — the SpMV of OmpSystem (omp_system.h), as cuSPARSE is
// CudaSystem's. The columns are split into one block per thread; each thread walks every
// row and adds only the entries of its block (found by binary search, the columns of a
// row being increasing). Every y[c] is thus added to by one thread, in row order, with
// no atomics: the result is bitwise the same for any thread count, and exact on data
// whose sums are exact.
#ifndef FEDAGG_PORTABLE_CPU_SPMV_H_
#define FEDAGG_PORTABLE_CPU_SPMV_H_

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "portable/csr_matrix.h"

namespace fedagg::portable {

// Entries ahead whose y[c] is prefetched: a row's columns are far apart in a large field,
// so each add would otherwise wait for memory.
inline constexpr int64_t kPrefetchDistance = 16;

template <typename Index, typename T>
void SpmvTransposeOnCpu(const CsrMatrix<Index, T>& a, const T* x, T* y) {
  if (a.nnz == 0 || a.columns == 0) return;
  const int64_t blocks = std::min<int64_t>(omp_get_max_threads(), a.columns);
#pragma omp parallel for schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const Index lo = static_cast<Index>(a.columns / blocks * block + std::min(block, a.columns % blocks));
    const Index hi = static_cast<Index>(lo + a.columns / blocks + (block < a.columns % blocks ? 1 : 0));
    for (int64_t r = 0; r < a.rows; ++r) {
      const Index* last = a.column_indices + a.row_offsets[r + 1];
      const T xr = x[r];
      for (const Index* it = std::lower_bound(a.column_indices + a.row_offsets[r], last, lo);
           it != last && *it < hi; ++it) {
        if (last - it > kPrefetchDistance) __builtin_prefetch(y + it[kPrefetchDistance], 1);
        y[*it] += a.values[it - a.column_indices] * xr;
      }
    }
  }
}

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_CPU_SPMV_H_
