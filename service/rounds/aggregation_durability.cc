// Aggregation's durability: rebuilding one from its checkpoint after a restart (Restore),
// the consistent snapshots the Checkpointer writes, and the DURABLE acks they release
// (DurableAcks holds the waiters and versions; a mirror's are released by its parent's
// checkpoints, reported through the parent link).
#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/rounds/secure_unmasking.h"
#include "service/secagg/cohort_messages.h"
#include "service/rounds/aggregation.h"

namespace fedagg {
namespace {

// A restarted root's secure aggregation (docs/RELIABILITY.md): its key pair comes back from
// the checkpoint, and it goes on if every masked update the checkpoint holds is covered by
// a cohort record (its children's cohorts, delivered with their final partials). The
// relay state of the root's own cohorts lives in memory only: an update of theirs already
// counted could never be unmasked, so the aggregation fails. Returns why it cannot go on
// (nullopt: it can); DATA_LOSS for a key that is not the spec's.
absl::StatusOr<std::optional<std::string>> RestoreSecureRoot(const AggregationCheckpoint& checkpoint,
                                                             const PartialAggregate& partial,
                                                             AggregationConfig& config) {
  if (!checkpoint.secure_root_key.has_value()) {
    return std::optional<std::string>(
        "secure aggregation: the root restarted, and its checkpoint (written by an earlier version) does not hold "
        "the key its clients seal their unmasking shares to: the masks cannot be removed; create it again");
  }
  FEDAGG_ASSIGN_OR_RETURN(SecAggUnmasker unmasker, SecAggUnmasker::FromPrivateKey(*checkpoint.secure_root_key));
  if (BytesOf(unmasker.public_key()) != config.proto.secure().root_public_key()) {
    return absl::DataLossError(absl::StrCat("checkpoint of aggregation '", config.id,
                                            "': its root key is not the one its spec gives clients"));
  }
  config.secure_unmasker = std::make_shared<const SecAggUnmasker>(std::move(unmasker));
  absl::StatusOr<int64_t> recorded = RecordedMaskedUpdates(partial);
  if (!recorded.ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint of aggregation '", config.id, "': ", recorded.status().message()));
  }
  if (*recorded == partial.contributions()) return std::optional<std::string>();
  return std::optional<std::string>(absl::StrCat(
      "secure aggregation: the root restarted while cohorts it ran itself were open; ",
      partial.contributions() - *recorded, " masked updates it had counted have no unmasking record, and the masks "
      "cannot be removed without one (docs/RELIABILITY.md); create it again"));
}

}  // namespace

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
  std::optional<std::string> unrecoverable;  // why a secure aggregation cannot go on
  if (config.proto.has_secure() && !IsFinished(checkpoint.state)) {
    FEDAGG_ASSIGN_OR_RETURN(unrecoverable, RestoreSecureRoot(checkpoint, *partial, config));
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
    absl::StatusOr<AggregateResult> report = Finalization::Report(hold.partial(), checkpoint.noise_key);
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
  if (unrecoverable.has_value()) {
    // Failed at once, and checkpointed as such, rather than taking updates it cannot unmask.
    aggregation->PublishLocked({v1::FAILED, *std::move(unrecoverable)});
    aggregation->durable_.Changed();
  }
  if (aggregation->AccumulatorsUnneededLocked()) {  // finished: the checkpoint holds it
    aggregation->ReleaseFinishedStateLocked(hold);
  }
  return aggregation;
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
  std::vector<std::string> completed_cohorts;
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
    // A root's own cohorts completed by now (their inputs are all in `waiting` or the
    // partial) go into the partial with their records, so that a restart can unmask them.
    if (secure_ != nullptr && !options_.forwarding) completed_cohorts = secure_->TakeRecords();
    snapshot.version = durable_.version();
    AggregationCheckpoint& checkpoint = snapshot.checkpoint;
    checkpoint.spec = config_.proto;
    // A private result waiting to be published: the checkpoint holds it FINALIZED, with
    // its noise key, before anyone sees it.
    checkpoint.state = unpublished_.has_value() ? unpublished_->state : state_;
    checkpoint.detail = unpublished_.has_value() ? unpublished_->detail : detail_;
    if (unpublished_.has_value()) checkpoint.noise_key = unpublished_->noise_key;
    if (config_.secure_unmasker != nullptr) checkpoint.secure_root_key = config_.secure_unmasker->private_key();
    checkpoint.contributions = contributions_;
    checkpoint.weight_sum = weight_sum_;
    checkpoint.counted = counted_.Snapshot();
    checkpoint.children = children_.Progress();
  }
  // The partial changes only under the hold, still held: updates committed meanwhile wait
  // pending or queued and belong to the next snapshot.
  const absl::Status reduced = hold.Reduce(std::move(waiting));
  for (std::string& record : completed_cohorts) hold.partial().AddSecureCohort(std::move(record));
  if (!reduced.ok()) {
    // The partial no longer holds everything counted: no checkpoint will hold it.
    MutexLock lock(&mu_);
    *abandoned = durable_.Stop();
    FailUnpublishedLocked();
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
  bool published = false;
  {
    MutexLock lock(&mu_);
    released = durable_.MarkDurableUpTo(version);
    children_.MarkDurable(child_sequences);
    if (unpublished_.has_value() && version >= unpublished_version_) {
      PublishLocked(*std::move(unpublished_));
      unpublished_.reset();
      published = true;
    }
  }
  DurableAcks::Run(released, true);
  if (published) NotifyWatchers();
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
    FailUnpublishedLocked();
  }
  DurableAcks::Run(waiters, false);
}

uint64_t Aggregation::DurableChildSequence(const std::string& child_id) const {
  MutexLock lock(&mu_);
  return children_.DurableSequence(child_id);
}

}  // namespace fedagg
