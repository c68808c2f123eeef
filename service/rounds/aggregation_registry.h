// AggregationRegistry: the aggregations this node knows, by id. Creates them from
// specs (validated), finds them for the RPC layer, and runs the ticker that seals
// aggregations at their deadline and finalizes sealed ones. An intermediate aggregator
// installs an UpstreamSource so that unknown ids are fetched from its parent; a root with
// --checkpoint_dir installs an AggregationStore (the Checkpointer).
#ifndef FEDAGG_SERVICE_ROUNDS_AGGREGATION_REGISTRY_H_
#define FEDAGG_SERVICE_ROUNDS_AGGREGATION_REGISTRY_H_

#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "service/core/mutex.h"
#include "service/rounds/aggregation.h"
#include "service/rounds/client_claims.h"

namespace fedagg {

// Where an intermediate aggregator learns specs, and claims client ids: its parent.
class UpstreamSource : public ClientClaims {
 public:
  // Asks the parent for a spec without blocking; `done` runs on another thread.
  virtual void FetchSpec(const std::string& id,
                         std::function<void(absl::StatusOr<v1::AggregationSpec>)> done) = 0;
  // Called once per mirror created, to join the parent and forward partials.
  virtual void MirrorCreated(std::shared_ptr<Aggregation> mirror) = 0;
};

// Where a root that writes checkpoints keeps its aggregations on disk.
class AggregationStore {
 public:
  virtual ~AggregationStore() = default;
  // Writes the first checkpoint of a new aggregation, before anyone can see it; an error
  // makes the creation fail. Called without the registry's lock.
  virtual absl::Status Created(Aggregation& aggregation) = 0;
  // The registry forgot a finished aggregation: its checkpoint goes too. Called under the
  // registry's lock (so the id cannot be created again meanwhile): must be quick.
  virtual void Forgotten(const std::string& id) = 0;
};

class AggregationRegistry {
 public:
  explicit AggregationRegistry(AggregationOptions options);
  ~AggregationRegistry();  // stops the ticker

  // Only before serving: makes this node an intermediate aggregator.
  void SetUpstream(UpstreamSource* upstream) { upstream_ = upstream; }
  bool is_intermediate() const { return upstream_ != nullptr; }
  // Only before serving: persists created aggregations.
  void SetStore(AggregationStore* store) { store_ = store; }
  const AggregationOptions& options() const { return options_; }

  // ALREADY_EXISTS for a known id; INVALID_ARGUMENT for a bad spec; FAILED_PRECONDITION
  // on an intermediate aggregator (create aggregations at the root).
  absl::StatusOr<std::shared_ptr<Aggregation>> Create(const v1::AggregationSpec& spec);
  using Created = std::function<void(absl::StatusOr<std::shared_ptr<Aggregation>>)>;
  // Create, run on the node's workers (options().finalizer) when it has some, `done`
  // called there: making an aggregation allocates and zeroes its accumulator and, with a
  // store, writes its first checkpoint (with fsync), neither of which may wait on an RPC
  // thread. Inline without workers. The registry's destructor waits for creations queued.
  void CreateAsync(v1::AggregationSpec spec, Created done);
  // Adds an aggregation restored from a checkpoint (before serving); ALREADY_EXISTS for a
  // known id.
  absl::Status Adopt(std::shared_ptr<Aggregation> aggregation);
  using Lookup = std::function<void(absl::StatusOr<std::shared_ptr<Aggregation>>)>;
  // Finds `id`; on an intermediate aggregator an unknown id is learned from the parent
  // first, and a mirror not yet joined at the parent is answered once it joins (at most
  // kJoinWait, 1 s). `done` runs inline when the id is known and ready, later on another
  // thread otherwise; never blocks. NOT_FOUND for an id nobody knows.
  void GetAsync(const std::string& id, Lookup done);
  // NOT_FOUND for an id this node does not hold (never asks the parent).
  absl::StatusOr<std::shared_ptr<Aggregation>> Find(const std::string& id) const;
  std::vector<std::shared_ptr<Aggregation>> List() const;
  // Up to `max` OPEN aggregations, oldest first, leaving out those `client_id` already
  // contributed to (the task path and Welcome hand these out).
  std::vector<std::shared_ptr<Aggregation>> OpenAggregations(int max, const std::string& client_id);
  // What the ticker runs every 20 ms, as of `now`: forgets the finished aggregations that
  // finished first beyond the newest options().retain_finished, then those with a result,
  // oldest result first, while the results left take more than retain_finished_bytes
  // (never the newest result); never one that finished less than finished_grace before
  // `now`. False when it forgot none.
  bool ForgetFinished(absl::Time now);
  // Intermediate aggregators: the local mirror of a parent's aggregation, created (and
  // announced to the UpstreamSource) on first use. A mirror of an earlier incarnation of
  // the id (the root restarted without checkpoints and created the id again) is failed,
  // if still running, and replaced.
  absl::StatusOr<std::shared_ptr<Aggregation>> GetOrMirror(const v1::AggregationSpec& spec);

 private:
  // A new aggregation, or RESOURCE_EXHAUSTED when its accumulators (FixedStateBytes) do
  // not fit this node: more than its memory budget has free, more than its memory, or an
  // allocation that failed. Nothing is held then, and nothing else on the node is lost.
  static absl::StatusOr<std::shared_ptr<Aggregation>> MakeAggregation(AggregationConfig config,
                                                                      const AggregationOptions& options);
  // Runs `work` on the node's workers (options_.finalizer), counted in pending_creations_
  // so that the destructor waits for it; inline without workers.
  void RunOnWorkers(std::function<void()> work);
  void TickerLoop();
  // Answers `done` with `mirror` once it may take updates (Aggregation::WhenJoined), or
  // after kJoinWait.
  void AnswerOnceJoined(std::shared_ptr<Aggregation> mirror, Lookup done);
  // MakeAggregation; when the node cannot hold the new aggregation, its oldest finished
  // aggregations are forgotten, one at a time, until it can (or none is left).
  absl::StatusOr<std::shared_ptr<Aggregation>> MakeAggregationMakingRoom(const AggregationConfig& config,
                                                                         const AggregationOptions& options);
  // Forgets the finished aggregation that finished first of those that still hold their
  // accumulators (finished state not checkpointed yet); false when none does.
  bool ForgetOldestFinishedHoldingAccumulators();
  // Removes `ids` (finished ones) from the registry and its store; they are destroyed
  // with `forgotten`, after the lock is released.
  void ForgetLocked(const std::set<std::string>& ids, std::vector<std::shared_ptr<Aggregation>>* forgotten)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The finished aggregations, when each finished, in the order they finished (creation
  // order among equals).
  std::vector<std::pair<Aggregation::Finish, std::string>> FinishedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AggregationOptions options_;
  UpstreamSource* upstream_ = nullptr;
  AggregationStore* store_ = nullptr;
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Aggregation>> by_id_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> creation_order_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> creating_ ABSL_GUARDED_BY(mu_);  // ids whose creation is being stored
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int pending_creations_ ABSL_GUARDED_BY(mu_) = 0;  // RunOnWorkers calls queued or running
  std::thread ticker_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_AGGREGATION_REGISTRY_H_
