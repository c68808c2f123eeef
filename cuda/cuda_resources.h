// RAII owners of CUDA resources: device memory (cudaMalloc), pinned host memory
// (cudaHostAlloc), streams and events (library handles use the same CudaHandle, e.g.
// sparse_spmv.h for cuSPARSE). Each is made by a Create that returns the runtime's error
// as a Status (out of memory: RESOURCE_EXHAUSTED) and frees its resource when destroyed;
// move-only.
#ifndef FEDAGG_CUDA_CUDA_RESOURCES_H_
#define FEDAGG_CUDA_CUDA_RESOURCES_H_

#include <cstddef>
#include <utility>

#include <cuda_runtime_api.h>

#include "absl/status/statusor.h"

namespace fedagg::cuda {

// Owns one resource of type T, released by Release(T) when destroyed (its status is
// ignored: nothing can be done about a failed release in a destructor).
template <typename T, auto Release>
class CudaHandle {
 public:
  CudaHandle() = default;
  explicit CudaHandle(T handle) : handle_(handle) {}
  CudaHandle(CudaHandle&& other) noexcept : handle_(std::exchange(other.handle_, T{})) {}
  CudaHandle& operator=(CudaHandle&& other) noexcept {
    if (this != &other) {
      Reset();
      handle_ = std::exchange(other.handle_, T{});
    }
    return *this;
  }
  CudaHandle(const CudaHandle&) = delete;
  CudaHandle& operator=(const CudaHandle&) = delete;
  ~CudaHandle() { Reset(); }

  T get() const { return handle_; }

 private:
  void Reset() {
    if (handle_ != T{}) static_cast<void>(Release(handle_));
    handle_ = T{};
  }
  T handle_{};
};

using CudaStream = CudaHandle<cudaStream_t, &cudaStreamDestroy>;
using CudaEvent = CudaHandle<cudaEvent_t, &cudaEventDestroy>;
using DeviceMemory = CudaHandle<void*, &cudaFree>;
using PinnedMemory = CudaHandle<void*, &cudaFreeHost>;

absl::StatusOr<CudaStream> CreateStream();  // non-blocking with respect to stream 0
absl::StatusOr<CudaEvent> CreateEvent();
absl::StatusOr<DeviceMemory> AllocateDevice(size_t bytes);
absl::StatusOr<PinnedMemory> AllocatePinned(size_t bytes);  // page-locked, portable

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_CUDA_RESOURCES_H_
