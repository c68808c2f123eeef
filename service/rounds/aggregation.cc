// Aggregation: lifecycle, exactly-once accounting, child partials and durability; its
// updates are batched and reduced by its BatchReducer.
#include "service/rounds/aggregation.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_accumulator_factory.h"
#include "service/core/field_report.h"
#include "service/core/large_allocation.h"
#include "service/core/status_macros.h"
#include "service/core/update_validator.h"

namespace fedagg {
namespace {
const AccumulatorFactory& BackendOf(const AggregationOptions& options) {
  return options.backend != nullptr ? *options.backend : CpuAccumulatorFactory::Default();
}
}  // namespace

Aggregation::Aggregation(AggregationConfig config, AggregationOptions options)
    : config_(std::move(config)),
      options_(options),
      children_(config_.id),
      durable_(options_.checkpointed),
      batches_(BatchReducer::Create(config_.reduction, BackendOf(options_), options_.batching)) {}

Aggregation::~Aggregation() { StopDurability(); }

absl::StatusOr<std::shared_ptr<Aggregation>> Aggregation::Restore(
    const AggregationCheckpoint& checkpoint, AggregationOptions options) {
  FEDAGG_ASSIGN_OR_RETURN(AggregationConfig config, ConfigFromProto(checkpoint.spec));
  absl::StatusOr<PartialAggregate> partial =
      PartialAggregate::Deserialize(config.reduction, checkpoint.partial, BackendOf(options));
  if (!partial.ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint of aggregation '", config.id,
                                            "': its partial aggregate: ", partial.status().message()));
  }
  if (partial->contributions() != checkpoint.contributions) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint of aggregation '", config.id, "' counts ", checkpoint.contributions,
        " contributions but its partial aggregate holds ", partial->contributions()));
  }
  auto aggregation = std::make_shared<Aggregation>(std::move(config), options);
  BatchReducer::Hold hold(*aggregation->batches_);
  MutexLock lock(&aggregation->mu_);
  hold.ReplacePartial(*std::move(partial));  // accounts it: a restored sparse union may be larger than an empty one
  aggregation->state_ = checkpoint.state;
  aggregation->detail_ = checkpoint.detail;
  aggregation->counted_ = ClientIdSet(checkpoint.counted);
  aggregation->contributions_ = checkpoint.contributions;
  aggregation->weight_sum_ = checkpoint.weight_sum;
  const absl::Time now = absl::Now();
  for (const AggregationCheckpoint::ChildProgress& progress : checkpoint.children) {
    aggregation->children_.Restore(progress, now);
  }
  aggregation->sealed_at_ = now;
  if (checkpoint.state == v1::FINALIZED) {
    absl::StatusOr<AggregateResult> report = hold.partial().Report();
    if (!report.ok()) {
      return absl::DataLossError(absl::StrCat("checkpoint of FINALIZED aggregation '", aggregation->id(),
                                              "' does not report a result: ", report.status().message()));
    }
    aggregation->result_ = std::make_shared<const AggregateResult>(*std::move(report));
    aggregation->weight_sum_ = aggregation->result_->weight_sum;
  }
  if (IsFinished(checkpoint.state)) {
    // When it finished, as near as the files tell (they are read in name order): when its
    // last checkpoint was written; now when that is unknown.
    const absl::Time written = std::min(checkpoint.written, now);
    aggregation->RecordFinishLocked(written == absl::InfinitePast() ? now : written);
  }
  aggregation->durable_.MarkAllDurable();
  if (aggregation->AccumulatorsUnneededLocked()) {  // finished: the checkpoint holds it
    aggregation->ReleaseFinishedStateLocked(hold);
  }
  return aggregation;
}

absl::Status Aggregation::BeginUpdate(const std::string& client_id) {
  MutexLock lock(&mu_);
  if (state_ != v1::OPEN) {
    return absl::FailedPreconditionError(absl::StrCat(
        "aggregation '", id(), "' is ", v1::AggregationState_Name(state_),
        detail_.empty() ? "" : absl::StrCat(" (", detail_, ")"),
        " and accepts no more updates; ask GetTask for an open one"));
  }
  if (options_.forwarding && !joined_upstream_) {
    if (upstream_error_.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "this intermediate aggregator is not joined to aggregation '", id(),
          "' at its parent yet (joining, or the parent is unreachable); retry shortly"));
    }
    return absl::UnavailableError(absl::StrCat(
        "this intermediate aggregator is not joined to aggregation '", id(),
        "' at its parent: the link to the parent aggregator ended with ", upstream_error_.ToString(),
        " and it is rejoining; retry shortly, or send the update to another aggregator"));
  }
  if (counted_.contains(client_id)) FEDAGG_RETURN_IF_ERROR(CountedRefusalLocked(client_id));
  if (in_flight_.contains(client_id)) {
    return absl::AbortedError(absl::StrCat("another update from client '", client_id,
                                           "' to aggregation '", id(),
                                           "' is in flight; wait for its ack"));
  }
  if (config_.max_contributions > 0 &&
      contributions_ + static_cast<int64_t>(in_flight_.size() + children_.claims()) >= config_.max_contributions) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "aggregation '", id(), "' has all ", config_.max_contributions,
        " contributions it accepts (counted, in flight, or acknowledged by child aggregators)"));
  }
  in_flight_.insert(client_id);
  return absl::OkStatus();
}

