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

ClaimBatcher::Queue& ClaimBatcher::QueueLocked(const std::string& aggregation_id, const std::string& incarnation) {
  Queue& queue = queues_[absl::StrCat(aggregation_id, "@", incarnation)];
  queue.aggregation_id = aggregation_id;
  queue.incarnation = incarnation;
  return queue;
}

std::shared_ptr<ClaimBatcher::Call> ClaimBatcher::TakeBatchLocked(Queue& queue) {
  if (queue.in_flight || (queue.claims.empty() && queue.releases.empty())) return nullptr;
  queue.in_flight = true;
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
  call->key = absl::StrCat(queue.aggregation_id, "@", queue.incarnation);
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
    queue.in_flight = false;
    // The parent may have granted what the failed call asked: give it back (once; a
    // release that fails too is dropped, so an unreachable parent causes no busy loop).
    if (!rpc.ok()) {
      for (const std::string& client_id : call->request.client_ids()) queue.releases.push_back(client_id);
    }
    if (!stopping_) next = TakeBatchLocked(queue);
    if (!queue.in_flight) queues_.erase(call->key);
  }
  if (next != nullptr) Start(next);
  for (int i = 0; i < claimed; ++i) call->done[i](results[i]);
  MutexLock lock(&mu_);
  calls_.erase(call.get());
}

}  // namespace fedagg
