// ChildAggregators: the child aggregators one aggregation has heard from at this node —
// the Join stream each has open (or since when it is gone), the partials merged from each
// (their sequences, and the last one a checkpoint on disk holds), the client-id claims each
// holds (its leases, client_leases.h), and which were given up as lost. From those it
// answers whether a sealed aggregation still waits for a child, whether a push is the one
// expected next, and which children are lost (docs/PROTOCOL.md 6.2–6.4).
// Not thread-safe: the owning Aggregation guards it with its state lock, and calls the
// notifiers it hands out after releasing that lock.
#ifndef FEDAGG_SERVICE_ROUNDS_CHILD_AGGREGATORS_H_
#define FEDAGG_SERVICE_ROUNDS_CHILD_AGGREGATORS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/rounds/checkpoint_file.h"
#include "service/rounds/client_leases.h"

namespace fedagg {

// Sent to a child aggregator over its Tier.Join stream.
enum class ChildCommand { kFlush, kSeal };
using ChildNotifier = std::function<void(ChildCommand)>;

class ChildAggregators {
 public:
  // `aggregation_id` names the aggregation in messages.
  explicit ChildAggregators(std::string aggregation_id) : aggregation_id_(std::move(aggregation_id)) {}

  // What a joining child learns: the last sequence merged from it, whether the
  // aggregation is already sealed, and `join`, the number of this join (for Leave).
  struct Registration {
    uint64_t last_sequence = 0;
    bool sealed = false;
    uint64_t join = 0;
  };
  // Children one call gave up as lost, and the client ids whose leases they held: no
  // longer counted at this node, and to be released at its parent too.
  struct GivenUp {
    int children = 0;
    std::vector<std::string> client_ids;
  };

  // FAILED_PRECONDITION when `child_id` was given up as lost: it may push and claim no more.
  absl::Status CheckNotGivenUp(const std::string& child_id) const;

  // `child_id`'s Join stream opened. An earlier incarnation of the same node ("<node>@<n>",
  // as service/server.cc names children) whose stream is gone and that still holds leases
  // will not come back: it is given up (into `given_up`).
  absl::StatusOr<Registration> Join(const std::string& child_id, ChildNotifier notifier, bool sealed,
                                    GivenUp* given_up);
  // The Join stream of registration `join` ended at `now`. False (nothing changes) when the
  // child has joined again since: a child that rejoined is still waited for and still gets
  // SEAL.
  bool Leave(const std::string& child_id, uint64_t join, absl::Time now);
  // The notifiers of the children waited for as joined (to send SEAL).
  std::vector<ChildNotifier> JoinedNotifiers() const;

  // `child_id` holds the claim of `client_id` from now on. A child that claims before it
  // joins is known from here, so it is given up if it never joins.
  void Grant(const std::string& child_id, const std::string& client_id);
  // The child gives back a claim it did not use; false when it does not hold it.
  bool ReleaseClaim(const std::string& child_id, const std::string& client_id);
  // The child holding the claim of `client_id`, or null when none does.
  const std::string* HolderOf(const std::string& client_id) const { return leases_.HolderOf(client_id); }
  // Claims held by all children together.
  size_t claims() const { return leases_.size(); }

  // Whether push `sequence` of `child_id` is to be merged: true for the next one, false for
  // one merged already (a retried push, acknowledged again). INVALID_ARGUMENT for 0,
  // FAILED_PRECONDITION when it skips ahead or the child was given up.
  absl::StatusOr<bool> CheckPush(const std::string& child_id, uint64_t sequence) const;
  // Push `sequence` (`final` or not) was merged; it carries the updates of
  // `covered_client_ids`. Returns those whose leases `child_id` held, which end here.
  std::vector<std::string> RecordPush(const std::string& child_id, uint64_t sequence, bool final,
                                      const std::vector<std::string>& covered_client_ids);

  // Gives up every child whose Join stream has been gone for `grace` at `now` while it
  // holds leases and has not pushed its final partial.
  GivenUp GiveUpSilent(absl::Time now, absl::Duration grace);
  // Whether no child is left to wait for: each child that is joined, or whose stream is
  // gone while it holds claims it has not delivered, has pushed its final partial or was
  // given up as lost.
  bool AllDone() const;

  // The last sequence merged from each child (what a delta or snapshot holds).
  std::vector<std::pair<std::string, uint64_t>> Sequences() const;
  // A checkpoint on disk holds these sequences.
  void MarkDurable(const std::vector<std::pair<std::string, uint64_t>>& sequences);
  // The last sequence of `child_id` that a checkpoint on disk holds.
  uint64_t DurableSequence(const std::string& child_id) const;
  // Every child's progress, for a checkpoint.
  std::vector<AggregationCheckpoint::ChildProgress> Progress() const;
  // A child's progress from a checkpoint, after a restart: as durable as the checkpoint,
  // and waited for as if joined (it rejoins to push what is missing; one that never does
  // is given up after the grace period, like a silent child).
  void Restore(const AggregationCheckpoint::ChildProgress& progress, absl::Time now);

  size_t size() const { return children_.size(); }

 private:
  struct Child {
    ChildNotifier notifier;
    uint64_t last_sequence = 0;
    uint64_t durable_sequence = 0;  // last_sequence in the last checkpoint on disk
    bool connected = false;         // waited for as joined
    bool final_received = false;
    uint64_t joins = 0;      // Join calls so far; the last one's stream is the live one
    bool link_up = false;    // its latest Join stream is open
    absl::Time lost_since;   // when its stream ended (or this node restarted)
    bool given_up = false;   // lost: its leases were released
  };
  // The child's record, created (not linked, lost since `now`) when first seen.
  Child& Get(const std::string& child_id, absl::Time now = absl::Now());
  // Gives `child_id` up as lost, for the reason `why` (logged).
  void GiveUp(const std::string& child_id, const std::string& why, GivenUp* given_up);

  const std::string aggregation_id_;
  std::map<std::string, Child> children_;
  ClientLeases leases_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_CHILD_AGGREGATORS_H_
