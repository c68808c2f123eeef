// ChildAggregators: an aggregation's child aggregators — Join streams, merged pushes,
// leases and the children given up as lost.
#include "service/rounds/child_aggregators.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fedagg {
namespace {
// The node part of a child id "<node>@<incarnation>"; empty when the id names no
// incarnation.
absl::string_view NodeOfChild(absl::string_view child_id) {
  const size_t at = child_id.rfind('@');
  return at == absl::string_view::npos ? absl::string_view() : child_id.substr(0, at);
}
}  // namespace

ChildAggregators::Child& ChildAggregators::Get(const std::string& child_id, absl::Time now) {
  auto [it, created] = children_.try_emplace(child_id);
  if (created) it->second.lost_since = now;
  return it->second;
}

absl::Status ChildAggregators::CheckNotGivenUp(const std::string& child_id) const {
  auto it = children_.find(child_id);
  if (it == children_.end() || !it->second.given_up) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "this aggregator gave child '", child_id, "' up as lost for aggregation '", aggregation_id_,
      "' (its Join stream was gone for longer than the parent's --child_grace_ms, or a newer incarnation of "
      "it joined) and released the client ids it had claimed without delivering their updates, so those "
      "clients may send them again; it takes nothing more from that child for this aggregation"));
}

void ChildAggregators::GiveUp(const std::string& child_id, const std::string& why, GivenUp* given_up) {
  Child& child = Get(child_id);
  child.given_up = true;
  child.connected = false;
  child.notifier = nullptr;
  std::vector<std::string> ids = leases_.ReleaseAll(child_id);
  std::fprintf(stderr,
               "fedagg-server: aggregation '%s': child aggregator '%s' is lost (%s); released the %zu client "
               "ids it had claimed without delivering their updates, so those clients may send them again\n",
               aggregation_id_.c_str(), child_id.c_str(), why.c_str(), ids.size());
  ++given_up->children;
  given_up->client_ids.insert(given_up->client_ids.end(), std::make_move_iterator(ids.begin()),
                              std::make_move_iterator(ids.end()));
}

absl::StatusOr<ChildAggregators::Registration> ChildAggregators::Join(const std::string& child_id,
                                                                      ChildNotifier notifier, bool sealed,
                                                                      GivenUp* given_up) {
  if (absl::Status given_up_before = CheckNotGivenUp(child_id); !given_up_before.ok()) return given_up_before;
  const absl::string_view node = NodeOfChild(child_id);
  std::vector<std::string> earlier;
  for (const auto& [other_id, other] : children_) {
    if (!node.empty() && other_id != child_id && NodeOfChild(other_id) == node && !other.link_up &&
        !other.given_up && !other.final_received && leases_.Holds(other_id)) {
      earlier.push_back(other_id);
    }
  }
  for (const std::string& other_id : earlier) {
    GiveUp(other_id, absl::StrCat("a newer incarnation '", child_id, "' joined"), given_up);
  }
  Child& child = Get(child_id);
  child.notifier = std::move(notifier);
  child.connected = true;
  child.link_up = true;
  return Registration{child.last_sequence, sealed, ++child.joins};
}

bool ChildAggregators::Leave(const std::string& child_id, uint64_t join, absl::Time now) {
  auto it = children_.find(child_id);
  if (it == children_.end() || it->second.joins != join) return false;
  Child& child = it->second;
  child.connected = false;
  child.notifier = nullptr;
  child.link_up = false;
  child.lost_since = now;
  return true;
}

std::vector<ChildNotifier> ChildAggregators::JoinedNotifiers() const {
  std::vector<ChildNotifier> notifiers;
  for (const auto& [child_id, child] : children_) {
    if (child.connected && child.notifier) notifiers.push_back(child.notifier);
  }
  return notifiers;
}

void ChildAggregators::Grant(const std::string& child_id, const std::string& client_id) {
  Get(child_id);
  leases_.Grant(child_id, client_id);
}

