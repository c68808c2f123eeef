// StallWatch: evicts a client that stops sending in the middle of an update. A stream
// reactor tells it when an update opens and closes and when each message arrives and has
// been handled; if an open update sees no message for `timeout`, `evict` runs — on a
// gRPC callback alarm, never inside (or blocking) a reactor callback, and never while the
// reactor is handling a message, so `evict` may touch the reactor's update state.
// After an eviction, MessageArrived() answers false: the stream is ending.
// The owner calls Shutdown(then) from OnDone and deletes itself in `then`, which runs
// once no alarm callback is pending or running.
#ifndef FEDAGG_SERVICE_RPC_STALL_WATCH_H_
#define FEDAGG_SERVICE_RPC_STALL_WATCH_H_

#include <grpcpp/alarm.h>

#include <functional>
#include <memory>

#include "absl/time/time.h"
#include "service/core/mutex.h"

namespace fedagg {

class StallWatch {
 public:
  // `timeout` zero or infinite: never evicts.
  StallWatch(absl::Duration timeout, std::function<void()> evict)
      : timeout_(timeout), evict_(std::move(evict)) {}
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // Start of a reactor's read callback. False when the stream's update was evicted: the
  // reactor then ignores the message (the stream is finishing).
  bool MessageArrived();
  // End of the read callback.
  void MessageHandled();
  void UpdateOpened();
  void UpdateClosed();
  // Stops watching; `then` runs exactly once, when no alarm callback is pending or running.
  void Shutdown(std::function<void()> then);

 private:
  bool enabled() const { return timeout_ > absl::ZeroDuration() && timeout_ != absl::InfiniteDuration(); }
  void ScheduleLocked(absl::Time when) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnAlarm(bool fired);

  const absl::Duration timeout_;
  const std::function<void()> evict_;

  Mutex mu_;
  // Read callbacks in progress (a paused one's successor may start before it returns).
  int handling_ ABSL_GUARDED_BY(mu_) = 0;
  bool update_open_ ABSL_GUARDED_BY(mu_) = false;
  bool evicted_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_activity_ ABSL_GUARDED_BY(mu_);
  // A fresh alarm per schedule: gRPC's callback alarm is not re-armed from its own callback.
  std::unique_ptr<grpc::Alarm> alarm_ ABSL_GUARDED_BY(mu_);
  bool alarm_pending_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> then_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_STALL_WATCH_H_
