// ChunkChannel: a bounded hand-off of a stream's chunks to a decoder thread.
#include "service/core/chunk_channel.h"

#include <utility>

namespace fedagg {

ChunkChannel::ChunkChannel(uint64_t max_queued_bytes, std::function<void()> resume_reads)
    : max_queued_bytes_(max_queued_bytes), resume_reads_(std::move(resume_reads)) {}

bool ChunkChannel::Put(std::string chunk) {
  MutexLock lock(&mu_);
  queued_bytes_ += chunk.size();
  queued_.push_back(std::move(chunk));
  paused_ = queued_bytes_ >= max_queued_bytes_;
  return !paused_;
}

void ChunkChannel::Close(absl::Status end) {
  MutexLock lock(&mu_);
  closed_ = true;
  end_ = end.ok() ? absl::DataLossError("the stream ended before its reader had all the bytes it needs")
                  : std::move(end);
}

absl::StatusOr<absl::string_view> ChunkChannel::Next() {
  bool resume = false;
  {
    MutexLock lock(&mu_);
    taken_ = std::string();  // the previous chunk is decoded: release it before waiting
    mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !queued_.empty() || closed_; });
    if (queued_.empty()) return end_;
    taken_ = std::move(queued_.front());
    queued_.pop_front();
    queued_bytes_ -= taken_.size();
    if (paused_ && queued_bytes_ < max_queued_bytes_) {
      paused_ = false;
      resume = true;
    }
  }
  if (resume) resume_reads_();
  return absl::string_view(taken_);
}

}  // namespace fedagg
