// Aggregation: lifecycle, exactly-once accounting, child partials and durability; its
// updates are batched and reduced by its BatchReducer.
#include "service/rounds/aggregation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_accumulator_factory.h"
#include "service/core/status_macros.h"
#include "service/core/update_validator.h"
#include "service/rounds/secure_unmasking.h"

namespace fedagg {
namespace {

// A secure aggregation's cohorts at this node; null for any other aggregation.
std::unique_ptr<SecureCohorts> SecureCohortsOf(const AggregationConfig& config) {
  if (!config.reduction->options().secure) return nullptr;
  const absl::StatusOr<Key32> root_key = Key32Of(config.proto.secure().root_public_key(), "the root's key");
  // Without the root's key (a spec no root made) every advertise is refused, saying so.
  return std::make_unique<SecureCohorts>(CohortFrameOf(*config.reduction, config.id, config.proto.incarnation()),
                                         SecureCohortOptionsFromProto(config.proto.secure()),
                                         root_key.ok() ? *root_key : Key32{});
}

}  // namespace

const AccumulatorFactory& BackendOf(const AggregationOptions& options) {
  return options.backend != nullptr ? *options.backend : CpuAccumulatorFactory::Default();
}

Aggregation::Aggregation(AggregationConfig config, AggregationOptions options)
    : config_(std::move(config)),
      options_(options),
      children_(config_.id),
      durable_(options_.checkpointed),
      finalization_(config_, BackendOf(options_)),
      secure_(SecureCohortsOf(config_)),
      batches_(BatchReducer::Create(config_.reduction, BackendOf(options_), options_.batching)) {}

Aggregation::~Aggregation() { StopDurability(); }

absl::Status Aggregation::BeginUpdate(const std::string& client_id) { return Reserve(client_id, /*own=*/true); }

absl::Status Aggregation::Reserve(const std::string& client_id, bool own) {
  MutexLock lock(&mu_);
  if (state_ != v1::OPEN) {
    return absl::FailedPreconditionError(absl::StrCat(
        "aggregation '", id(), "' is ", v1::AggregationState_Name(state_),
        detail_.empty() ? "" : absl::StrCat(" (", detail_, ")"),
        " and accepts no more updates; ask GetTask for an open one"));
  }
  if (options_.forwarding) FEDAGG_RETURN_IF_ERROR(upstream_.CheckJoined(id()));
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
  // A child's client ran its cohort there: only this node's own clients are expected here.
  if (secure_ != nullptr && own) FEDAGG_RETURN_IF_ERROR(secure_->BeginInput(client_id));
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
  {
    MutexLock lock(&mu_);
    in_flight_.erase(client_id);
  }
  if (secure_ != nullptr) secure_->EndInput(client_id, /*counted=*/false, absl::Now());
}

absl::StatusOr<Aggregation::ValidatedUpdate> Aggregation::Validate(UpdateBuffer update) const {
  FEDAGG_RETURN_IF_ERROR(update.Validate(reduction()));
  if (reduction().options().privacy.has_value()) FEDAGG_RETURN_IF_ERROR(update.Clip(reduction()));
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
  if (begun.ok()) begun = Reserve(client_id, /*own=*/false);
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
  absl::Status counted;
  {
    MutexLock lock(&mu_);
    counted = CountClientLocked(client_id);
    if (counted.ok()) contributions = AddCountedLocked(client_id, std::move(update), &to_notify, &sealed_now);
  }
  if (secure_ != nullptr) secure_->EndInput(client_id, counted.ok(), absl::Now());
  FEDAGG_RETURN_IF_ERROR(counted);
  if (sealed_now) {
    for (const ChildNotifier& notify : to_notify) notify(ChildCommand::kSeal);
    NotifyWatchers();
  }
  *completed = sealed_now;
  return contributions;
}

int64_t Aggregation::AddCountedLocked(const std::string& client_id, UpdateBuffer update,
                                      std::vector<ChildNotifier>* to_notify, bool* sealed_now) {
  durable_.Changed();
  if (options_.forwarding) upstream_.AddUndelivered(client_id);
  weight_sum_ += update.view().weight.value_or(1.0);
  batches_->Add(std::move(update));  // under mu_: what is counted is pending, queued or reduced
  ++contributions_;
  // The root seals when max_contributions is reached across the tree. A mirror that
  // reached it with its own clients refuses more (BeginUpdate) but stays OPEN, so its
  // next push delivers them and the root seals (a sealed mirror would wait for the
  // root's SEAL, which would never come).
  if (!options_.forwarding && config_.max_contributions > 0 && contributions_ >= config_.max_contributions) {
    SealLocked(to_notify);
    *sealed_now = true;
  }
  return contributions_;
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
    if ((state_ != v1::OPEN && state_ != v1::SEALED) || upstream_.final_delta_taken() || unpublished_.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "aggregation '", id(), "' is ", v1::AggregationState_Name(state_),
          upstream_.final_delta_taken() ? " and its final partial already went up" : "",
          unpublished_.has_value() ? " and its noised result is made (waiting for its checkpoint)" : "",
          "; the partial from child '", child_id, "' was not merged"));
    }
    FEDAGG_ASSIGN_OR_RETURN(const bool next, children_.CheckPush(child_id, sequence));
    if (!next) return contributions_;  // a retried push
    absl::Status merged = hold.partial().MergeWith(taken);
    if (!merged.ok()) return merged;
    hold.AccountMemory();
    durable_.Changed();
    std::vector<std::string> covered = children_.RecordPush(child_id, sequence, final, covered_client_ids);
    if (options_.forwarding) upstream_.AddUndelivered(covered);
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
  if (secure_ != nullptr) secure_->Seal(sealed_at_);  // calls nothing of this aggregation
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
    unpublished_.reset();  // a noised result not yet published never will be
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
  // A secure aggregation's children push their finals once their cohorts finished the
  // stages the seal closed (at most two stage timeouts), and its own cohorts must have.
  const absl::Duration grace =
      options_.child_grace + (secure_ != nullptr ? 2 * secure_->options().stage_timeout : absl::ZeroDuration());
  // A noised result made and waiting for its checkpoint is the outcome: never drawn again.
  return !options_.forwarding && state_ == v1::SEALED && !unpublished_.has_value() &&
         (secure_ == nullptr || secure_->Complete()) && (children_.AllDone() || now >= sealed_at_ + grace);
}

