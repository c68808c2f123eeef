// Aggregation as an intermediate aggregator's mirror: its place at the parent (joined or
// not, and who waits for the join), the deltas it hands the parent link, and how it ends
// (its final partial delivered, or lost).
#include "absl/strings/str_cat.h"
#include "service/rounds/aggregation.h"

namespace fedagg {

absl::StatusOr<Aggregation::Delta> Aggregation::TakeDelta(bool final, PartialPrecision precision) {
  BatchReducer::Hold hold(*batches_);
  BatchReducer::Waiting waiting;
  Delta delta;
  {
    // The cut: what is counted up to here goes up in this delta. Child partials merge only
    // under the hold, so the children's sequences stay as read.
    MutexLock lock(&mu_);
    waiting = hold.TakeWaiting();
    delta.covered_client_ids = upstream_.TakeUndelivered();
    delta.durable_mark.version = durable_.version();
    delta.durable_mark.child_sequences = children_.Sequences();
  }
  // Reduced and serialized without mu_, so that updates keep being counted meanwhile.
  absl::Status failed = hold.Reduce(std::move(waiting));
  // A secure aggregation's mirror pushes once, at the end, with its cohorts' records.
  if (final && secure_ != nullptr) {
    for (std::string& record : secure_->TakeRecords()) hold.partial().AddSecureCohort(std::move(record));
  }
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
    upstream_.ReturnUndelivered(delta.covered_client_ids);
    return failed;
  }
  if (final) upstream_.MarkFinalDeltaTaken();
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

void Aggregation::SetJoinedUpstream(bool joined, const absl::Status& why_not) {
  MirrorUpstream::Waiters ready;
  {
    MutexLock lock(&mu_);
    ready = upstream_.SetJoined(joined, why_not);
  }
  for (const std::function<void()>& run : ready) run();
}

void Aggregation::WhenJoined(absl::Time deadline, std::function<void()> ready) {
  {
    MutexLock lock(&mu_);
    if (options_.forwarding && !upstream_.joined() && state_ == v1::OPEN) {
      upstream_.AwaitJoin(deadline, std::move(ready));
      return;
    }
  }
  ready();
}

}  // namespace fedagg
