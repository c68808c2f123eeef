// DurableAcks: how much of what one aggregation counted a checkpoint on disk holds, and
// the DURABLE acks waiting for one that does. Every change a checkpoint must hold bumps a
// version (Changed); a checkpoint written at this node, or on a mirror the parent's word
// that a checkpoint above holds a delta, reports the version it holds (MarkDurableUpTo),
// which releases the acks waiting for that version or an older one. Acks can be DURABLE
// only where this node writes checkpoints or its parent chain does (SetUpstream); once
// checkpoints stop (Stop), the waiting acks and any later ones are answered false.
// Not thread-safe: the owning Aggregation guards it with its state lock, and runs the
// waiters it hands back (Run) after releasing that lock.
#ifndef FEDAGG_SERVICE_ROUNDS_DURABLE_ACKS_H_
#define FEDAGG_SERVICE_ROUNDS_DURABLE_ACKS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace fedagg {

class DurableAcks {
 public:
  using Waiter = std::function<void(bool)>;  // called with whether a checkpoint holds the ack
  using Waiters = std::vector<Waiter>;

  // `checkpointed`: this node writes checkpoints of the aggregation.
  explicit DurableAcks(bool checkpointed) : checkpointed_(checkpointed) {}

  // Something a checkpoint must hold changed.
  void Changed() { ++version_; }
  uint64_t version() const { return version_; }
  // Whether the last checkpoint holds every change so far.
  bool AllDurable() const { return durable_version_ == version_; }
  // Everything so far counts as held: the aggregation was restored from a checkpoint, or
  // it is finished and checkpointed as such (what changes after matters to no restart).
  void MarkAllDurable() { durable_version_ = version_; }

  // Whether DURABLE acks can be given: this node writes checkpoints, or it is a mirror
  // whose parent said that a checkpoint above holds what it merges.
  bool acks() const { return checkpointed_ || upstream_; }
  void SetUpstream(bool durable) { upstream_ = durable; }
  // `wanted` is handed out each time an ack starts waiting (Await), so that a mirror's
  // parent link pushes at once. Null: none.
  void OnWanted(std::function<void()> wanted) { wanted_ = std::move(wanted); }
  // Whether any ack waits.
  bool awaited() const { return !waiting_.empty(); }

  // An ack of everything changed so far: its answer when known now (true when a checkpoint
  // holds it already; false when none will), or nullopt when `done` was taken to wait and
  // `*wanted` holds the OnWanted callback to run.
  std::optional<bool> Await(Waiter& done, std::function<void()>* wanted);
  // A checkpoint holds every change up to `version`: the waiters released, to run with true.
  Waiters MarkDurableUpTo(uint64_t version);
  // No checkpoint will hold more: every waiter, to run with false; later acks get false.
  Waiters Stop();

  static void Run(Waiters& waiters, bool durable);

 private:
  const bool checkpointed_;
  bool upstream_ = false;
  uint64_t version_ = 1;
  uint64_t durable_version_ = 0;
  bool stopped_ = false;
  std::multimap<uint64_t, Waiter> waiting_;  // by the version each waits for
  std::function<void()> wanted_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_DURABLE_ACKS_H_