absl::Status Aggregation::CountedRefusalLocked(const std::string& client_id) const {
  if (const std::string* holder = children_.HolderOf(client_id)) {
    return absl::AbortedError(absl::StrCat(
        "the update of client '", client_id, "' to aggregation '", id(),
        "' was acknowledged by another aggregator (child '", *holder,
        "' of this one), which has not delivered it yet; retry shortly: once delivered it is counted "
        "(a retry is then refused ALREADY_EXISTS), and if that aggregator is lost the update is accepted again"));
  }
  // A mirror with claims cannot tell whether an update it holds or delivered reached the
  // root (its parent may be lost before pushing it): the claim at the parent decides.
  if (options_.forwarding && options_.claims != nullptr) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat("client '", client_id, "' already contributed to aggregation '",
                                               id(), "'; its update is counted once"));
}

void Aggregation::AbandonUpdate(const std::string& client_id) {
  MutexLock lock(&mu_);
  in_flight_.erase(client_id);
}

absl::StatusOr<Aggregation::ValidatedUpdate> Aggregation::Validate(UpdateBuffer update) const {
  FEDAGG_RETURN_IF_ERROR(update.Validate(reduction()));
  return ValidatedUpdate(std::move(update));
}

absl::StatusOr<int64_t> Aggregation::CommitUpdate(const std::string& client_id, UpdateBuffer update) {
  absl::StatusOr<ValidatedUpdate> valid = Validate(std::move(update));
  if (!valid.ok()) {
    AbandonUpdate(client_id);
    return valid.status();
  }
  return CommitUpdate(client_id, *std::move(valid));
}

void Aggregation::ClaimAndCommit(const std::string& client_id, ValidatedUpdate update,
                                 std::function<void(absl::StatusOr<int64_t>)> done) {
  // What the commit leaves for the answer: one allocation per update, shared by the two steps.
  struct Commit {
    ValidatedUpdate update;
    int64_t contributions = 0;
    bool completed = false;
  };
  auto commit = std::make_shared<Commit>(Commit{std::move(update)});
  ClaimUpstream(
      client_id,
      [this, client_id, commit]() -> absl::Status {
        FEDAGG_ASSIGN_OR_RETURN(commit->contributions,
                                CountUpdate(client_id, std::move(commit->update), &commit->completed));
        return absl::OkStatus();
      },
      [this, done = std::move(done), commit](absl::Status committed) {
        if (!committed.ok()) {
          done(committed);
        } else if (commit->completed) {
          // The ack of the update that completed the aggregation follows its result.
          FinalizeSoon([done, commit] { done(commit->contributions); });
        } else {
          done(commit->contributions);
        }
      });
}

void Aggregation::ClaimForChild(const std::string& child_id, const std::string& client_id,
                                std::function<void(absl::Status)> done) {
  absl::Status begun;
  {
    MutexLock lock(&mu_);
    begun = children_.CheckNotGivenUp(child_id);
  }
  if (begun.ok()) begun = BeginUpdate(client_id);
  if (!begun.ok()) {
    done(begun);
    return;
  }
  ClaimUpstream(
      client_id, [this, child_id, client_id] { return CommitChildClaim(child_id, client_id); },
      std::move(done));
}

void Aggregation::ClaimUpstream(const std::string& client_id, std::function<absl::Status()> commit,
                                std::function<void(absl::Status)> done) {
  if (!options_.forwarding || options_.claims == nullptr) {
    done(commit());
    return;
  }
  // The aggregation outlives the claim: its owner (a stream's update, a child's claim
  // call) holds it until `done` has run.
  options_.claims->Claim(
      id(), config_.proto.incarnation(), client_id,
      [this, client_id, commit = std::move(commit), done = std::move(done)](absl::Status granted) {
        if (!granted.ok()) {
          AbandonUpdate(client_id);
          done(granted);
          return;
        }
        absl::Status committed = commit();
        if (!committed.ok()) options_.claims->Release(id(), config_.proto.incarnation(), client_id);
        done(committed);
      });
}

