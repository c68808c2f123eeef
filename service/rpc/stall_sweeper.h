// StallSweeper: the one clock behind every StallWatch of a server. Each stream's watch
// registers for the stream's life; a thread wakes every sweep period (a quarter of the
// stall timeout, at most 250 ms) and asks each watch whether its open update has seen no
// message for the timeout, which evicts it. One thread and one short lock per stream's
// start and end, instead of a gRPC alarm set and cancelled for every stream and a
// shutdown that had to wait for the alarm's callback. An update is evicted between
// `timeout` and `timeout` + the period after its last message.
#ifndef FEDAGG_SERVICE_RPC_STALL_SWEEPER_H_
#define FEDAGG_SERVICE_RPC_STALL_SWEEPER_H_

#include <thread>
#include <unordered_set>

#include "absl/time/time.h"
#include "service/core/mutex.h"

namespace fedagg {

class StallWatch;

class StallSweeper {
 public:
  // `timeout` zero or infinite: never evicts (no thread).
  explicit StallSweeper(absl::Duration timeout);
  // Every watch must have been removed.
  ~StallSweeper();
  StallSweeper(const StallSweeper&) = delete;
  StallSweeper& operator=(const StallSweeper&) = delete;

  absl::Duration timeout() const { return timeout_; }
  bool enabled() const { return timeout_ > absl::ZeroDuration() && timeout_ != absl::InfiniteDuration(); }
  absl::Duration period() const;

  void Add(StallWatch* watch);
  // Returns once no sweep checks `watch`, now or later.
  void Remove(StallWatch* watch);

 private:
  void Run();

  const absl::Duration timeout_;
  Mutex mu_;
  std::unordered_set<StallWatch*> watches_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_STALL_SWEEPER_H_
