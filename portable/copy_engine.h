// CopyEngine: the host-to-device copies of the staging ring (staging_ring.h), as a small
// interface so that the ring's ordering logic is written once and tested on the CPU.
// An engine allocates the ring's slot buffers (host memory for what must be packed, and
// the device memory a reducer reads the batch from) and copies a list of spans into a
// slot's device memory asynchronously, in the order the copies were started. A span comes
// from the slot's own host memory (packed there: weights, offsets, reordered entries) or
// straight from the received updates, so their bulk is copied once, to the device, with no
// pack copy on the host. Implementations: the CPU engine (cpu_copy_engine.h: a copy thread
// and memcpy, for thrust-omp and the tests) and the CUDA engine (cuda/cuda_copy_engine.h:
// pinned slots, cudaMemcpyAsync on a copy stream, one event per slot).
#ifndef FEDAGG_PORTABLE_COPY_ENGINE_H_
#define FEDAGG_PORTABLE_COPY_ENGINE_H_

#include <cstddef>
#include <memory>

#include "absl/types/span.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fedagg::portable {

// `bytes` of host memory at `from`, copied to the slot's device memory at offset `to`.
struct CopySpan {
  const void* from = nullptr;
  size_t to = 0;
  size_t bytes = 0;
};

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
  // Starts copying `spans` into buffer.device(), after every copy started before it;
  // returns without waiting. Each span's host memory must stay unchanged until WaitCopied
  // returns. At most one copy per buffer is in flight.
  virtual absl::Status StartCopy(StagingBuffer& buffer, absl::Span<const CopySpan> spans) = 0;
  // Waits for the copy last started on `buffer`; how long the copy itself took, or why it
  // failed. Several threads may wait for one copy.
  virtual absl::StatusOr<absl::Duration> WaitCopied(StagingBuffer& buffer) = 0;
  // Prepares the calling thread to reduce on the engine's device, on lane `lane` (each of
  // the ring's compute threads calls it once, before its first reduction; for cuda the
  // lane's reductions then run on a stream of its own).
  virtual absl::Status BindThread(int lane) = 0;
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_COPY_ENGINE_H_
