// Aggregation: one run of an intrinsic over one population at this node — its lifecycle
// (OPEN -> SEALED -> FINALIZED, or FAILED / CANCELLED), exactly-once accounting per
// client id, batching of validated updates into the partial aggregate, and the partials
// merged from child aggregators. Thread-safe: stream reactors, the control plane, the
// tier link and the deadline ticker all call into it.
//
// Batching and reduction: committed updates go to its BatchReducer (batch_reducer.h),
// which reduces full batches on the node's reduction workers, never on the committing
// thread; what is counted is always pending, queued or in the partial aggregate.
//
// Children: a child aggregator claims client ids here before it counts their updates
// (ClaimForChild); each claim is a lease the child holds until a partial it pushes covers
// the update (MergeChildPartial names the ids it carries). A child whose Join stream has
// been gone for the child grace period (or that came back as a new incarnation of the same
// node) is lost: its leases are released, so those clients may send their updates again
// elsewhere, and it may push nothing more here.
//
// Durability (a root with --checkpoint_dir): every change bumps a version; the
// Checkpointer takes a consistent snapshot (TakeSnapshot), writes it and reports it with
// MarkDurable, which releases the DURABLE acks waiting for it (WhenDurable). Restore
// rebuilds an aggregation from its checkpoint after a restart. A mirror whose parent
// chain writes checkpoints (SetUpstreamDurable) gives DURABLE acks the same way: each
// delta carries the version it holds, and the parent link reports it with MarkDurable
// once the parent says a checkpoint holds the delta.
//
// Secure aggregation: a client's masked update is admitted only when its cohort expects
// it (SecureCohorts::BeginInput), and its end is reported back (EndInput) outside mu_. A
// mirror pushes nothing before its final push, which waits for its cohorts and carries
// their records; the root finalizes once its own cohorts are complete, and unmasks the
// merged sum (UnmaskSecureSum) before it reports it.
//
// Finalization (reducing what waits, then the result or the failure) can take long: a
// large partial is read back from the device. With a finalizer pool in the options it
// runs there, never on the RPC thread whose call sealed or completed the aggregation; the
// answer to that call (the Seal response, the completing update's ack) still goes out
// after it, so that client sees the outcome (when no child aggregator is waited for).
#ifndef FEDAGG_SERVICE_ROUNDS_AGGREGATION_H_
#define FEDAGG_SERVICE_ROUNDS_AGGREGATION_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "service/core/mutex.h"
#include "absl/time/time.h"
#include "fedagg/v1/types.pb.h"
#include "service/core/accumulator_factory.h"
#include "service/core/partial_aggregate.h"
#include "service/core/update_buffer.h"
#include "service/rounds/batch_reducer.h"
#include "service/rounds/checkpoint_file.h"
#include "service/rounds/child_aggregators.h"
#include "service/rounds/client_claims.h"
#include "service/rounds/client_id_set.h"
#include "service/rounds/durable_acks.h"
#include "service/rounds/finalization.h"
#include "service/rounds/mirror_upstream.h"
#include "service/rounds/secure_cohorts.h"
#include "service/rounds/spec_conversion.h"

