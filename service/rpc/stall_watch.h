// StallWatch: evicts a client that stops sending in the middle of an update. A stream
// reactor tells it when an update opens and closes and when each message arrives and has
// been handled; the server's StallSweeper checks it every sweep period, and if an open
// update has seen no message for the stall timeout, `evict` runs — on the sweeper's
// thread, never inside (or blocking) a reactor callback, and never while the reactor is
// handling a message, so `evict` may touch the reactor's update state.
// After an eviction, MessageArrived() answers false: the stream is ending.
// The owner calls Shutdown from OnDone, before it deletes itself: no check runs after.
#ifndef FEDAGG_SERVICE_RPC_STALL_WATCH_H_
#define FEDAGG_SERVICE_RPC_STALL_WATCH_H_

#include <functional>

#include "absl/time/time.h"
#include "service/core/mutex.h"
#include "service/rpc/stall_sweeper.h"

namespace fedagg {

class StallWatch {
 public:
  // Null `sweeper`: never evicts. The sweeper must outlive the watch.
  StallWatch(StallSweeper* sweeper, std::function<void()> evict);
  ~StallWatch() { Shutdown(); }
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // Start of a reactor's read callback. False when the stream's update was evicted: the
  // reactor then ignores the message (the stream is finishing).
  bool MessageArrived();
  // End of the read callback.
  void MessageHandled();
  void UpdateOpened();
  void UpdateClosed();
  // Stops watching; returns once no check runs, now or later. Idempotent.
  void Shutdown();

  // The sweeper's check: evicts when the open update has seen no message for `timeout`
  // and no read callback is running.
  void Check(absl::Time now, absl::Duration timeout);

 private:
  StallSweeper* sweeper_;  // null once shut down
  const std::function<void()> evict_;

  Mutex mu_;
  // Read callbacks in progress (a paused one's successor may start before it returns).
  int handling_ ABSL_GUARDED_BY(mu_) = 0;
  bool update_open_ ABSL_GUARDED_BY(mu_) = false;
  bool evicted_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_activity_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_STALL_WATCH_H_
