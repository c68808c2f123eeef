// StallWatch: eviction of updates whose client stopped sending, on a gRPC callback alarm.
#include "service/rpc/stall_watch.h"

namespace fedagg {

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
  if (!enabled()) return;
  MutexLock lock(&mu_);
  update_open_ = true;
  last_activity_ = absl::Now();
  if (!alarm_pending_ && !shut_down_) ScheduleLocked(last_activity_ + timeout_);
}

void StallWatch::UpdateClosed() {
  MutexLock lock(&mu_);
  update_open_ = false;
}

void StallWatch::ScheduleLocked(absl::Time when) {
  // Replacing the alarm from inside its own callback is safe: gRPC keeps the running
  // alarm's state alive until its callback returns.
  alarm_ = std::make_unique<grpc::Alarm>();
  alarm_pending_ = true;
  alarm_->Set(absl::ToChronoTime(when), [this](bool fired) { OnAlarm(fired); });
}

void StallWatch::OnAlarm(bool fired) {
  std::function<void()> then;
  {
    MutexLock lock(&mu_);
    alarm_pending_ = false;
    if (shut_down_) {
      then = std::move(then_);
    } else if (fired && update_open_ && !evicted_) {
      const absl::Time now = absl::Now();
      if (handling_ > 0) {
        ScheduleLocked(now + timeout_);
      } else if (now - last_activity_ < timeout_) {
        ScheduleLocked(last_activity_ + timeout_);
      } else {
        evicted_ = true;
        update_open_ = false;
        evict_();  // no read callback runs now: MessageArrived waits for this lock
      }
    }
  }
  if (then) then();
}

void StallWatch::Shutdown(std::function<void()> then) {
  {
    MutexLock lock(&mu_);
    shut_down_ = true;
    if (alarm_pending_) {
      then_ = std::move(then);
      alarm_->Cancel();  // the callback runs soon, on gRPC's executor, and calls `then`
      return;
    }
  }
  then();
}

}  // namespace fedagg