absl::Status Aggregation::CountClientLocked(const std::string& client_id) {
  in_flight_.erase(client_id);
  if (state_ != v1::OPEN) {
    return absl::FailedPreconditionError(absl::StrCat(
        "aggregation '", id(), "' became ", v1::AggregationState_Name(state_),
        " while the update was in flight; it was not counted"));
  }
  // Only on a mirror whose parent granted an id counted here: the parent's view wins
  // nothing, the update is not counted twice (the grant is given back).
  if (!counted_.insert(client_id)) {
    return absl::AlreadyExistsError(absl::StrCat("client '", client_id, "' already contributed to aggregation '",
                                                 id(), "' through this aggregator; its update is counted once"));
  }
  return absl::OkStatus();
}

absl::Status Aggregation::CommitChildClaim(const std::string& child_id, const std::string& client_id) {
  MutexLock lock(&mu_);
  if (absl::Status given_up = children_.CheckNotGivenUp(child_id); !given_up.ok()) {
    in_flight_.erase(client_id);
    return given_up;
  }
  FEDAGG_RETURN_IF_ERROR(CountClientLocked(client_id));
  children_.Grant(child_id, client_id);
  durable_.Changed();
  return absl::OkStatus();
}

void Aggregation::ReleaseChildClaim(const std::string& child_id, const std::string& client_id) {
  {
    MutexLock lock(&mu_);
    if (!children_.ReleaseClaim(child_id, client_id)) return;
    counted_.erase(client_id);
    durable_.Changed();
  }
  ReleaseUpstream({client_id});
}

void Aggregation::ReleaseUpstream(const std::vector<std::string>& client_ids) {
  if (!options_.forwarding || options_.claims == nullptr) return;
  for (const std::string& client_id : client_ids) {
    options_.claims->Release(id(), config_.proto.incarnation(), client_id);
  }
}

void Aggregation::ForgetGivenUpLocked(const ChildAggregators::GivenUp& given_up) {
  if (given_up.children == 0) return;
  for (const std::string& client_id : given_up.client_ids) counted_.erase(client_id);
  durable_.Changed();
}

absl::StatusOr<int64_t> Aggregation::CommitUpdate(const std::string& client_id, ValidatedUpdate validated) {
  bool completed = false;
  absl::StatusOr<int64_t> contributions = CountUpdate(client_id, std::move(validated), &completed);
  if (completed) FinalizeSoon(nullptr);
  return contributions;
}

absl::StatusOr<int64_t> Aggregation::CountUpdate(const std::string& client_id, ValidatedUpdate validated,
                                                 bool* completed) {
  UpdateBuffer update = std::move(validated.buffer_);
  int64_t contributions = 0;
  bool sealed_now = false;
  std::vector<ChildNotifier> to_notify;
  {
    MutexLock lock(&mu_);
    FEDAGG_RETURN_IF_ERROR(CountClientLocked(client_id));
    durable_.Changed();
    if (options_.forwarding) undelivered_.push_back(client_id);
    weight_sum_ += update.view().weight.value_or(1.0);
    batches_->Add(std::move(update));  // under mu_: what is counted is pending, queued or reduced
    contributions = ++contributions_;
    if (config_.max_contributions > 0 && contributions_ >= config_.max_contributions) {
      SealLocked(&to_notify);
      sealed_now = true;
    }
  }
  if (sealed_now) {
    for (const ChildNotifier& notify : to_notify) notify(ChildCommand::kSeal);
    NotifyWatchers();
  }
  *completed = sealed_now;
  return contributions;
}

void Aggregation::FlushPending() { batches_->QueuePending(); }

absl::StatusOr<PartialAggregate> Aggregation::DecodeChildPartial(const std::string& child_id,
                                                                 ByteReader& in) const {
  absl::StatusOr<PartialAggregate> child = PartialAggregate::Deserialize(config_.reduction, in, BackendOf(options_));
  if (!child.ok()) {
    return absl::Status(child.status().code(),
                        absl::StrCat("partial from child '", child_id, "': ", child.status().message()));
  }
  return child;
}

