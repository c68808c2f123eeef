// CudaCopyEngine: the staging ring's copy engine on one GPU. A slot is pinned host memory
// (cudaHostAlloc) and device memory of the same size, with a pair of timing events; a
// copy is a cudaMemcpyAsync per span on the engine's own non-blocking copy stream between
// the two events, so copies run in the order they were started and overlap the kernels
// the ring's compute threads launch. Each compute lane gets a non-blocking stream of its
// own (BindThread binds it to the lane's thread: reduction_stream.h), so the lanes'
// reductions run at once. Only the CUDA calls live here: the ordering
// logic is the ring's (portable/staging_ring.h), tested on the CPU engine.
#ifndef FEDAGG_CUDA_CUDA_COPY_ENGINE_H_
#define FEDAGG_CUDA_CUDA_COPY_ENGINE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "cuda/cuda_resources.h"
#include "portable/copy_engine.h"

namespace fedagg::cuda {

class CudaCopyEngine final : public portable::CopyEngine {
 public:
  // An engine copying to `device`, with a reduction stream for each of `lanes` lanes; the
  // runtime's error when its streams cannot be made.
  static absl::StatusOr<std::unique_ptr<CudaCopyEngine>> Create(int device, int lanes = 1);
  // Waits for the copies in flight before the stream is destroyed.
  ~CudaCopyEngine() override;

  absl::StatusOr<std::unique_ptr<portable::StagingBuffer>> Allocate(size_t bytes) override;
  absl::Status StartCopy(portable::StagingBuffer& buffer, absl::Span<const portable::CopySpan> spans) override;
  absl::StatusOr<absl::Duration> WaitCopied(portable::StagingBuffer& buffer) override;
  absl::Status BindThread(int lane) override;

 private:
  class Buffer;
  CudaCopyEngine(int device, CudaStream stream, std::vector<CudaStream> lanes)
      : device_(device), stream_(std::move(stream)), lanes_(std::move(lanes)) {}

  const int device_;
  CudaStream stream_;              // the copies'
  std::vector<CudaStream> lanes_;  // each lane's reductions'
};

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_CUDA_COPY_ENGINE_H_
