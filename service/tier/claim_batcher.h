// ClaimBatcher: an intermediate aggregator's client-id claims at its parent
// (Tier.ClaimClients), batched and pipelined. Per aggregation, one call is in flight at a
// time; claims and releases that arrive meanwhile go out together in the next call, so
// under load one round trip serves many updates and at rest a claim costs one round trip.
// Under a parent that answers once a root checkpoint holds the grants (SetSlowAnswers),
// up to kSlowAnswerCalls calls are in flight instead: a claim that arrives while one waits
// shares the same checkpoint rather than waiting for it and then for the next one.
// A call that fails (the parent unreachable, a deadline) refuses its claims with
// UNAVAILABLE and releases them later, in case the parent granted them before the answer
// was lost. Releases are retried (RetryReleases) until the parent takes them, or answers
// that the aggregation or this child is gone there (NOT_FOUND, FAILED_PRECONDITION): an id
// left claimed by mistake would refuse its client for the rest of the aggregation.
#ifndef FEDAGG_SERVICE_TIER_CLAIM_BATCHER_H_
#define FEDAGG_SERVICE_TIER_CLAIM_BATCHER_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "fedagg/v1/tier.grpc.pb.h"
#include "service/core/mutex.h"
#include "service/rounds/client_claims.h"

namespace fedagg {

class ClaimBatcher final : public ClientClaims {
 public:
  // `prepare` adds credentials and a deadline to each call's context.
  ClaimBatcher(v1::Tier::Stub& tier, std::string child_id,
               std::function<void(grpc::ClientContext&)> prepare);
  ~ClaimBatcher() override;  // cancels the calls in flight and waits for their callbacks

  void Claim(const std::string& aggregation_id, const std::string& incarnation,
             const std::string& client_id, std::function<void(absl::Status)> done) override;
  void Release(const std::string& aggregation_id, const std::string& incarnation,
               const std::string& client_id) override;
  // Sends again the releases whose call failed (called periodically by the parent link;
  // not at once, so an unreachable parent causes no busy loop).
  void RetryReleases();
  // Whether the parent answers this aggregation's claims only once a checkpoint holds them
  // (TierCommand.parent_durable_acks); kept until Forget.
  void SetSlowAnswers(const std::string& aggregation_id, const std::string& incarnation, bool slow);
  void Forget(const std::string& aggregation_id, const std::string& incarnation);

 private:
  struct Queue {
    std::string aggregation_id;
    std::string incarnation;
    std::vector<std::pair<std::string, std::function<void(absl::Status)>>> claims;
    std::vector<std::string> releases;
    int calls_in_flight = 0;
    bool retry_releases = false;  // the last call failed: its releases wait for RetryReleases
  };
  static constexpr int kSlowAnswerCalls = 64;
  struct Call;
  static std::string Key(const std::string& aggregation_id, const std::string& incarnation);
  Queue& QueueLocked(const std::string& aggregation_id, const std::string& incarnation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A call carrying what `queue` holds, when there is something to send now and no call of
  // it is in flight; null otherwise. The caller Starts it after unlocking.
  std::shared_ptr<Call> TakeBatchLocked(Queue& queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Start(std::shared_ptr<Call> call);
  void Completed(std::shared_ptr<Call> call, const grpc::Status& rpc);

  v1::Tier::Stub& tier_;
  const std::string child_id_;
  const std::function<void(grpc::ClientContext&)> prepare_;
  Mutex mu_;
  std::map<std::string, Queue> queues_ ABSL_GUARDED_BY(mu_);  // by aggregation id + incarnation
  std::map<Call*, std::shared_ptr<Call>> calls_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> slow_answers_ ABSL_GUARDED_BY(mu_);  // keys of SetSlowAnswers(..., true)
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_TIER_CLAIM_BATCHER_H_