bool ChildAggregators::ReleaseClaim(const std::string& child_id, const std::string& client_id) {
  return leases_.Release(child_id, client_id);
}

absl::StatusOr<bool> ChildAggregators::CheckPush(const std::string& child_id, uint64_t sequence) const {
  if (sequence == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("partial from child '", child_id, "' has sequence 0; sequences start at 1"));
  }
  if (absl::Status given_up = CheckNotGivenUp(child_id); !given_up.ok()) return given_up;
  auto it = children_.find(child_id);
  const uint64_t last = it == children_.end() ? 0 : it->second.last_sequence;
  if (sequence <= last) return false;
  if (sequence != last + 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("partial ", sequence, " from child '", child_id, "' skips ahead: expected ", last + 1));
  }
  return true;
}

std::vector<std::string> ChildAggregators::RecordPush(const std::string& child_id, uint64_t sequence, bool final,
                                                      const std::vector<std::string>& covered_client_ids) {
  Child& child = Get(child_id);
  child.last_sequence = sequence;
  child.final_received |= final;
  return leases_.Cover(child_id, covered_client_ids);
}

ChildAggregators::GivenUp ChildAggregators::GiveUpSilent(absl::Time now, absl::Duration grace) {
  std::vector<std::string> lost;
  for (const auto& [child_id, child] : children_) {
    if (!child.link_up && !child.given_up && !child.final_received && leases_.Holds(child_id) &&
        now - child.lost_since >= grace) {
      lost.push_back(child_id);
    }
  }
  GivenUp given_up;
  for (const std::string& child_id : lost) {
    GiveUp(child_id, absl::StrCat("no Join stream for ", absl::FormatDuration(grace)), &given_up);
  }
  return given_up;
}

bool ChildAggregators::AllDone() const {
  for (const auto& [child_id, child] : children_) {
    if (child.final_received || child.given_up) continue;
    // A joined child may still push. One whose stream is gone but that holds claims it
    // has not delivered acknowledged those updates to their clients: it is waited for
    // too, until it rejoins and pushes them or the grace period gives it up.
    if (child.connected || leases_.Holds(child_id)) return false;
  }
  return true;
}

std::vector<std::pair<std::string, uint64_t>> ChildAggregators::Sequences() const {
  std::vector<std::pair<std::string, uint64_t>> sequences;
  for (const auto& [child_id, child] : children_) sequences.emplace_back(child_id, child.last_sequence);
  return sequences;
}

void ChildAggregators::MarkDurable(const std::vector<std::pair<std::string, uint64_t>>& sequences) {
  for (const auto& [child_id, last_sequence] : sequences) {
    Child& child = Get(child_id);
    child.durable_sequence = std::max(child.durable_sequence, last_sequence);
  }
}

uint64_t ChildAggregators::DurableSequence(const std::string& child_id) const {
  auto it = children_.find(child_id);
  return it == children_.end() ? 0 : it->second.durable_sequence;
}

std::vector<AggregationCheckpoint::ChildProgress> ChildAggregators::Progress() const {
  std::vector<AggregationCheckpoint::ChildProgress> progress;
  for (const auto& [child_id, child] : children_) {
    progress.push_back(
        {child_id, child.last_sequence, child.final_received, child.given_up, leases_.HeldBy(child_id)});
  }
  return progress;
}

void ChildAggregators::Restore(const AggregationCheckpoint::ChildProgress& progress, absl::Time now) {
  Child& child = Get(progress.child_id, now);
  child.last_sequence = progress.last_sequence;
  child.durable_sequence = progress.last_sequence;
  child.final_received = progress.final_received;
  child.given_up = progress.released;
  child.connected = !progress.final_received && !progress.released;
  for (const std::string& client_id : progress.leased) leases_.Grant(progress.child_id, client_id);
}

}  // namespace fedagg