absl::StatusOr<int64_t> Aggregation::MergeChildPartial(const std::string& child_id,
                                                       uint64_t sequence, bool final,
                                                       PartialAggregate child,
                                                       const std::vector<std::string>& covered_client_ids) {
  int64_t contributions = 0;
  bool finalize = false;
  bool sealed_now = false;
  std::vector<ChildNotifier> to_notify;
  {
    // Freed once merged, before a finalization makes the result: the two are never held
    // at once.
    const PartialAggregate taken = std::move(child);
    BatchReducer::Hold hold(*batches_);
    MutexLock lock(&mu_);
    if ((state_ != v1::OPEN && state_ != v1::SEALED) || final_delta_taken_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "aggregation '", id(), "' is ", v1::AggregationState_Name(state_),
          final_delta_taken_ ? " and its final partial already went up" : "",
          "; the partial from child '", child_id, "' was not merged"));
    }
    FEDAGG_ASSIGN_OR_RETURN(const bool next, children_.CheckPush(child_id, sequence));
    if (!next) return contributions_;  // a retried push
    absl::Status merged = hold.partial().MergeWith(taken);
    if (!merged.ok()) return merged;
    hold.AccountMemory();
    durable_.Changed();
    std::vector<std::string> covered = children_.RecordPush(child_id, sequence, final, covered_client_ids);
    if (options_.forwarding) undelivered_.insert(undelivered_.end(), covered.begin(), covered.end());
    contributions_ += taken.contributions();
    weight_sum_ += taken.weight_sum();
    contributions = contributions_;
    // max_contributions holds across the tree: the claims of children count against it,
    // and their delivered updates may complete it.
    if (state_ == v1::OPEN && !options_.forwarding && config_.max_contributions > 0 &&
        contributions_ >= config_.max_contributions) {
      SealLocked(&to_notify);
      sealed_now = true;
    }
    finalize = state_ == v1::SEALED;
  }
  for (const ChildNotifier& notify : to_notify) notify(ChildCommand::kSeal);
  if (sealed_now) NotifyWatchers();
  if (finalize) MaybeFinalize();
  return contributions;
}

absl::StatusOr<Aggregation::ChildRegistration> Aggregation::ChildJoined(const std::string& child_id,
                                                                        ChildNotifier notifier) {
  ChildAggregators::GivenUp given_up;
  absl::StatusOr<ChildRegistration> registration;
  {
    MutexLock lock(&mu_);
    registration = children_.Join(child_id, std::move(notifier), state_ != v1::OPEN, &given_up);
    ForgetGivenUpLocked(given_up);
  }
  ReleaseUpstream(given_up.client_ids);
  return registration;
}

void Aggregation::ChildLeft(const std::string& child_id, uint64_t join) {
  bool finalize = false;
  {
    MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (!children_.Leave(child_id, join, now)) return;
    finalize = FinalizeDueLocked(now);
  }
  if (finalize) FinalizeSoon(nullptr);
}

void Aggregation::SealLocked(std::vector<ChildNotifier>* to_notify) {
  state_ = v1::SEALED;
  durable_.Changed();
  sealed_at_ = absl::Now();
  *to_notify = children_.JoinedNotifiers();
}

absl::Status Aggregation::Seal(std::function<void()> settled) {
  std::vector<ChildNotifier> to_notify;
  bool sealed_now = false;
  {
    MutexLock lock(&mu_);
    if (state_ == v1::OPEN) {
      SealLocked(&to_notify);
      sealed_now = true;
    } else if (state_ != v1::SEALED) {
      return absl::FailedPreconditionError(absl::StrCat(
          "aggregation '", id(), "' is ", v1::AggregationState_Name(state_), "; only an OPEN one can be sealed"));
    }
  }
  if (sealed_now) {
    for (const ChildNotifier& notify : to_notify) notify(ChildCommand::kSeal);
    NotifyWatchers();
  }
  // Sealed earlier, its finalization may be under way: this attempt runs after it.
  FinalizeSoon(std::move(settled));
  return absl::OkStatus();
}

absl::Status Aggregation::Cancel(const std::string& reason) {
  std::vector<ChildNotifier> to_notify;
  {
    MutexLock lock(&mu_);
    if (state_ != v1::OPEN && state_ != v1::SEALED) {
      return absl::FailedPreconditionError(absl::StrCat(
          "aggregation '", id(), "' is already ", v1::AggregationState_Name(state_)));
    }
    to_notify = children_.JoinedNotifiers();
    state_ = v1::CANCELLED;
    RecordFinishLocked(absl::Now());
    durable_.Changed();
    detail_ = reason.empty() ? "cancelled by an operator" : reason;
  }
  batches_->Discard();
  for (const ChildNotifier& notify : to_notify) notify(ChildCommand::kSeal);
  NotifyWatchers();
  ReleaseFinishedAccumulatorsSoon();
  return absl::OkStatus();
}

