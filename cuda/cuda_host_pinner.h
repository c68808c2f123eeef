// CudaHostPinner: the cuda backend's HostMemoryPinner. Pins the mappings updates are
// received into with cudaHostRegister (portable: every device's context sees them as
// pinned), so the staging ring's copies from them are DMA at the link's speed instead of
// copies the runtime stages through its own pinned buffers.
#ifndef FEDAGG_CUDA_CUDA_HOST_PINNER_H_
#define FEDAGG_CUDA_CUDA_HOST_PINNER_H_

#include <cstddef>

#include "service/core/host_memory_pinner.h"

namespace fedagg::cuda {

class CudaHostPinner final : public HostMemoryPinner {
 public:
  // False when the runtime refuses (the memory is then copied from as pageable memory);
  // the error is cleared, so it fails no later call.
  bool Pin(void* data, size_t bytes) override;
  void Unpin(void* data, size_t bytes) override;
};

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_CUDA_HOST_PINNER_H_