namespace fedagg {

struct AggregationOptions {
  // How updates are batched and reduced: batch size and bytes, the reduction workers, the
  // metrics callback and the memory budget the partial aggregate is accounted in.
  BatchReducerOptions batching;
  // A batch that has not filled up is reduced anyway once its oldest update waited this long.
  absl::Duration flush_interval = absl::Milliseconds(100);
  // After a seal, how long to wait for child aggregators' final partials.
  absl::Duration child_grace = absl::Seconds(10);
  // An intermediate aggregator's mirror: it never finalizes itself; its partial goes
  // up to the parent (TakeDelta) and the parent decides the outcome.
  bool forwarding = false;
  // Finished (FINALIZED, FAILED, CANCELLED) aggregations kept for their status and result;
  // older ones are forgotten, in the order they finished, so memory does not grow with the
  // number of rounds: beyond the newest `retain_finished`, and, oldest result first, while
  // the results of those kept take more than `retain_finished_bytes` together (0: no such
  // bound; never the newest result, whatever its size). Never one that finished less than
  // `finished_grace` ago, whatever the bounds: its client reads its status and result
  // right after the round.
  int retain_finished = 1000;
  uint64_t retain_finished_bytes = uint64_t{1} << 30;
  absl::Duration finished_grace = absl::Seconds(10);
  // The reduction backend; must outlive the aggregation. Null: the CPU backend.
  const AccumulatorFactory* backend = nullptr;
  // A Checkpointer writes this aggregation to disk, so clients may ask for DURABLE acks.
  bool checkpointed = false;
  // Forwarding mirrors: where client ids are claimed before an update is counted, so that
  // each client is counted once in the whole tree (the parent link). Must outlive the
  // aggregation; null: this node decides alone (a root, or tests).
  ClientClaims* claims = nullptr;
  // Where a sealed aggregation is finalized: a pool with workers (the node's reduction
  // workers), so that no RPC thread waits for it. Null: on the thread that sealed or
  // completed the aggregation (tests; programs that embed one). With a pool, the
  // aggregation must be owned by a std::shared_ptr (a queued finalization holds one).
  ThreadPool* finalizer = nullptr;
};

// FINALIZED, FAILED and CANCELLED: an aggregation in one of these states never changes it.
inline bool IsFinished(v1::AggregationState state) {
  return state == v1::FINALIZED || state == v1::FAILED || state == v1::CANCELLED;
}

// The backend of `options`: the CPU backend when none is given.
const AccumulatorFactory& BackendOf(const AggregationOptions& options);

class Aggregation : public std::enable_shared_from_this<Aggregation> {
 public:
  // Sent to a child aggregator over its Tier.Join stream (child_aggregators.h).
  using ChildCommand = ::fedagg::ChildCommand;
  using ChildNotifier = ::fedagg::ChildNotifier;

  Aggregation(AggregationConfig config, AggregationOptions options);
  ~Aggregation();  // DURABLE acks still waiting get false

  // Rebuilds an aggregation from its checkpoint after a restart: state, counted client
  // ids, children's progress and the partial aggregate (a FINALIZED one reports its
  // result again). A SEALED one gives its children a fresh child grace period from now.
  // DATA_LOSS when the checkpoint is inconsistent with its spec.
  static absl::StatusOr<std::shared_ptr<Aggregation>> Restore(const AggregationCheckpoint& checkpoint,
                                                              AggregationOptions options);

  const std::string& id() const { return config_.id; }
  const AggregationConfig& config() const { return config_; }
  const ReductionSpec& reduction() const { return *config_.reduction; }
  // Whether this node writes checkpoints of the aggregation (a root with --checkpoint_dir).
  bool checkpointed() const { return options_.checkpointed; }
  // Whether it can ack DURABLE: it writes checkpoints, or it is a mirror whose parent
  // reported that a checkpoint above holds, in time, what it merges.
  bool durable_acks() const;
  // Mirrors: what the parent reported on joining (TierCommand.parent_durable_acks).
  void SetUpstreamDurable(bool durable);

  // Starts an update from `client_id`: FAILED_PRECONDITION when not open, UNAVAILABLE on a
  // mirror not (or no longer) joined at its parent, ALREADY_EXISTS when this client's
  // update is in this node's partial (on a mirror with claims the parent decides that:
  // only the root knows whether the update reached it), ABORTED when another of its
  // updates is in flight or a child aggregator holds its claim without having delivered
  // it, RESOURCE_EXHAUSTED when max_contributions is taken (counted, in flight or claimed
  // by children).
  absl::Status BeginUpdate(const std::string& client_id);
  // Drops an update begun but not committed (stream cut, bad chunk): nothing is counted.
  void AbandonUpdate(const std::string& client_id);
  // An update that passed Validate: the only kind CommitUpdate counts.
  class ValidatedUpdate {
   private:
    friend class Aggregation;
    explicit ValidatedUpdate(UpdateBuffer buffer) : buffer_(std::move(buffer)) {}
    UpdateBuffer buffer_;
  };
  // Checks the assembled update completely against the spec (types, bounds, finiteness).
  absl::StatusOr<ValidatedUpdate> Validate(UpdateBuffer update) const;
  // Counts a validated update begun by BeginUpdate (returns the contributions after it).
  // On a forwarding mirror, only after its claim was granted (ClaimAndCommit). An update
  // that reaches max_contributions seals the aggregation and starts its finalization,
  // which is over when this returns only without a finalizer (ClaimAndCommit waits for it).
  absl::StatusOr<int64_t> CommitUpdate(const std::string& client_id, ValidatedUpdate update);
  // Validate, then CommitUpdate: for a node that decides alone. On error the update is
  // not counted and the client may send a corrected update.
  absl::StatusOr<int64_t> CommitUpdate(const std::string& client_id, UpdateBuffer update);
  // Counts a validated update the way the tree requires: a forwarding mirror with claims
  // first claims the client id at its parent (the root decides) and commits once granted;
  // otherwise it commits at once. `done` runs inline, on the claims' thread, or — when
  // the update completed the aggregation — on the finalizer once the result is made; a
  // refused claim abandons the update with the parent's status.
  void ClaimAndCommit(const std::string& client_id, ValidatedUpdate update,
                      std::function<void(absl::StatusOr<int64_t>)> done);