bool Aggregation::FinalizeDueLocked(absl::Time now) const {
  return !options_.forwarding && state_ == v1::SEALED &&
         (children_.AllDone() || now >= sealed_at_ + options_.child_grace);
}

void Aggregation::FinalizeSoon(std::function<void()> then) {
  if (options_.finalizer == nullptr || options_.forwarding) {
    MaybeFinalize();
    if (then) then();
    return;
  }
  bool start = false;
  {
    MutexLock lock(&mu_);
    if (then) finalization_waiters_.push_back(std::move(then));
    finalization_requested_ = true;
    start = !finalization_running_;
    finalization_running_ = true;
  }
  if (start) options_.finalizer->Run([self = shared_from_this()] { self->RunFinalizations(); });
}

void Aggregation::RunFinalizations() {
  for (;;) {
    std::vector<std::function<void()>> waiters;
    {
      MutexLock lock(&mu_);
      if (!finalization_requested_) {
        finalization_running_ = false;
        return;
      }
      finalization_requested_ = false;
      waiters.swap(finalization_waiters_);
    }
    MaybeFinalize();
    for (const std::function<void()>& answer : waiters) answer();
  }
}

void Aggregation::MaybeFinalize() {
  if (options_.forwarding) return;  // a mirror's outcome is its parent's
  {
    BatchReducer::Hold hold(*batches_);
    BatchReducer::Waiting waiting;
    int64_t contributions = 0;
    {
      MutexLock lock(&mu_);
      if (!FinalizeDueLocked(absl::Now())) return;
      waiting = hold.TakeWaiting();
      contributions = contributions_;
    }
    // Sealed, the aggregation counts no more updates, and child partials merge only under
    // the hold: what is reduced and reported stays what was counted, and it happens
    // without mu_, so status calls, the ticker and new streams never wait for it.
    v1::AggregationState state = v1::FAILED;
    std::string detail;
    std::shared_ptr<const AggregateResult> result;
    const absl::Status reduced = hold.Reduce(std::move(waiting));
    if (!reduced.ok()) {
      detail = absl::StrCat("reducing a validated batch failed on the ", BackendOf(options_).name(),
                            " backend: ", reduced.ToString());
    } else if (contributions < config_.min_contributions || contributions == 0) {
      detail = absl::StrCat("quorum not reached: ", contributions, " contributions, at least ",
                            std::max<int64_t>(1, config_.min_contributions), " required");
    } else {
      // The released update buffers kept for reuse would sit beside the accumulator and
      // the result: give back as many bytes of them as the report may take, so that the
      // result takes their place; the rest serve the next round's updates (with a device
      // backend, pinned already).
      LargeAllocation::TrimCache(ReportHostBytes(hold.partial().spec()));
      absl::StatusOr<AggregateResult> report = hold.partial().Report();
      if (report.ok()) {
        result = std::make_shared<const AggregateResult>(*std::move(report));
        state = v1::FINALIZED;
      } else {
        detail = absl::StrCat("report failed: ", report.status().ToString());
      }
    }
    MutexLock lock(&mu_);
    if (state_ != v1::SEALED) return;  // cancelled meanwhile: the outcome is that
    durable_.Changed();
    state_ = state;
    detail_ = std::move(detail);
    result_ = std::move(result);
    RecordFinishLocked(absl::Now());
    // From now on the status gives the result's weight sum, the reduction's own: exact for
    // a deterministic aggregation, where the running tally above depends on arrival order.
    if (result_ != nullptr) weight_sum_ = result_->weight_sum;
  }
  NotifyWatchers();
  ReleaseFinishedAccumulators();
}

bool Aggregation::AccumulatorsUnneededLocked() const {
  return IsFinished(state_) && (!options_.checkpointed || durable_.AllDurable());
}

void Aggregation::ReleaseFinishedAccumulators() {
  {
    MutexLock lock(&mu_);
    if (!AccumulatorsUnneededLocked()) return;  // the common case, without waiting for a reduction
  }
  BatchReducer::Hold hold(*batches_);
  MutexLock lock(&mu_);
  if (AccumulatorsUnneededLocked()) ReleaseFinishedStateLocked(hold);
}

