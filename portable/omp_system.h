// OmpSystem: Thrust's OpenMP system as a ThrustFieldReducer system — "device" memory is
// host memory and algorithms run on the CPU's cores. Lets the portable reduction (the
// code the CUDA backend runs) be built and tested on machines without a GPU. Its SpMV
// (the sparse family's y += Aᵀx) is the CPU one of cpu_spmv.h.
#ifndef FEDAGG_PORTABLE_OMP_SYSTEM_H_
#define FEDAGG_PORTABLE_OMP_SYSTEM_H_

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <thrust/system/omp/execution_policy.h>
#include <thrust/system/omp/vector.h>

#include "portable/cpu_spmv.h"
#include "portable/csr_matrix.h"
#include "portable/field_reducer.h"

namespace fedagg::portable {

struct OmpSystem {
  template <typename T>
  using vector = thrust::omp::vector<T>;
  static constexpr bool kHostMemory = true;  // its vectors are host memory
  // Elements of a row one work item of an elementwise reduction covers: a thread loops
  // over a run of them, vectorised (one element per item would spend more on the item's
  // index arithmetic than on the add).
  static constexpr int64_t kElementsPerWorkItem = 64;
  // Whether a float sum of one-element rows whose updates' indices ascend goes update by
  // update (ThrustFieldReducer::ScatterUpdates) rather than through CSR + SpMV: not here,
  // where the SpMV works one block of y per thread and the passes' scattered adds miss the
  // cache entry by entry (docs/BENCHMARKS.md item 49).
  static constexpr bool kUpdatePassesBeforeSpmv = false;
  // Whether its SpMV gives the same bits with 64-bit indices as with 32-bit ones: yes
  // (cpu_spmv.h, for any index width), so a batch whose rows increase goes as staged,
  // with its 64-bit offsets and indices, not narrowed.
  static constexpr bool kWideSpmvReproducible = true;

  // For as long as it lives, bounds the threads of the parallel regions this thread
  // starts (every algorithm under policy(), the SpMV) by the elements of the batch they
  // work on: one thread per kElementsPerThread, at least one, at most the team's size.
  // Each region wakes its team (asleep, with the passive wait the server's threads use)
  // and joins it, which cost a small batch (a few updates of a few KB) more than its whole
  // work on the calling thread alone (docs/BENCHMARKS.md item 59).
  class WorkScope {
   public:
    static constexpr int64_t kElementsPerThread = int64_t{1} << 18;
    explicit WorkScope(int64_t elements) : team_(omp_get_max_threads()) {
      omp_set_num_threads(static_cast<int>(std::clamp<int64_t>(elements / kElementsPerThread, 1, team_)));
    }
    ~WorkScope() { omp_set_num_threads(team_); }
    WorkScope(const WorkScope&) = delete;
    WorkScope& operator=(const WorkScope&) = delete;

   private:
    const int team_;
  };

  static auto policy() { return thrust::omp::par; }
  static void ToDevice(void* dst, const void* src, size_t bytes) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  static void ToHost(void* dst, const void* src, size_t bytes) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  // Every algorithm has returned when its call does: nothing to wait for.
  static void Finish() {}
  // y[a.columns] += Aᵀ x[a.rows]; never fails.
  template <typename Index, typename T>
  static Outcome SpmvTranspose(const CsrMatrix<Index, T>& a, const T* x, T* y) {
    SpmvTransposeOnCpu(a, x, y);
    return Outcome{};
  }
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_OMP_SYSTEM_H_
