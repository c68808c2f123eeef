// ClaimBatcher: batched, pipelined client-id claims at the parent aggregator.
#include "service/tier/claim_batcher.h"

#include "absl/strings/str_cat.h"
#include "service/rpc/grpc_status.h"

namespace fedagg {

struct ClaimBatcher::Call {
  std::string key;  // of its queue
  grpc::ClientContext context;
  v1::ClaimClientsRequest request;
  v1::ClaimClientsResponse response;
  std::vector<std::function<void(absl::Status)>> done;  // one per request.client_ids
};

ClaimBatcher::ClaimBatcher(v1::Tier::Stub& tier, std::string child_id,
                           std::function<void(grpc::ClientContext&)> prepare)
    : tier_(tier), child_id_(std::move(child_id)), prepare_(std::move(prepare)) {}

ClaimBatcher::~ClaimBatcher() {
  MutexLock lock(&mu_);
  stopping_ = true;
  for (auto& [raw, call] : calls_) call->context.TryCancel();
  mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return calls_.empty(); });
}

void ClaimBatcher::Claim(const std::string& aggregation_id, const std::string& incarnation,
                         const std::string& client_id, std::function<void(absl::Status)> done) {
  std::shared_ptr<Call> call;
  bool queued = false;
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      Queue& queue = QueueLocked(aggregation_id, incarnation);
      queue.claims.emplace_back(client_id, std::move(done));
      queued = true;
      call = TakeBatchLocked(queue);
    }
  }
  if (call != nullptr) Start(call);
  if (queued) return;
  done(absl::UnavailableError("this intermediate aggregator is shutting down; send the update to another aggregator"));
}

void ClaimBatcher::Release(const std::string& aggregation_id, const std::string& incarnation,
                           const std::string& client_id) {
  std::shared_ptr<Call> call;
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    Queue& queue = QueueLocked(aggregation_id, incarnation);
    queue.releases.push_back(client_id);
    call = TakeBatchLocked(queue);
  }
  if (call != nullptr) Start(call);
}

std::string ClaimBatcher::Key(const std::string& aggregation_id, const std::string& incarnation) {
  return absl::StrCat(aggregation_id, "@", incarnation);
}

void ClaimBatcher::SetSlowAnswers(const std::string& aggregation_id, const std::string& incarnation, bool slow) {
  MutexLock lock(&mu_);
  if (slow) {
    slow_answers_.insert(Key(aggregation_id, incarnation));
  } else {
    slow_answers_.erase(Key(aggregation_id, incarnation));
  }
}

void ClaimBatcher::Forget(const std::string& aggregation_id, const std::string& incarnation) {
  MutexLock lock(&mu_);
  slow_answers_.erase(Key(aggregation_id, incarnation));
}

ClaimBatcher::Queue& ClaimBatcher::QueueLocked(const std::string& aggregation_id, const std::string& incarnation) {
  Queue& queue = queues_[Key(aggregation_id, incarnation)];
  queue.aggregation_id = aggregation_id;
  queue.incarnation = incarnation;
  return queue;
}

void ClaimBatcher::RetryReleases() {
  std::vector<std::shared_ptr<Call>> calls;
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    for (auto& [key, queue] : queues_) {
      queue.retry_releases = false;
      if (std::shared_ptr<Call> call = TakeBatchLocked(queue)) calls.push_back(std::move(call));
    }
  }
  for (std::shared_ptr<Call>& call : calls) Start(std::move(call));
}

std::shared_ptr<ClaimBatcher::Call> ClaimBatcher::TakeBatchLocked(Queue& queue) {
  const bool releases_now = !queue.releases.empty() && !queue.retry_releases;
  const std::string key = Key(queue.aggregation_id, queue.incarnation);
  const int max_calls = slow_answers_.contains(key) ? kSlowAnswerCalls : 1;
  if (queue.calls_in_flight >= max_calls || (queue.claims.empty() && !releases_now)) return nullptr;
  ++queue.calls_in_flight;
  queue.retry_releases = false;
  auto call = std::make_shared<Call>();
  prepare_(call->context);
  call->request.set_aggregation_id(queue.aggregation_id);
  call->request.set_incarnation(queue.incarnation);
  call->request.set_child_id(child_id_);
  for (auto& [client_id, done] : queue.claims) {
    call->request.add_client_ids(client_id);
    call->done.push_back(std::move(done));
  }
  for (std::string& client_id : queue.releases) call->request.add_released_client_ids(std::move(client_id));
  queue.claims.clear();
  queue.releases.clear();
  call->key = key;
  calls_[call.get()] = call;
  return call;
}

void ClaimBatcher::Start(std::shared_ptr<Call> call) {
  // Without the lock: the callback may run inline.
  tier_.async()->ClaimClients(&call->context, &call->request, &call->response,
                              [this, call](grpc::Status rpc) { Completed(call, rpc); });
}

void ClaimBatcher::Completed(std::shared_ptr<Call> call, const grpc::Status& rpc) {
  const int claimed = call->request.client_ids_size();
  std::vector<absl::Status> results;
  if (rpc.ok() && call->response.results_size() == claimed) {
    for (const v1::ClaimResult& result : call->response.results()) {
      results.push_back(result.code() == 0 ? absl::OkStatus()
                                           : absl::Status(static_cast<absl::StatusCode>(result.code()),
                                                          result.message()));
    }
  } else {
    const absl::Status error =
        rpc.ok() ? absl::InternalError(absl::StrCat("the parent answered ", call->response.results_size(),
                                                    " claims for ", claimed, " asked"))
                 : FromGrpcStatus(rpc);
    const absl::Status refused = absl::UnavailableError(absl::StrCat(
        "could not claim the client id at the parent aggregator (", error.ToString(),
        "); it is needed so that the update is counted once in the whole tree; retry shortly, or "
        "send the update to another aggregator"));
    results.assign(claimed, refused);
  }
  std::shared_ptr<Call> next;
  {
    MutexLock lock(&mu_);
    Queue& queue = queues_[call->key];
    --queue.calls_in_flight;
    // The parent may have granted what the failed call asked: give it back, with the
    // releases the call carried, at the next RetryReleases. Unless the parent says the
    // aggregation (or this child) is gone there: then nothing is held to release.
    const absl::StatusCode code = FromGrpcStatus(rpc).code();
    if (!rpc.ok() && code != absl::StatusCode::kNotFound && code != absl::StatusCode::kFailedPrecondition) {
      for (const std::string& client_id : call->request.client_ids()) queue.releases.push_back(client_id);
      for (const std::string& client_id : call->request.released_client_ids()) queue.releases.push_back(client_id);
      queue.retry_releases = true;
    }
    if (!stopping_) next = TakeBatchLocked(queue);
    if (queue.calls_in_flight == 0 && queue.releases.empty()) queues_.erase(call->key);
  }
  if (next != nullptr) Start(next);
  for (int i = 0; i < claimed; ++i) call->done[i](results[i]);
  MutexLock lock(&mu_);
  calls_.erase(call.get());
}

}  // namespace fedagg