  // A child aggregator claims `client_id` before counting its update: the same checks as
  // BeginUpdate (ALREADY_EXISTS when this node's partial holds it, ABORTED when in
  // flight or held by a child, ...), then — on a forwarding mirror — the claim at this
  // node's own parent. Granted, the client counts as contributed here and the child holds
  // the lease until its partial covers the update. FAILED_PRECONDITION for a child this
  // node gave up as lost. `done` runs inline or on the claims' thread.
  void ClaimForChild(const std::string& child_id, const std::string& client_id,
                     std::function<void(absl::Status)> done);
  // The child gives back a claim it was granted but did not use (its update was refused
  // or cut off): the client id is free again, here and up the tree. Ignored unless
  // `child_id` holds the claim.
  void ReleaseChildClaim(const std::string& child_id, const std::string& client_id);

  // Decodes a child's partial aggregate for this aggregation's spec and backend, reading
  // all of `in` (as its chunks arrive, for a push being received). Errors name the child.
  absl::StatusOr<PartialAggregate> DecodeChildPartial(const std::string& child_id, ByteReader& in) const;
  // Merges a child's decoded partial aggregate since its previous push, and frees it;
  // returns the contributions counted here. `covered_client_ids`: the clients whose
  // updates the partial carries; the child's leases on them end. A repeated (child,
  // sequence) is acknowledged without merging again. FAILED_PRECONDITION for a child this
  // node gave up as lost (its leases were released: merging would count them twice). A
  // merge that completes a sealed aggregation finalizes it on the calling thread (the
  // push's own decoder thread, which answers the child after).
  absl::StatusOr<int64_t> MergeChildPartial(const std::string& child_id, uint64_t sequence,
                                            bool final, PartialAggregate child,
                                            const std::vector<std::string>& covered_client_ids = {});
  // What a joining child learns: the last sequence merged from it (lower than what it
  // pushed when this node restarted from a checkpoint), and whether the aggregation is
  // already sealed (the caller then sends SEAL at once); `join` numbers this join of the
  // child, for ChildLeft. A child joining releases the leases of an earlier incarnation of
  // the same node whose stream is gone (docs/PROTOCOL.md 6.2 names incarnations).
  // FAILED_PRECONDITION for a child this node gave up as lost.
  using ChildRegistration = ChildAggregators::Registration;
  absl::StatusOr<ChildRegistration> ChildJoined(const std::string& child_id, ChildNotifier notifier);
  // The Join stream of registration `join` ended. Ignored when the child has joined again
  // since: a child that rejoined (its old stream ending late, as after a network outage)
  // is still waited for and still gets SEAL.
  void ChildLeft(const std::string& child_id, uint64_t join);

  // Seals an OPEN aggregation (OK for a SEALED one) and starts its finalization. When
  // the seal is OK, `settled` (if given) runs once that finalization attempt is over — the
  // aggregation is then FINALIZED or FAILED, or still SEALED waiting for children — on
  // the finalizer, or before Seal returns without one.
  absl::Status Seal(std::function<void()> settled = nullptr);
  absl::Status Cancel(const std::string& reason);
  // Reduces a pending batch older than the flush interval, seals at the deadline, releases
  // the leases of children whose Join stream has been gone for the child grace period, and
  // starts the finalization of a sealed aggregation whose children are done or whose child
  // grace period ran out. Called by the registry's ticker.
  void Tick(absl::Time now);
  // Queues the pending batch for reduction now, whatever its size and age: the node's
  // ingest window is full and new updates wait for the bytes the batch holds.
  void FlushPending();

