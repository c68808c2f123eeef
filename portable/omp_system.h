// OmpSystem: Thrust's OpenMP system as a ThrustFieldReducer system — "device" memory is
// host memory and algorithms run on the CPU's cores. Lets the portable reduction (the
// code the CUDA backend runs) be built and tested on machines without a GPU.
#ifndef FEDAGG_PORTABLE_OMP_SYSTEM_H_
#define FEDAGG_PORTABLE_OMP_SYSTEM_H_

#include <cstddef>
#include <cstring>

#include <thrust/system/omp/execution_policy.h>
#include <thrust/system/omp/vector.h>

namespace fedagg::portable {

struct OmpSystem {
  template <typename T>
  using vector = thrust::omp::vector<T>;
  static constexpr bool kHostMemory = true;  // its vectors are host memory

  static auto policy() { return thrust::omp::par; }
  static void ToDevice(void* dst, const void* src, size_t bytes) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  static void ToHost(void* dst, const void* src, size_t bytes) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_OMP_SYSTEM_H_
