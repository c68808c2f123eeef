// Creation of the RAII CUDA resources, errors as Status.
#include "cuda/cuda_resources.h"

#include "cuda/cuda_status.h"

namespace fedagg::cuda {

absl::StatusOr<CudaStream> CreateStream() {
  cudaStream_t stream = nullptr;
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return CudaStream(stream);
}

absl::StatusOr<CudaEvent> CreateEvent() {
  cudaEvent_t event = nullptr;
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaEventCreate(&event));
  return CudaEvent(event);
}

absl::StatusOr<DeviceMemory> AllocateDevice(size_t bytes) {
  void* memory = nullptr;
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaMalloc(&memory, bytes));
  return DeviceMemory(memory);
}

absl::StatusOr<PinnedMemory> AllocatePinned(size_t bytes) {
  void* memory = nullptr;
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&memory, bytes, cudaHostAllocPortable));
  return PinnedMemory(memory);
}

}  // namespace fedagg::cuda