  // Forwarding mirrors: reduces what is pending and hands out everything accumulated
  // since the last call, serialized, with its contribution count. After the final delta
  // the mirror merges no more child partials (they would never go up).
  struct Delta {
    std::string bytes;
    int64_t contributions = 0;
    // The clients whose updates `bytes` carries: counted here, or covered by a child's
    // merged partial. The parent ends this node's leases on them when it merges the delta.
    std::vector<std::string> covered_client_ids;
    // What a checkpoint above holds once it holds this delta (MarkDurable).
    struct DurableMark {
      uint64_t version = 0;  // everything counted or merged up to this version
      std::vector<std::pair<std::string, uint64_t>> child_sequences;  // last merged, per child
    } durable_mark;
  };
  // Fails only when the backend cannot reduce or serialize its state (then no client id
  // was taken). Counting goes on while the delta is reduced and serialized. `precision`:
  // what the parent asked the partial in (narrowed_partial.h).
  absl::StatusOr<Delta> TakeDelta(bool final, PartialPrecision precision = PartialPrecision::kFull);
  // Forwarding mirrors: waits (at most until `deadline`) until every joined child of
  // this node has sent its final partial or left; true when they all did.
  bool AwaitChildren(absl::Time deadline);
  // Forwarding mirrors: the outcome of the final push — FINALIZED when it was delivered,
  // FAILED with the reason when it was not.
  void MarkForwarded(const absl::Status& delivered);
  // Forwarding mirrors: FAILED with no final push, because what this node counted can no
  // longer reach the root; `why` is the detail its clients' refusals repeat.
  void FailMirror(std::string why);
  // Forwarding mirrors: whether the parent has registered this node as a child. Updates
  // are accepted only while joined, so the parent always waits for what this node acked.
  // `why_not`: how the last Join attempt or stream ended (told to refused clients).
  // Joining releases the WhenJoined waiters.
  void SetJoinedUpstream(bool joined, const absl::Status& why_not = absl::OkStatus());
  // Runs `ready()` once this node may take updates for the aggregation: at once unless
  // this is an OPEN mirror not yet joined at its parent; otherwise when it joins, when it
  // leaves OPEN, or at the first tick after `deadline` (BeginUpdate then refuses the update
  // with UNAVAILABLE as before). So a client that names an aggregation its intermediate
  // has just learnt waits for the join instead of being refused and retrying. Runs outside
  // this aggregation's locks; must not block.
  void WhenJoined(absl::Time deadline, std::function<void()> ready);

  // A consistent copy of everything counted so far (pending updates reduced first), for
  // the Checkpointer; nullopt when nothing changed since the last MarkDurable. Fails
  // (nothing to write) when the backend could not serialize the partial, or could not
  // reduce a batch: then the partial no longer holds everything counted, no checkpoint
  // ever will, and the acks waiting for one are released as not durable.
  struct Snapshot {
    AggregationCheckpoint checkpoint;
    uint64_t version = 0;
  };
  absl::StatusOr<std::optional<Snapshot>> TakeSnapshot();
  // The checkpoint of `snapshot` is on disk: the acks waiting for it are released.
  void MarkDurable(const Snapshot& snapshot);
  // Mirrors: a checkpoint above holds the delta of `mark` (the parent said so).
  void MarkDurable(const Delta::DurableMark& mark);
  // Whether DURABLE acks (or a child's push) wait for a checkpoint that holds them: a
  // mirror then pushes a delta that asks its parent to answer once one does.
  bool AwaitsDurability() const;
  // Mirrors: `wanted` runs (outside the locks, must not block) each time something starts
  // waiting for durability, so the parent link pushes without waiting for its next
  // interval. Null: none.
  void OnDurabilityWanted(std::function<void()> wanted);
  // Runs `done(true)` once a checkpoint on disk holds everything counted so far (inline
  // when one already does), or `done(false)` when none will: not checkpointed, or
  // checkpoints stopped. Runs outside this aggregation's locks; must not block.
  void WhenDurable(std::function<void(bool)> done);
  // Checkpoints stopped (shutdown): waiting and later WhenDurable calls get false.
  void StopDurability();
  // The last sequence from `child_id` that the last checkpoint on disk holds.
  uint64_t DurableChildSequence(const std::string& child_id) const;