void Aggregation::ReleaseFinishedStateLocked(BatchReducer::Hold& hold) {
  if (!accumulators_released_) ReleaseAccumulatorsLocked(hold);  // a mirror's final delta freed them
  counted_any_ |= !counted_.empty();
  counted_ = ClientIdSet();
}

void Aggregation::ReleaseAccumulatorsLocked(BatchReducer::Hold& hold) {
  hold.partial().ReleaseAccumulators();
  hold.AccountMemory();
  accumulators_released_ = true;
}

bool Aggregation::holds_accumulators() const {
  MutexLock lock(&mu_);
  return !accumulators_released_;
}

void Aggregation::ReleaseFinishedAccumulatorsSoon() {
  {
    MutexLock lock(&mu_);
    if (!AccumulatorsUnneededLocked()) return;
  }
  if (options_.finalizer == nullptr) {
    ReleaseFinishedAccumulators();
    return;
  }
  options_.finalizer->Run([self = shared_from_this()] { self->ReleaseFinishedAccumulators(); });
}

void Aggregation::Tick(absl::Time now) {
  bool flush = false;
  bool sealed_now = false;
  bool finalize = false;
  std::vector<ChildNotifier> to_notify;
  std::vector<std::function<void()>> join_waits_over;
  ChildAggregators::GivenUp given_up;
  {
    MutexLock lock(&mu_);
    // Children whose stream has been gone for the grace period are lost: the clients whose
    // claims they hold may send their updates again.
    given_up = children_.GiveUpSilent(now, options_.child_grace);
    ForgetGivenUpLocked(given_up);
    // Join waiters whose deadline passed, or all of them once the aggregation left OPEN.
    const auto over = state_ == v1::OPEN ? join_waiters_.upper_bound(now) : join_waiters_.end();
    for (auto it = join_waiters_.begin(); it != over; ++it) join_waits_over.push_back(std::move(it->second));
    join_waiters_.erase(join_waiters_.begin(), over);
    flush = batches_->PendingOlderThan(options_.flush_interval, now);
    // A mirror's deadline is its parent's business: the parent sends SEAL.
    if (!options_.forwarding && state_ == v1::OPEN && now >= config_.deadline) {
      SealLocked(&to_notify);
      sealed_now = true;
    }
    finalize = FinalizeDueLocked(now);
  }
  ReleaseUpstream(given_up.client_ids);
  for (const std::function<void()>& run : join_waits_over) run();
  if (flush) FlushPending();
  for (const ChildNotifier& notify : to_notify) notify(ChildCommand::kSeal);
  if (sealed_now) NotifyWatchers();
  if (finalize) FinalizeSoon(nullptr);
}

absl::StatusOr<Aggregation::Delta> Aggregation::TakeDelta(bool final, PartialPrecision precision) {
  BatchReducer::Hold hold(*batches_);
  BatchReducer::Waiting waiting;
  Delta delta;
  {
    // The cut: what is counted up to here goes up in this delta. Child partials merge only
    // under the hold, so the children's sequences stay as read.
    MutexLock lock(&mu_);
    waiting = hold.TakeWaiting();
    delta.covered_client_ids.swap(undelivered_);
    delta.durable_mark.version = durable_.version();
    delta.durable_mark.child_sequences = children_.Sequences();
  }
  // Reduced and serialized without mu_, so that updates keep being counted meanwhile.
  absl::Status failed = hold.Reduce(std::move(waiting));
  if (failed.ok()) {
    absl::StatusOr<std::string> bytes = hold.partial().Serialize(precision);
    if (bytes.ok()) {
      delta.bytes = *std::move(bytes);
    } else {
      failed = BackendError("its partial aggregate could not be read back", bytes.status());
    }
  } else {
    failed = BackendError("reducing a batch failed", failed);
  }
  MutexLock lock(&mu_);
  if (!failed.ok()) {
    // Nothing went up: the clients stay undelivered, for a later delta.
    undelivered_.insert(undelivered_.begin(), delta.covered_client_ids.begin(), delta.covered_client_ids.end());
    return failed;
  }
  final_delta_taken_ |= final;
  delta.contributions = hold.partial().contributions();
  if (final) {
    // Nothing more goes up, nor is merged here: no fresh accumulators are made.
    ReleaseAccumulatorsLocked(hold);
  } else {
    hold.ReplacePartial(PartialAggregate(config_.reduction, BackendOf(options_)));
  }
  return delta;
}

bool Aggregation::AwaitChildren(absl::Time deadline) {
  MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return children_.AllDone(); }, deadline);
}

