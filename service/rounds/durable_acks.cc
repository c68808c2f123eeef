// DurableAcks: versions of an aggregation's changes and the DURABLE acks waiting for a
// checkpoint that holds them.
#include "service/rounds/durable_acks.h"

#include <algorithm>
#include <utility>

namespace fedagg {

std::optional<bool> DurableAcks::Await(Waiter& done, std::function<void()>* wanted) {
  if (!acks() || stopped_) return false;
  if (version_ <= durable_version_) return true;
  waiting_.emplace(version_, std::move(done));
  *wanted = wanted_;
  return std::nullopt;
}

DurableAcks::Waiters DurableAcks::MarkDurableUpTo(uint64_t version) {
  durable_version_ = std::max(durable_version_, version);
  Waiters released;
  const auto end = waiting_.upper_bound(durable_version_);
  for (auto it = waiting_.begin(); it != end; ++it) released.push_back(std::move(it->second));
  waiting_.erase(waiting_.begin(), end);
  return released;
}

DurableAcks::Waiters DurableAcks::Stop() {
  stopped_ = true;
  Waiters abandoned;
  for (auto& [version, waiter] : waiting_) abandoned.push_back(std::move(waiter));
  waiting_.clear();
  return abandoned;
}

void DurableAcks::Run(Waiters& waiters, bool durable) {
  for (Waiter& waiter : waiters) waiter(durable);
}

}  // namespace fedagg
