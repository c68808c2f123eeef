// SpmvTransposeOnCpu: y[columns] += Aᵀ x[rows] for a CSR matrix A in host memory, on the
// CPU's cores with OpenMP — the SpMV of OmpSystem (omp_system.h), as cuSPARSE is
// CudaSystem's. y is cut into tiles small enough to stay in a core's L2 cache (512 KiB of
// y), taken by the threads a group at a time; a tile is added to row by row, each row
// from where its previous tile stopped (its columns increase), so the lines of y one row
// brings in are still cached for the next, and a row's adds within a tile ascend. Every
// y[c] is thus added to by one thread, in row order, with no atomics: the result is
// bitwise the same for any thread count, and exact on data whose sums are exact.
#ifndef FEDAGG_PORTABLE_CPU_SPMV_H_
#define FEDAGG_PORTABLE_CPU_SPMV_H_

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "portable/csr_matrix.h"

namespace fedagg::portable {

// Entries ahead whose y[c] is prefetched: a row's columns are far apart in a large field,
// so each add would otherwise wait for memory.
inline constexpr int64_t kPrefetchDistance = 16;
// Bytes of y one tile covers.
inline constexpr int64_t kTileBytes = int64_t{512} << 10;
// Entries a tile should hold per row, at least, on average: a tile's walk over the rows
// costs a compare per row, small beside the adds (a wide, nearly empty matrix gets wider
// tiles).
inline constexpr int64_t kMinEntriesPerRowAndTile = 8;

template <typename Index, typename T>
void SpmvTransposeOnCpu(const CsrMatrix<Index, T>& a, const T* x, T* y) {
  if (a.nnz == 0 || a.columns == 0) return;
  const int64_t max_tiles = std::max<int64_t>(1, a.nnz / (kMinEntriesPerRowAndTile * a.rows));
  const int64_t tile = std::max<int64_t>(kTileBytes / static_cast<int64_t>(sizeof(T)),
                                         (a.columns + max_tiles - 1) / max_tiles);
  const int64_t tiles = (a.columns + tile - 1) / tile;
  // Groups small enough to balance the threads, large enough that the binary searches
  // that start a group (one per row) cost little.
  const int64_t group = std::max<int64_t>(1, tiles / (int64_t{8} * omp_get_max_threads()));
  const int64_t groups = (tiles + group - 1) / group;
#pragma omp parallel
  {
    std::vector<const Index*> next(static_cast<size_t>(a.rows));  // each row's first entry not added yet
#pragma omp for schedule(dynamic)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t first_tile = g * group;
      const int64_t last_tile = std::min(tiles, first_tile + group);
      for (int64_t r = 0; r < a.rows; ++r) {
        next[static_cast<size_t>(r)] = std::lower_bound(a.column_indices + a.row_offsets[r],
                                                        a.column_indices + a.row_offsets[r + 1], first_tile * tile);
      }
      for (int64_t t = first_tile; t < last_tile; ++t) {
        const int64_t limit = std::min(a.columns, (t + 1) * tile);
        for (int64_t r = 0; r < a.rows; ++r) {
          const Index* last = a.column_indices + a.row_offsets[r + 1];
          const T xr = x[r];
          const Index* it = next[static_cast<size_t>(r)];
          for (; it != last && *it < limit; ++it) {
            if (last - it > kPrefetchDistance) __builtin_prefetch(y + it[kPrefetchDistance], 1);
            y[*it] += a.values[it - a.column_indices] * xr;
          }
          next[static_cast<size_t>(r)] = it;
        }
      }
    }
  }
}

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_CPU_SPMV_H_
