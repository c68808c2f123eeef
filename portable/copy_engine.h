// CopyEngine: the host-to-device copies of the staging ring (staging_ring.h), as a small
// interface so that the ring's ordering logic is written once and tested on the CPU.
// An engine allocates the ring's slot buffers (host memory the batch is packed into, and
// the device memory a reducer reads it from) and copies a slot's host part to its device
// part asynchronously, in the order the copies were started. Implementations: the CPU
// engine (cpu_copy_engine.h: a copy thread and memcpy, for thrust-omp and the tests) and
// the CUDA engine (cuda/cuda_copy_engine.h: pinned memory, cudaMemcpyAsync on a copy
// stream, one event per slot).
#ifndef FEDAGG_PORTABLE_COPY_ENGINE_H_
#define FEDAGG_PORTABLE_COPY_ENGINE_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fedagg::portable {

// One slot's memory: `bytes` of host memory and as many of device memory. Freed by its
// destructor; the ring destroys a buffer only once no copy into it is in flight.
class StagingBuffer {
 public:
  virtual ~StagingBuffer() = default;
  virtual void* host() = 0;
  virtual const void* device() const = 0;
  virtual size_t bytes() const = 0;
};

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;

  // A slot's buffers; RESOURCE_EXHAUSTED when host or device memory runs out.
  virtual absl::StatusOr<std::unique_ptr<StagingBuffer>> Allocate(size_t bytes) = 0;
  // Starts copying the first `bytes` of buffer.host() to buffer.device(), after every copy
  // started before it; returns without waiting. At most one copy per buffer is in flight.
  virtual absl::Status StartCopy(StagingBuffer& buffer, size_t bytes) = 0;
  // Waits for the copy last started on `buffer`; how long the copy itself took, or why it
  // failed.
  virtual absl::StatusOr<absl::Duration> WaitCopied(StagingBuffer& buffer) = 0;
  // Prepares the calling thread to reduce on the engine's device (the ring's compute
  // thread calls it once, before its first reduction).
  virtual absl::Status BindThread() = 0;
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_COPY_ENGINE_H_