bool Aggregation::AwaitSecureCohorts() {
  return secure_ == nullptr || secure_->AwaitComplete(absl::Now() + 3 * secure_->options().stage_timeout);
}

void Aggregation::FinalizeSoon(std::function<void()> then) {
  if (options_.finalizer == nullptr || options_.forwarding) {
    MaybeFinalize();
    if (then) then();
    return;
  }
  if (finalization_.Request(std::move(then))) {
    options_.finalizer->Run([self = shared_from_this()] { self->finalization_.Drain([&] { self->MaybeFinalize(); }); });
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
    // This node's own cohorts' records join its children's in the partial it unmasks.
    if (secure_ != nullptr) {
      for (std::string& record : secure_->TakeRecords()) hold.partial().AddSecureCohort(std::move(record));
    }
    // Sealed, the aggregation counts no more updates, and child partials merge only under
    // the hold: what is reduced and reported stays what was counted, and it happens
    // without mu_, so status calls, the ticker and new streams never wait for it.
    Finalization::Outcome outcome = finalization_.Make(hold, std::move(waiting), contributions);
    MutexLock lock(&mu_);
    if (state_ != v1::SEALED) return;  // cancelled meanwhile: the outcome is that
    durable_.Changed();
    if (outcome.noise_key.has_value() && options_.checkpointed) {
      // A noised result is published once a checkpoint holds it (MarkDurableUpTo): a
      // restart then publishes it again, never a second draw of noise, and never before.
      unpublished_ = std::move(outcome);
      unpublished_version_ = durable_.version();
      return;
    }
    PublishLocked(std::move(outcome));
  }
  NotifyWatchers();
  ReleaseFinishedAccumulators();
}

void Aggregation::PublishLocked(Finalization::Outcome outcome) {
  state_ = outcome.state;
  detail_ = std::move(outcome.detail);
  result_ = std::move(outcome.result);
  RecordFinishLocked(absl::Now());
  // From now on the status gives the result's weight sum, the reduction's own: exact for
  // a deterministic aggregation, where the running tally above depends on arrival order.
  if (result_ != nullptr) weight_sum_ = result_->weight_sum;
}

void Aggregation::FailUnpublishedLocked() {
  if (!unpublished_.has_value()) return;
  unpublished_.reset();
  PublishLocked({v1::FAILED, "its noised result could not be checkpointed, so it was not published (publishing it "
                             "unrecorded could let a restart publish a second draw of noise)"});
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
  if (secure_ != nullptr) secure_->Tick(now);  // forms cohorts, ends stages at their timeouts
  bool flush = false;
  bool sealed_now = false;
  bool finalize = false;
  std::vector<ChildNotifier> to_notify;
  MirrorUpstream::Waiters join_waits_over;
  ChildAggregators::GivenUp given_up;
  {
    MutexLock lock(&mu_);
    // Children whose stream has been gone for the grace period are lost: the clients whose
    // claims they hold may send their updates again.
    given_up = children_.GiveUpSilent(now, options_.child_grace);
    ForgetGivenUpLocked(given_up);
    // Join waiters whose deadline passed, or all of them once the aggregation left OPEN.
    join_waits_over = upstream_.TakeWaitsOver(now, state_ == v1::OPEN);
    flush = batches_->PendingOlderThan(options_.flush_interval, now);
    // A root's completed cohorts go into its next checkpoint (TakeSnapshot), records and all.
    if (secure_ != nullptr && !options_.forwarding && options_.checkpointed && secure_->HasRecords()) {
      durable_.Changed();
    }
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

absl::Status Aggregation::BackendError(absl::string_view what, const absl::Status& error) const {
  return absl::Status(error.code(), absl::StrCat("aggregation '", id(), "': ", what, " on the ",
                                                 BackendOf(options_).name(), " backend: ", error.message()));
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
  if (result_ != nullptr && result_->privacy.has_value()) *status.mutable_privacy() = PrivacyReportToProto(*result_->privacy);
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
  if (state_ == v1::FINALIZED && result_ == nullptr && options_.forwarding) {
    return absl::FailedPreconditionError(absl::StrCat(
        "aggregation '", id(), "' was forwarded to the parent aggregator, which holds its result: ask the root"));
  }
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
