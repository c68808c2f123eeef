// Finalization: the end of a sealed aggregation at the node that decides its outcome (a
// root, or a node that decides alone). Makes the outcome of what was counted — reduces
// the batches still waiting, checks the quorum, reports the result, and adds the
// differential-privacy noise where the spec declares it (the only place the tier adds
// noise: never at an intermediate, once per aggregation) — and runs the attempts: on a
// finalizer pool, one task at a time per aggregation, however many are asked for. A secure
// aggregation's sum is unmasked first (secure_unmasking.h).
#ifndef FEDAGG_SERVICE_ROUNDS_FINALIZATION_H_
#define FEDAGG_SERVICE_ROUNDS_FINALIZATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "fedagg/v1/types.pb.h"
#include "service/core/accumulator_factory.h"
#include "service/core/aggregate_result.h"
#include "service/core/keyed_random.h"
#include "service/core/mutex.h"
#include "service/rounds/batch_reducer.h"
#include "service/rounds/spec_conversion.h"

namespace fedagg {

class Finalization {
 public:
  // FINALIZED with a result, or FAILED with the reason.
  struct Outcome {
    v1::AggregationState state = v1::FAILED;
    std::string detail;
    std::shared_ptr<const AggregateResult> result;
    // Differential privacy: the key the result's noise was drawn with (a checkpoint holds
    // it before the result is published, so that a restart publishes the same result).
    std::optional<NoiseKey> noise_key;
  };

  // `config` and `backend` must outlive it.
  Finalization(const AggregationConfig& config, const AccumulatorFactory& backend)
      : config_(config), backend_(backend) {}

  // The outcome of `contributions` counted updates: `waiting` (taken under the owner's
  // lock with `hold`) reduced into the held partial, the quorum checked, the result
  // reported and, with differential privacy, noised. Runs without the owner's lock.
  Outcome Make(BatchReducer::Hold& hold, BatchReducer::Waiting waiting, int64_t contributions) const;
  // The result of `partial`: its report, noised with `noise_key` when its spec declares
  // differential privacy (then the key is required). What Make publishes, and what a
  // restart from a FINALIZED checkpoint publishes again.
  static absl::StatusOr<AggregateResult> Report(const PartialAggregate& partial,
                                                const std::optional<NoiseKey>& noise_key);

  // Attempts on a finalizer pool. Request records one (and `then`, run once it is over);
  // true when no task runs them yet, so the caller must start one that calls Drain.
  bool Request(std::function<void()> then);
  // The task: runs `attempt` while requests keep coming, each answering the `then`s
  // registered before it began, so that repeated requests (the ticker's, every tick)
  // never hold more than one worker.
  void Drain(absl::FunctionRef<void()> attempt);

 private:
  // A secure aggregation's masks out of `partial` (the root's key, every cohort's record).
  absl::Status Unmask(PartialAggregate& partial) const;

  const AggregationConfig& config_;
  const AccumulatorFactory& backend_;

  Mutex mu_;  // a leaf: nothing is called with it held
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_FINALIZATION_H_
