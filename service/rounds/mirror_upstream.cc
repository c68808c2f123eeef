// MirrorUpstream: a mirror's join at its parent, its join waiters and its undelivered clients.
#include "service/rounds/mirror_upstream.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace fedagg {

absl::Status MirrorUpstream::CheckJoined(const std::string& aggregation_id) const {
  if (joined_) return absl::OkStatus();
  if (why_not_joined_.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "this intermediate aggregator is not joined to aggregation '", aggregation_id,
        "' at its parent yet (joining, or the parent is unreachable); retry shortly"));
  }
  return absl::UnavailableError(absl::StrCat(
      "this intermediate aggregator is not joined to aggregation '", aggregation_id,
      "' at its parent: the link to the parent aggregator ended with ", why_not_joined_.ToString(),
      " and it is rejoining; retry shortly, or send the update to another aggregator"));
}

MirrorUpstream::Waiters MirrorUpstream::SetJoined(bool joined, const absl::Status& why_not) {
  joined_ = joined;
  why_not_joined_ = joined ? absl::OkStatus() : why_not;
  Waiters ready;
  if (!joined) return ready;
  for (auto& [deadline, run] : join_waiters_) ready.push_back(std::move(run));
  join_waiters_.clear();
  return ready;
}

void MirrorUpstream::AwaitJoin(absl::Time deadline, std::function<void()> ready) {
  join_waiters_.emplace(deadline, std::move(ready));
}

MirrorUpstream::Waiters MirrorUpstream::TakeWaitsOver(absl::Time now, bool open) {
  const auto over = open ? join_waiters_.upper_bound(now) : join_waiters_.end();
  Waiters waits_over;
  for (auto it = join_waiters_.begin(); it != over; ++it) waits_over.push_back(std::move(it->second));
  join_waiters_.erase(join_waiters_.begin(), over);
  return waits_over;
}

void MirrorUpstream::AddUndelivered(const std::vector<std::string>& client_ids) {
  undelivered_.insert(undelivered_.end(), client_ids.begin(), client_ids.end());
}

std::vector<std::string> MirrorUpstream::TakeUndelivered() { return std::exchange(undelivered_, {}); }

void MirrorUpstream::ReturnUndelivered(const std::vector<std::string>& client_ids) {
  undelivered_.insert(undelivered_.begin(), client_ids.begin(), client_ids.end());
}

}  // namespace fedagg