void Aggregation::MarkForwarded(const absl::Status& delivered) {
  if (delivered.ok()) {
    FinishMirror(v1::FINALIZED, "forwarded to the parent aggregator");
  } else {
    FinishMirror(v1::FAILED, absl::StrCat("the final partial could not be delivered to the parent aggregator: ",
                                          delivered.ToString()));
  }
}

void Aggregation::FailMirror(std::string why) { FinishMirror(v1::FAILED, std::move(why)); }

void Aggregation::FinishMirror(v1::AggregationState state, std::string detail) {
  DurableAcks::Waiters not_durable;
  {
    MutexLock lock(&mu_);
    if (IsFinished(state_)) return;
    state_ = state;
    RecordFinishLocked(absl::Now());
    durable_.Changed();
    detail_ = std::move(detail);
    // A delivered final push that waited for the parent's checkpoint released its waiters
    // already (MarkDurable); any left are not known to be durable.
    not_durable = durable_.Stop();
  }
  DurableAcks::Run(not_durable, false);
  NotifyWatchers();
  ReleaseFinishedAccumulatorsSoon();
}

absl::Status Aggregation::BackendError(absl::string_view what, const absl::Status& error) const {
  return absl::Status(error.code(), absl::StrCat("aggregation '", id(), "': ", what, " on the ",
                                                 BackendOf(options_).name(), " backend: ", error.message()));
}

absl::StatusOr<std::optional<Aggregation::Snapshot>> Aggregation::TakeSnapshot() {
  DurableAcks::Waiters abandoned;
  absl::StatusOr<std::optional<Snapshot>> snapshot = TakeSnapshotOrAbandon(&abandoned);
  DurableAcks::Run(abandoned, false);  // outside the locks
  return snapshot;
}

absl::StatusOr<std::optional<Aggregation::Snapshot>> Aggregation::TakeSnapshotOrAbandon(
    DurableAcks::Waiters* abandoned) {
  BatchReducer::Hold hold(*batches_);
  Snapshot snapshot;
  BatchReducer::Waiting waiting;
  {
    MutexLock lock(&mu_);
    if (durable_.AllDurable()) return std::nullopt;
    if (hold.partial().released()) {
      // Finished, and checkpointed as such before its accumulators were freed: what
      // changed since (a lost child's claims given back) matters to no restart, and no
      // acknowledgement waits for it.
      durable_.MarkAllDurable();
      return std::nullopt;
    }
    // Everything counted goes into the partial first (reduced below, without mu_), so the
    // counted set and the partial aggregate hold exactly the same updates.
    waiting = hold.TakeWaiting();
    snapshot.version = durable_.version();
    AggregationCheckpoint& checkpoint = snapshot.checkpoint;
    checkpoint.spec = config_.proto;
    checkpoint.state = state_;
    checkpoint.detail = detail_;
    checkpoint.contributions = contributions_;
    checkpoint.weight_sum = weight_sum_;
    checkpoint.counted = counted_.Snapshot();
    checkpoint.children = children_.Progress();
  }
  // The partial changes only under the hold, still held: updates committed meanwhile wait
  // pending or queued and belong to the next snapshot.
  const absl::Status reduced = hold.Reduce(std::move(waiting));
  if (!reduced.ok()) {
    // The partial no longer holds everything counted: no checkpoint will hold it.
    MutexLock lock(&mu_);
    *abandoned = durable_.Stop();
    return BackendError("reducing a batch failed, so no checkpoint can hold what was counted", reduced);
  }
  absl::StatusOr<std::string> partial = hold.partial().Serialize();
  if (!partial.ok()) return BackendError("its partial aggregate could not be read back", partial.status());
  snapshot.checkpoint.partial = *std::move(partial);
  return snapshot;
}

void Aggregation::MarkDurable(const Snapshot& snapshot) {
  std::vector<std::pair<std::string, uint64_t>> child_sequences;
  for (const AggregationCheckpoint::ChildProgress& progress : snapshot.checkpoint.children) {
    child_sequences.emplace_back(progress.child_id, progress.last_sequence);
  }
  MarkDurableUpTo(snapshot.version, child_sequences);
}

void Aggregation::MarkDurable(const Delta::DurableMark& mark) { MarkDurableUpTo(mark.version, mark.child_sequences); }

void Aggregation::MarkDurableUpTo(uint64_t version,
                                  const std::vector<std::pair<std::string, uint64_t>>& child_sequences) {
  DurableAcks::Waiters released;
  {
    MutexLock lock(&mu_);
    released = durable_.MarkDurableUpTo(version);
    children_.MarkDurable(child_sequences);
  }
  DurableAcks::Run(released, true);
  ReleaseFinishedAccumulatorsSoon();
}

