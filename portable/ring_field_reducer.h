// RingFieldReducer: a FieldReducer that stages host batches through a StagingRing into a
// StagedFieldReducer on the ring's device. Accumulate checks and plans the batch
// (batch_packer.h), lays each part out for a slot (its updates' values and indices are
// copied straight from the caller's buffers) and submits its copy and reduction; it
// returns once the batch's copies are done, without waiting for any reduction, so the
// caller frees its buffers and stages the next batch while earlier ones are reduced (the
// ring's free slots bound how far ahead it gets). A reduction that fails
// marks the reducer failed: every Accumulate after the failure is known, and every Merge,
// Save and Load, return it, so a batch that was not (or only partly) applied never
// reaches a partial or a result. Merge, Save and Load first wait for the reductions
// submitted so far, and so does the destructor; HostBytes is what the reducer held after
// its last reduction.
#ifndef FEDAGG_PORTABLE_RING_FIELD_REDUCER_H_
#define FEDAGG_PORTABLE_RING_FIELD_REDUCER_H_

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "portable/batch_packer.h"
#include "portable/field_reducer.h"
#include "portable/staging_ring.h"
#include "service/core/mutex.h"

namespace fedagg::portable {

// An Outcome for a Status of the staging path.
inline Outcome OutcomeOf(const absl::Status& status) {
  if (status.ok()) return Outcome{};
  const Outcome::Code code = status.code() == absl::StatusCode::kResourceExhausted ? Outcome::Code::kResourceExhausted
                             : status.code() == absl::StatusCode::kInvalidArgument ? Outcome::Code::kInvalidArgument
                                                                                    : Outcome::Code::kInternal;
  return Outcome{code, std::string(status.message())};
}

template <typename Acc>
class RingFieldReducer final : public FieldReducer<Acc> {
 public:
  RingFieldReducer(StagingRing& ring, const ReducerSpec& spec, std::unique_ptr<StagedFieldReducer<Acc>> reducer)
      : ring_(ring), lane_(ring.AssignLane()), packer_(spec), reducer_(std::move(reducer)) {}
  ~RingFieldReducer() override { WaitForReductions(); }

  Outcome Accumulate(const HostBatch& batch) override {
    if (Outcome failed = FailureSoFar(); !failed.ok()) return failed;
    absl::StatusOr<BatchPacker::Plan> plan = packer_.MakePlan(batch, ring_.slot_bytes());
    if (!plan.ok()) return OutcomeOf(plan.status());  // nothing was staged
    // The copies read the batch's buffers: whatever happens, return only once they are done.
    std::vector<StagingRing::Submission> submitted;
    const absl::Cleanup wait_for_copies = [&] {
      for (const StagingRing::Submission& submission : submitted) ring_.WaitRead(submission);
    };
    for (size_t p = 0; p < plan->parts.size(); ++p) {
      absl::StatusOr<StagingRing::Lease> lease = ring_.Acquire();
      if (!lease.ok()) {
        const Outcome outcome = OutcomeOf(lease.status());
        if (p > 0) Fail(outcome);  // part of the batch is already on its way
        return outcome;
      }
      std::vector<CopySpan> spans;
      const BatchPacker::Layout layout = packer_.Pack(batch, plan->parts[p], lease->host(), &spans);
      {
        MutexLock lock(&mu_);
        ++pending_;
      }
      // The slot's host memory stays as Pack wrote it until its reduction has run.
      StagingRing::Reduction reduce = [this, layout, host = lease->host()](absl::StatusOr<const void*> data) {
        // A part submitted before an earlier one's failure was known is not applied.
        const Outcome outcome = !FailureSoFar().ok() ? Outcome{}
                                : data.ok()          ? reducer_->Accumulate(BatchPacker::Locate(layout, *data, host))
                                                     : OutcomeOf(data.status());
        const uint64_t host_bytes = reducer_->HostBytes();
        MutexLock lock(&mu_);
        if (!outcome.ok() && failure_.ok()) failure_ = outcome;
        host_bytes_ = host_bytes;
        --pending_;
      };
      submitted.push_back(ring_.Submit(*std::move(lease), std::move(spans), std::move(reduce), lane_));
    }
    return Outcome{};
  }

  Outcome Merge(const FieldReducer<Acc>& other_base) override {
    const auto& other = static_cast<const RingFieldReducer&>(other_base);
    if (Outcome failed = Failure(); !failed.ok()) return failed;
    if (Outcome failed = other.Failure(); !failed.ok()) return failed;
    return Settle(reducer_->Merge(*other.reducer_));
  }

  Outcome Save(HostState<Acc>* out) const override {
    if (Outcome failed = Failure(); !failed.ok()) return failed;
    return reducer_->Save(out);
  }

  Outcome SaveResult(const ResultRequest& request) const override {
    if (Outcome failed = Failure(); !failed.ok()) return failed;
    return reducer_->SaveResult(request);
  }

  Outcome Load(const HostState<Acc>& in) override {
    if (Outcome failed = Failure(); !failed.ok()) return failed;
    return Settle(reducer_->Load(in));
  }

  uint64_t HostBytes() const override {
    MutexLock lock(&mu_);
    return host_bytes_;
  }

  // The reducer the ring feeds, once every reduction submitted so far is done (for a
  // merger that works on the device state in place); the failure instead, if any.
  Outcome Settled(StagedFieldReducer<Acc>** out) const {
    if (Outcome failed = Failure(); !failed.ok()) return failed;
    *out = reducer_.get();
    return Outcome{};
  }

 private:
  void WaitForReductions() const {
    MutexLock lock(&mu_);
    mu_.Await([&] { return pending_ == 0; });
  }
  // The failure of the reductions done so far, without waiting for the others.
  Outcome FailureSoFar() const {
    MutexLock lock(&mu_);
    return failure_;
  }
  // The failure so far, once every submitted reduction is done.
  Outcome Failure() const {
    WaitForReductions();
    MutexLock lock(&mu_);
    return failure_;
  }
  void Fail(const Outcome& outcome) {
    MutexLock lock(&mu_);
    if (failure_.ok()) failure_ = outcome;
  }
  // After a call that changed the state on this thread: its memory, and its failure.
  Outcome Settle(Outcome outcome) {
    const uint64_t host_bytes = reducer_->HostBytes();
    MutexLock lock(&mu_);
    host_bytes_ = host_bytes;
    if (!outcome.ok() && failure_.ok()) failure_ = outcome;
    return outcome;
  }

  StagingRing& ring_;
  const int lane_;  // every batch of this reducer is reduced there, in order
  const BatchPacker packer_;
  const std::unique_ptr<StagedFieldReducer<Acc>> reducer_;
  mutable Mutex mu_;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // reductions submitted and not yet done
  Outcome failure_ ABSL_GUARDED_BY(mu_);
  uint64_t host_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// Field reducers of one device: `staged`'s reducers fed through `ring` (which must outlive
// every reducer made).
inline ReducerMakers RingReducerMakers(StagingRing& ring, const StagedReducerMakers& staged) {
  const auto maker = [&ring](auto make_staged) {
    using Acc = typename decltype(make_staged(std::declval<const ReducerSpec&>()))::element_type::Accumulated;
    return ReducerMaker<Acc>([&ring, make_staged](const ReducerSpec& spec) -> std::unique_ptr<FieldReducer<Acc>> {
      return std::make_unique<RingFieldReducer<Acc>>(ring, spec, make_staged(spec));
    });
  };
  return ReducerMakers{maker(staged.f32), maker(staged.f64), maker(staged.i64)};
}

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_RING_FIELD_REDUCER_H_
