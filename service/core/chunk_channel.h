// ChunkChannel: hands the chunks of an incoming stream (a child aggregator's partial, read
// by the RPC) to a decoder running on its own thread, as the ByteSource of its ByteReader.
// The decoder reads the chunks as they arrive, so a large input is never held whole.
// Back pressure: the channel queues at most about `max_queued_bytes` of chunks the decoder
// has not taken; past that, Put tells the producer to pause its reads (the sender's flow
// control then holds the rest back), and the decoder calls `resume_reads` once it has
// taken a chunk and there is room again. Memory in flight is therefore at most
// max_queued_bytes plus two chunks: the one being decoded and the one a paused read holds.
// Thread-safe: one producer thread at a time, one consumer thread.
#ifndef FEDAGG_SERVICE_CORE_CHUNK_CHANNEL_H_
#define FEDAGG_SERVICE_CORE_CHUNK_CHANNEL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/core/byte_codec.h"
#include "service/core/mutex.h"

namespace fedagg {

class ChunkChannel final : public ByteSource {
 public:
  // `resume_reads` runs on the consumer's thread, without the channel's lock, when reads
  // that Put paused may go on.
  ChunkChannel(uint64_t max_queued_bytes, std::function<void()> resume_reads);

  // Producer: queues `chunk`. True when the producer may read the next chunk at once;
  // false when it must wait for `resume_reads`.
  bool Put(std::string chunk);
  // Producer: no more chunks. Once the queued ones are taken, Next returns `end` (why the
  // stream ended early), or DATA_LOSS when `end` is OK: the stream ended normally, and
  // the consumer asked for more than it carried.
  void Close(absl::Status end);

  // Consumer: the next chunk, waiting for it to arrive; the previous one is released.
  absl::StatusOr<absl::string_view> Next() override;

 private:
  const uint64_t max_queued_bytes_;
  const std::function<void()> resume_reads_;
  Mutex mu_;
  std::deque<std::string> queued_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_ ABSL_GUARDED_BY(mu_);
  std::string taken_;  // the chunk the consumer reads now (consumer thread only)
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_CHUNK_CHANNEL_H_