  // Queue depth, for metrics: updates counted and waiting to be reduced (pending or
  // queued; a batch being reduced no longer waits), and updates begun (header accepted)
  // whose commit or abandonment has not happened yet.
  int64_t pending_updates() const;
  int64_t updates_in_flight() const;
  // Memory of the counted client ids (exactly-once's set), for metrics; 0 once freed.
  int64_t counted_client_id_bytes() const;

  // A secure aggregation's cohorts at this node (the Cohorts service relays through them;
  // BeginUpdate admits only a masked update they expect); null for any other.
  SecureCohorts* secure_cohorts() const { return secure_.get(); }
  // Forwarding mirrors of a secure aggregation: waits (at most three stage timeouts) until
  // its cohorts are complete, so that the final push carries their records.
  bool AwaitSecureCohorts();

  // Whether an update from `client_id` was counted here; false once a finished aggregation
  // has freed its counted ids (ReleaseFinishedAccumulators).
  bool HasCounted(const std::string& client_id) const;
  // Whether any client was counted here (its update, or a child's claim of it).
  bool CountedAnyClient() const;
  v1::AggregationStatus Status() const;
  v1::AggregationState state() const;
  // Whether its accumulators are still held: false once a finished aggregation has freed
  // them (ReleaseFinishedAccumulators).
  bool holds_accumulators() const;
  // The result of a FINALIZED aggregation; FAILED_PRECONDITION otherwise.
  absl::StatusOr<std::shared_ptr<const AggregateResult>> Result() const;
  // When a finished aggregation finished (one restored finished from a checkpoint: when
  // its last checkpoint was written, so that restored rounds keep their order) and the
  // bytes its result holds (AggregateResult::MemoryBytes; 0 without one). InfinitePast
  // and 0 while it runs.
  struct Finish {
    absl::Time at = absl::InfinitePast();
    uint64_t result_bytes = 0;
  };
  Finish finish() const;

  // `watcher` runs (outside any lock) after every state change until removed.
  int AddWatcher(std::function<void()> watcher);
  void RemoveWatcher(int handle);