void Aggregation::WhenDurable(std::function<void(bool)> done) {
  std::optional<bool> answer;
  std::function<void()> wanted;
  {
    MutexLock lock(&mu_);
    answer = durable_.Await(done, &wanted);
  }
  if (answer.has_value()) {
    done(*answer);
  } else if (wanted) {
    wanted();
  }
}

bool Aggregation::durable_acks() const {
  MutexLock lock(&mu_);
  return durable_.acks();
}

void Aggregation::SetUpstreamDurable(bool durable) {
  MutexLock lock(&mu_);
  durable_.SetUpstream(durable);
}

bool Aggregation::AwaitsDurability() const {
  MutexLock lock(&mu_);
  return durable_.awaited();
}

void Aggregation::OnDurabilityWanted(std::function<void()> wanted) {
  MutexLock lock(&mu_);
  durable_.OnWanted(std::move(wanted));
}

void Aggregation::StopDurability() {
  DurableAcks::Waiters waiters;
  {
    MutexLock lock(&mu_);
    waiters = durable_.Stop();
  }
  DurableAcks::Run(waiters, false);
}

uint64_t Aggregation::DurableChildSequence(const std::string& child_id) const {
  MutexLock lock(&mu_);
  return children_.DurableSequence(child_id);
}

void Aggregation::SetJoinedUpstream(bool joined, const absl::Status& why_not) {
  std::multimap<absl::Time, std::function<void()>> ready;
  {
    MutexLock lock(&mu_);
    joined_upstream_ = joined;
    upstream_error_ = joined ? absl::OkStatus() : why_not;
    if (joined) ready.swap(join_waiters_);
  }
  for (auto& [deadline, run] : ready) run();
}

void Aggregation::WhenJoined(absl::Time deadline, std::function<void()> ready) {
  {
    MutexLock lock(&mu_);
    if (options_.forwarding && !joined_upstream_ && state_ == v1::OPEN) {
      join_waiters_.emplace(deadline, std::move(ready));
      return;
    }
  }
  ready();
}

v1::AggregationStatus Aggregation::Status() const {
  v1::AggregationStatus status;
  *status.mutable_spec() = config_.proto;
  MutexLock lock(&mu_);
  status.set_state(state_);
  status.set_contributions(contributions_);
  status.set_weight_sum(weight_sum_);
  status.set_detail(detail_);
  status.set_children(static_cast<int64_t>(children_.size()));
  return status;
}

bool Aggregation::HasCounted(const std::string& client_id) const {
  MutexLock lock(&mu_);
  return counted_.contains(client_id);
}

bool Aggregation::CountedAnyClient() const {
  MutexLock lock(&mu_);
  return counted_any_ || !counted_.empty();
}

int64_t Aggregation::pending_updates() const { return batches_->waiting_updates(); }

int64_t Aggregation::updates_in_flight() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(in_flight_.size());
}

int64_t Aggregation::counted_client_id_bytes() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(counted_.memory_bytes());
}

v1::AggregationState Aggregation::state() const {
  MutexLock lock(&mu_);
  return state_;
}

absl::StatusOr<std::shared_ptr<const AggregateResult>> Aggregation::Result() const {
  MutexLock lock(&mu_);
  if (state_ != v1::FINALIZED || result_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "aggregation '", id(), "' is ", v1::AggregationState_Name(state_),
        detail_.empty() ? "" : absl::StrCat(" (", detail_, ")"),
        "; a result exists only once it is FINALIZED"));
  }
  return result_;
}

Aggregation::Finish Aggregation::finish() const {
  MutexLock lock(&mu_);
  return finish_;
}

void Aggregation::RecordFinishLocked(absl::Time at) {
  finish_ = {at, result_ != nullptr ? result_->MemoryBytes() : 0};
}

int Aggregation::AddWatcher(std::function<void()> watcher) {
  MutexLock lock(&mu_);
  watchers_[next_watcher_] = std::move(watcher);
  return next_watcher_++;
}

void Aggregation::RemoveWatcher(int handle) {
  MutexLock lock(&mu_);
  watchers_.erase(handle);
}

void Aggregation::NotifyWatchers() {
  std::vector<std::function<void()>> watchers;
  {
    MutexLock lock(&mu_);
    for (const auto& [handle, watcher] : watchers_) watchers.push_back(watcher);
  }
  for (const auto& watcher : watchers) watcher();
}

}  // namespace fedagg
