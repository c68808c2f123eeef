// CudaCopyEngine: the staging ring's copy engine on one GPU. A slot is pinned host memory
// (cudaHostAlloc) and device memory of the same size, with a pair of timing events; a
// copy is a cudaMemcpyAsync on the engine's own non-blocking copy stream between the two
// events, so copies run in the order they were started and overlap the kernels the ring's
// compute thread launches on the device. Only the CUDA calls live here: the ordering
// logic is the ring's (portable/staging_ring.h), tested on the CPU engine.
#ifndef FEDAGG_CUDA_CUDA_COPY_ENGINE_H_
#define FEDAGG_CUDA_CUDA_COPY_ENGINE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "cuda/cuda_resources.h"
#include "portable/copy_engine.h"

namespace fedagg::cuda {

class CudaCopyEngine final : public portable::CopyEngine {
 public:
  // An engine copying to `device`; the runtime's error when its stream cannot be made.
  static absl::StatusOr<std::unique_ptr<CudaCopyEngine>> Create(int device);
  // Waits for the copies in flight before the stream is destroyed.
  ~CudaCopyEngine() override;

  absl::StatusOr<std::unique_ptr<portable::StagingBuffer>> Allocate(size_t bytes) override;
  absl::Status StartCopy(portable::StagingBuffer& buffer, absl::Span<const portable::CopySpan> spans) override;
  absl::StatusOr<absl::Duration> WaitCopied(portable::StagingBuffer& buffer) override;
  absl::Status BindThread() override;

 private:
  class Buffer;
  CudaCopyEngine(int device, CudaStream stream) : device_(device), stream_(std::move(stream)) {}

  const int device_;
  CudaStream stream_;
};

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_CUDA_COPY_ENGINE_H_
