// The CUDA copy engine: pinned slots, cudaMemcpyAsync on a copy stream, timing events.
#include "cuda/cuda_copy_engine.h"

#include <algorithm>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_status.h"
#include "cuda/reduction_stream.h"
#include "service/core/status_macros.h"

namespace fedagg::cuda {

class CudaCopyEngine::Buffer final : public portable::StagingBuffer {
 public:
  Buffer(PinnedMemory host, DeviceMemory device, CudaEvent started, CudaEvent copied, size_t bytes)
      : host_(std::move(host)),
        device_(std::move(device)),
        started_(std::move(started)),
        copied_(std::move(copied)),
        bytes_(bytes) {}

  void* host() override { return host_.get(); }
  const void* device() const override { return device_.get(); }
  size_t bytes() const override { return bytes_; }
  void* device_memory() { return device_.get(); }
  cudaEvent_t started() const { return started_.get(); }
  cudaEvent_t copied() const { return copied_.get(); }

 private:
  PinnedMemory host_;
  DeviceMemory device_;
  CudaEvent started_;
  CudaEvent copied_;
  size_t bytes_;
};

absl::StatusOr<std::unique_ptr<CudaCopyEngine>> CudaCopyEngine::Create(int device, int lanes) {
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  FEDAGG_ASSIGN_OR_RETURN(CudaStream stream, CreateStream());
  std::vector<CudaStream> lane_streams;
  for (int lane = 0; lane < std::max(lanes, 1); ++lane) {
    FEDAGG_ASSIGN_OR_RETURN(CudaStream lane_stream, CreateStream());
    lane_streams.push_back(std::move(lane_stream));
  }
  return std::unique_ptr<CudaCopyEngine>(new CudaCopyEngine(device, std::move(stream), std::move(lane_streams)));
}

CudaCopyEngine::~CudaCopyEngine() {
  if (cudaSetDevice(device_) == cudaSuccess) {
    static_cast<void>(cudaStreamSynchronize(stream_.get()));
    for (const CudaStream& lane : lanes_) static_cast<void>(cudaStreamSynchronize(lane.get()));
  }
  ClearLastCudaError();  // nothing to report to from a destructor
}

absl::StatusOr<std::unique_ptr<portable::StagingBuffer>> CudaCopyEngine::Allocate(size_t bytes) {
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  FEDAGG_ASSIGN_OR_RETURN(PinnedMemory host, AllocatePinned(bytes));
  FEDAGG_ASSIGN_OR_RETURN(DeviceMemory device, AllocateDevice(bytes));
  FEDAGG_ASSIGN_OR_RETURN(CudaEvent started, CreateEvent());
  FEDAGG_ASSIGN_OR_RETURN(CudaEvent copied, CreateEvent());
  return std::make_unique<Buffer>(std::move(host), std::move(device), std::move(started), std::move(copied), bytes);
}

absl::Status CudaCopyEngine::StartCopy(portable::StagingBuffer& buffer, absl::Span<const portable::CopySpan> spans) {
  Buffer& slot = static_cast<Buffer&>(buffer);
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.started(), stream_.get()));
  // From pinned memory (the slot's, or updates received into registered mappings) each
  // copy is a DMA of its own; from pageable memory the runtime stages it, and returns
  // once the source was read.
  for (const portable::CopySpan& span : spans) {
    const cudaError_t error = cudaMemcpyAsync(static_cast<std::byte*>(slot.device_memory()) + span.to, span.from,
                                              span.bytes, cudaMemcpyHostToDevice, stream_.get());
    if (error != cudaSuccess) {
      const absl::Status copy = CudaStatus(error, "cudaMemcpyAsync");
      // The spans before may still be read: nothing reads the caller's memory once this returns.
      static_cast<void>(cudaStreamSynchronize(stream_.get()));
      ClearLastCudaError();
      return copy;
    }
  }
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.copied(), stream_.get()));
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> CudaCopyEngine::WaitCopied(portable::StagingBuffer& buffer) {
  Buffer& slot = static_cast<Buffer&>(buffer);
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(slot.copied()));
  float milliseconds = 0;
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&milliseconds, slot.started(), slot.copied()));
  return absl::Microseconds(static_cast<double>(milliseconds) * 1000.0);
}

absl::Status CudaCopyEngine::BindThread(int lane) {
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  if (lane < 0 || lane >= static_cast<int>(lanes_.size())) {
    return absl::InternalError(absl::StrCat("lane ", lane, " of a copy engine made for ", lanes_.size()));
  }
  BindReductionStream(lanes_[static_cast<size_t>(lane)].get());
  return absl::OkStatus();
}

}  // namespace fedagg::cuda
