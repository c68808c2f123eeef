// StallSweeper: the sweep thread over a server's stall watches.
#include "service/rpc/stall_sweeper.h"

#include <algorithm>

#include "service/rpc/stall_watch.h"

namespace fedagg {

StallSweeper::StallSweeper(absl::Duration timeout) : timeout_(timeout) {
  if (enabled()) thread_ = std::thread([this] { Run(); });
}

StallSweeper::~StallSweeper() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Duration StallSweeper::period() const {
  return std::clamp(timeout_ / 4, absl::Milliseconds(1), absl::Milliseconds(250));
}

void StallSweeper::Add(StallWatch* watch) {
  if (!enabled()) return;
  MutexLock lock(&mu_);
  watches_.insert(watch);
}

void StallSweeper::Remove(StallWatch* watch) {
  if (!enabled()) return;
  MutexLock lock(&mu_);  // a sweep holds it while it checks the watches
  watches_.erase(watch);
}

void StallSweeper::Run() {
  const absl::Duration period = this->period();
  MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout([&] { return stopping_; }, period)) {
    const absl::Time now = absl::Now();
    for (StallWatch* watch : watches_) watch->Check(now, timeout_);
  }
}

}  // namespace fedagg
