// Finalization: the outcome of a sealed aggregation, and its coalesced attempts.
#include "service/rounds/finalization.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/core/field_report.h"
#include "service/core/large_allocation.h"
#include "service/core/privacy_noise.h"
#include "service/core/status_macros.h"
#include "service/core/thread_pool.h"
#include "service/rounds/secure_unmasking.h"

namespace fedagg {

Finalization::Outcome Finalization::Make(BatchReducer::Hold& hold, BatchReducer::Waiting waiting,
                                         int64_t contributions) const {
  Outcome outcome;
  const absl::Status reduced = hold.Reduce(std::move(waiting));
  if (!reduced.ok()) {
    outcome.detail = absl::StrCat("reducing a validated batch failed on the ", backend_.name(),
                                  " backend: ", reduced.ToString());
    return outcome;
  }
  if (contributions < config_.min_contributions || contributions == 0) {
    outcome.detail = absl::StrCat("quorum not reached: ", contributions, " contributions, at least ",
                                  std::max<int64_t>(1, config_.min_contributions), " required");
    return outcome;
  }
  // The released update buffers kept for reuse would sit beside the accumulator and the
  // result: give back as many bytes of them as the report may take, so that the result
  // takes their place; the rest serve the next round's updates (with a device backend,
  // pinned already).
  LargeAllocation::TrimCache(ReportHostBytes(hold.partial().spec()));
  if (config_.reduction->options().secure) {
    const absl::Status unmasked = Unmask(hold.partial());
    if (!unmasked.ok()) {
      outcome.detail = absl::StrCat("secure aggregation: ", unmasked.message());
      return outcome;
    }
  }
  if (config_.reduction->options().privacy.has_value()) {
    absl::StatusOr<NoiseKey> key = NoiseKey::Fresh();
    if (!key.ok()) {
      outcome.detail = absl::StrCat("no noise could be drawn: ", key.status().ToString());
      return outcome;
    }
    outcome.noise_key = *key;
  }
  absl::StatusOr<AggregateResult> report = Report(hold.partial(), outcome.noise_key);
  if (!report.ok()) {
    outcome.detail = absl::StrCat("report failed: ", report.status().ToString());
    return outcome;
  }
  outcome.result = std::make_shared<const AggregateResult>(*std::move(report));
  outcome.state = v1::FINALIZED;
  return outcome;
}

absl::Status Finalization::Unmask(PartialAggregate& partial) const {
  if (config_.secure_unmasker == nullptr) {
    // Created or restored (aggregation_durability.cc) with its key, or failed at restore.
    return absl::InternalError("this secure aggregation's root holds no key to open its unmasking shares");
  }
  // The masks are expanded where the backend computes (a device's, bit-identical), or on
  // every core of the host.
  return UnmaskSecureSum(CohortFrameOf(*config_.reduction, config_.id, config_.proto.incarnation()),
                         *config_.secure_unmasker, partial, &ThreadPool::Default(), backend_.mask_adder());
}

absl::StatusOr<AggregateResult> Finalization::Report(const PartialAggregate& partial,
                                                     const std::optional<NoiseKey>& noise_key) {
  absl::StatusOr<AggregateResult> report = partial.Report();
  if (!report.ok() || !partial.spec().options().privacy.has_value()) return report;
  if (!noise_key.has_value()) {
    return absl::DataLossError("a differentially private aggregation's result needs its noise key, which is missing");
  }
  FEDAGG_RETURN_IF_ERROR(AddPrivacyNoise(partial.spec(), *noise_key, partial.clipped_updates(), *report));
  return report;
}

bool Finalization::Request(std::function<void()> then) {
  MutexLock lock(&mu_);
  if (then) waiters_.push_back(std::move(then));
  requested_ = true;
  const bool start = !running_;
  running_ = true;
  return start;
}

void Finalization::Drain(absl::FunctionRef<void()> attempt) {
  for (;;) {
    std::vector<std::function<void()>> waiters;
    {
      MutexLock lock(&mu_);
      if (!requested_) {
        running_ = false;
        return;
      }
      requested_ = false;
      waiters.swap(waiters_);
    }
    attempt();
    for (const std::function<void()>& answer : waiters) answer();
  }
}

}  // namespace fedagg
