// MirrorUpstream: an intermediate aggregator's mirror of an aggregation, as seen from its
// parent's side — whether the parent has registered this node (updates are accepted only
// while it has, so the parent always waits for what this node acked), who waits for that
// join, the clients whose updates entered the partial since the last delta went up, and
// whether the final delta did. Not thread-safe: the Aggregation's lock guards it.
#ifndef FEDAGG_SERVICE_ROUNDS_MIRROR_UPSTREAM_H_
#define FEDAGG_SERVICE_ROUNDS_MIRROR_UPSTREAM_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace fedagg {

class MirrorUpstream {
 public:
  using Waiters = std::vector<std::function<void()>>;

  // OK while joined; otherwise UNAVAILABLE telling the client of `aggregation_id` why and
  // what to do.
  absl::Status CheckJoined(const std::string& aggregation_id) const;
  bool joined() const { return joined_; }
  // The parent registered this node (`joined`) or the link ended (`why_not`: how the last
  // Join attempt or stream ended). Joining hands back every join waiter, to run outside
  // the lock.
  Waiters SetJoined(bool joined, const absl::Status& why_not);
  // `ready` waits for the join, at most until `deadline` (TakeWaitsOver).
  void AwaitJoin(absl::Time deadline, std::function<void()> ready);
  // The waiters whose deadline is past `now`, or all of them when the aggregation is no
  // longer `open`; to run outside the lock.
  Waiters TakeWaitsOver(absl::Time now, bool open);

  // Clients whose updates entered the partial (counted here, or carried by a merged child
  // partial): the next delta's covered client ids.
  void AddUndelivered(const std::string& client_id) { undelivered_.push_back(client_id); }
  void AddUndelivered(const std::vector<std::string>& client_ids);
  std::vector<std::string> TakeUndelivered();
  // A delta that could not be made: its clients go in the next one.
  void ReturnUndelivered(const std::vector<std::string>& client_ids);

  // After the final delta the mirror merges no more child partials (they would never go up).
  bool final_delta_taken() const { return final_delta_taken_; }
  void MarkFinalDeltaTaken() { final_delta_taken_ = true; }

 private:
  bool joined_ = false;
  absl::Status why_not_joined_;  // OK: not tried yet
  std::multimap<absl::Time, std::function<void()>> join_waiters_;  // by deadline
  std::vector<std::string> undelivered_;
  bool final_delta_taken_ = false;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_MIRROR_UPSTREAM_H_