 private:
  // BeginUpdate's checks and reservation, for an update of this node's `own` client or
  // for a child's claim (a secure aggregation's cohorts admit only their own clients).
  absl::Status Reserve(const std::string& client_id, bool own);
  // The claim at the parent (forwarding mirrors with claims), then `commit`; a granted
  // claim whose commit fails is released again. Without claims, `commit` runs at once.
  void ClaimUpstream(const std::string& client_id, std::function<absl::Status()> commit,
                     std::function<void(absl::Status)> done);
  // Ends the reservation of `client_id` (BeginUpdate) by counting it, if still OPEN (and
  // not counted meanwhile).
  absl::Status CountClientLocked(const std::string& client_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why an update of a counted `client_id` is refused here; OK on a mirror with claims,
  // whose parent decides (the update may not have reached the root yet).
  absl::Status CountedRefusalLocked(const std::string& client_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Children given up as lost: the ids whose leases they held are no longer counted here
  // (and are to be released at the parent too: ReleaseUpstream).
  void ForgetGivenUpLocked(const ChildAggregators::GivenUp& given_up) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives back at the parent (forwarding mirrors with claims) ids released here.
  void ReleaseUpstream(const std::vector<std::string>& client_ids);
  // A granted child claim becomes a counted client id.
  absl::Status CommitChildClaim(const std::string& child_id, const std::string& client_id);
  // `error` from the backend, with this aggregation's id and the backend's name.
  absl::Status BackendError(absl::string_view what, const absl::Status& error) const;
  // TakeSnapshot under the locks; the acks that will never be durable go to `abandoned`.
  absl::StatusOr<std::optional<Snapshot>> TakeSnapshotOrAbandon(DurableAcks::Waiters* abandoned);
  // Releases the DURABLE waiters up to `version` and records the children's durable
  // sequences.
  void MarkDurableUpTo(uint64_t version, const std::vector<std::pair<std::string, uint64_t>>& child_sequences);
  // CommitUpdate's counting, without the finalization: `completed` says whether this
  // update sealed the aggregation (max_contributions), which the caller then finalizes.
  absl::StatusOr<int64_t> CountUpdate(const std::string& client_id, ValidatedUpdate validated, bool* completed);
  // CountUpdate's part under mu_ once the client is counted: the update added to the
  // batches; returns the contributions after it, sealing at max_contributions.
  int64_t AddCountedLocked(const std::string& client_id, UpdateBuffer update, std::vector<ChildNotifier>* to_notify,
                           bool* sealed_now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finalizes a sealed aggregation once its children are done or their grace ran out, on
  // this thread.
  void MaybeFinalize();
  // A finalization attempt (MaybeFinalize) that starts from now on, on the finalizer
  // (inline without one); `then` (if any) runs once it is over.
  void FinalizeSoon(std::function<void()> then);
  // Whether MaybeFinalize would finalize now.
  bool FinalizeDueLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees the accumulators (and their memory budget's claim) and the counted client ids of
  // a finished aggregation once nothing can need them: its result is made and, where it
  // is checkpointed, a checkpoint of its finished state is written (a restart reports from
  // that one; an update for it is refused as not OPEN whoever sends it). Takes the
  // batches' hold, so it may wait for a reduction: call without mu_, on the finalizer
  // (ReleaseFinishedAccumulatorsSoon from any other thread: an RPC's must not wait).
  void ReleaseFinishedAccumulators();
  void ReleaseFinishedAccumulatorsSoon();
  void ReleaseFinishedStateLocked(BatchReducer::Hold& hold) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The outcome of a finalization becomes the aggregation's state, detail and result.
  void PublishLocked(Finalization::Outcome outcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checkpoints stopped or failed while a noised result waited for one: FAILED instead.
  void FailUnpublishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets finish_ once state_ is finished (and result_ set, if any): finished `at`.
  void RecordFinishLocked(absl::Time at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // MarkForwarded and FailMirror: a forwarding mirror ends in `state` with `detail`.
  void FinishMirror(v1::AggregationState state, std::string detail);
  // Frees the held partial's accumulators, gives their memory back and records it.
  void ReleaseAccumulatorsLocked(BatchReducer::Hold& hold) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AccumulatorsUnneededLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SealLocked(std::vector<ChildNotifier>* to_notify) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NotifyWatchers();

  const AggregationConfig config_;
  const AggregationOptions options_;

  mutable Mutex mu_;
  v1::AggregationState state_ ABSL_GUARDED_BY(mu_) = v1::OPEN;
  std::string detail_ ABSL_GUARDED_BY(mu_);
  // Client ids whose update is in the partial (or pending), or whose claim a child holds;
  // freed once finished (counted_any_ then says whether it held any).
  ClientIdSet counted_ ABSL_GUARDED_BY(mu_);
  bool counted_any_ ABSL_GUARDED_BY(mu_) = false;
  std::set<std::string> in_flight_ ABSL_GUARDED_BY(mu_);
  // The child aggregators, and the ids of counted_ they claimed and have not delivered yet.
  ChildAggregators children_ ABSL_GUARDED_BY(mu_);
  int64_t contributions_ ABSL_GUARDED_BY(mu_) = 0;
  // Forwarding mirrors: the join at the parent, its waiters, the clients whose updates
  // the next delta carries.
  MirrorUpstream upstream_ ABSL_GUARDED_BY(mu_);
  double weight_sum_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time sealed_at_ ABSL_GUARDED_BY(mu_);
  // Durability: every change a checkpoint must hold bumps its version.
  DurableAcks durable_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const AggregateResult> result_ ABSL_GUARDED_BY(mu_);
  Finish finish_ ABSL_GUARDED_BY(mu_);  // set with a finished state_
  bool accumulators_released_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int, std::function<void()>> watchers_ ABSL_GUARDED_BY(mu_);
  int next_watcher_ ABSL_GUARDED_BY(mu_) = 0;
  // What the end makes of what was counted, and its attempts on the finalizer.
  Finalization finalization_;
  // A checkpointed aggregation's noised result (differential privacy), made and waiting
  // for the checkpoint of version unpublished_version_ to hold it before it is published.
  std::optional<Finalization::Outcome> unpublished_ ABSL_GUARDED_BY(mu_);
  uint64_t unpublished_version_ ABSL_GUARDED_BY(mu_) = 0;

  // A secure aggregation's cohorts at this node (lock order: mu_ before theirs).
  const std::unique_ptr<SecureCohorts> secure_;

  // The pending batch, the queue and the partial aggregate. Lock order: a
  // BatchReducer::Hold before mu_ (mu_ before the reducer's queue).
  const std::shared_ptr<BatchReducer> batches_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_AGGREGATION_H_
