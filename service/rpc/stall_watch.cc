// StallWatch: one stream's stall state, checked by the server's StallSweeper.
#include "service/rpc/stall_watch.h"

#include <utility>

namespace fedagg {

StallWatch::StallWatch(StallSweeper* sweeper, std::function<void()> evict)
    : sweeper_(sweeper), evict_(std::move(evict)) {
  if (sweeper_ != nullptr) sweeper_->Add(this);
}

bool StallWatch::MessageArrived() {
  MutexLock lock(&mu_);
  if (evicted_) return false;
  ++handling_;
  last_activity_ = absl::Now();
  return true;
}

void StallWatch::MessageHandled() {
  MutexLock lock(&mu_);
  --handling_;
  last_activity_ = absl::Now();
}

void StallWatch::UpdateOpened() {
  MutexLock lock(&mu_);
  update_open_ = true;
  last_activity_ = absl::Now();
}

void StallWatch::UpdateClosed() {
  MutexLock lock(&mu_);
  update_open_ = false;
}

void StallWatch::Shutdown() {
  if (sweeper_ == nullptr) return;
  sweeper_->Remove(this);
  sweeper_ = nullptr;
}

void StallWatch::Check(absl::Time now, absl::Duration timeout) {
  MutexLock lock(&mu_);
  if (!update_open_ || evicted_ || handling_ > 0 || now - last_activity_ < timeout) return;
  evicted_ = true;
  update_open_ = false;
  evict_();  // no read callback runs now: MessageArrived waits for this lock
}

}  // namespace fedagg
