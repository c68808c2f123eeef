// The fedagg.v1.Control service.
#include "service/rpc/control_service.h"

#include "absl/strings/str_cat.h"
#include "service/rpc/grpc_status.h"
#include "service/rpc/push_stream.h"
#include "service/rpc/result_stream.h"

namespace fedagg {
namespace {

// Streams a ResultStream's chunks, one write in flight.
class ResultReactor final : public grpc::ServerWriteReactor<v1::ResultChunk> {
 public:
  explicit ResultReactor(ResultStream stream) : stream_(std::move(stream)) { WriteNext(); }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    WriteNext();
  }
  void OnDone() override { delete this; }

 private:
  void WriteNext() {
    std::optional<v1::ResultChunk> next = stream_.Next();
    if (!next.has_value()) {
      Finish(grpc::Status::OK);
      return;
    }
    chunk_ = std::move(*next);
    StartWrite(&chunk_);
  }
  ResultStream stream_;
  v1::ResultChunk chunk_;
};

template <typename T>
grpc::ServerWriteReactor<T>* FailedStream(const absl::Status& status) {
  std::shared_ptr<PushStream<T>> stream = PushStream<T>::Create();
  stream->Close(ToGrpcStatus(status));
  return stream.get();
}

}  // namespace

#define FEDAGG_AUTHENTICATE_UNARY(context, reactor)                                 \
  if (absl::Status auth = context_.authenticator.Check(*context); !auth.ok()) {     \
    reactor->Finish(ToGrpcStatus(auth));                                            \
    return reactor;                                                                 \
  }

grpc::ServerUnaryReactor* ControlService::CreateAggregation(
    grpc::CallbackServerContext* context, const v1::CreateAggregationRequest* request,
    v1::AggregationStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  FEDAGG_AUTHENTICATE_UNARY(context, reactor);
  // Answered from the node's workers: the accumulator's allocation and the first
  // checkpoint's write do not wait on this thread.
  context_.registry.CreateAsync(request->spec(), [reactor, response](absl::StatusOr<std::shared_ptr<Aggregation>> created) {
    if (created.ok()) *response = (*created)->Status();
    reactor->Finish(ToGrpcStatus(created.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::GetAggregation(grpc::CallbackServerContext* context,
                                                         const v1::GetAggregationRequest* request,
                                                         v1::AggregationStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  FEDAGG_AUTHENTICATE_UNARY(context, reactor);
  absl::StatusOr<std::shared_ptr<Aggregation>> found =
      context_.registry.Find(request->aggregation_id());
  if (found.ok()) *response = (*found)->Status();
  reactor->Finish(ToGrpcStatus(found.status()));
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::ListAggregations(grpc::CallbackServerContext* context,
                                                           const v1::ListAggregationsRequest*,
                                                           v1::ListAggregationsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  FEDAGG_AUTHENTICATE_UNARY(context, reactor);
  for (const auto& aggregation : context_.registry.List()) {
    *response->add_aggregations() = aggregation->Status();
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::SealAggregation(grpc::CallbackServerContext* context,
                                                          const v1::SealAggregationRequest* request,
                                                          v1::AggregationStatus* response) {
  return ApplyAtRoot(context, request->aggregation_id(), "seal", response,
                     [](Aggregation& aggregation, std::function<void()> answer) {
                       return aggregation.Seal(std::move(answer));
                     });
}

grpc::ServerUnaryReactor* ControlService::CancelAggregation(
    grpc::CallbackServerContext* context, const v1::CancelAggregationRequest* request,
    v1::AggregationStatus* response) {
  return ApplyAtRoot(context, request->aggregation_id(), "cancel", response,
                     [reason = request->reason()](Aggregation& aggregation, std::function<void()> answer) {
                       absl::Status cancelled = aggregation.Cancel(reason);
                       if (cancelled.ok()) answer();
                       return cancelled;
                     });
}

grpc::ServerUnaryReactor* ControlService::ApplyAtRoot(grpc::CallbackServerContext* context,
                                                      const std::string& aggregation_id, const char* verb,
                                                      v1::AggregationStatus* response, const RootAction& action) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  FEDAGG_AUTHENTICATE_UNARY(context, reactor);
  absl::StatusOr<std::shared_ptr<Aggregation>> found = context_.registry.Find(aggregation_id);
  if (!found.ok()) {
    reactor->Finish(ToGrpcStatus(found.status()));
    return reactor;
  }
  std::shared_ptr<Aggregation> aggregation = *std::move(found);
  const absl::Status status =
      context_.registry.is_intermediate()
          ? absl::FailedPreconditionError(
                absl::StrCat("this is an intermediate aggregator: ", verb, " the aggregation at the root"))
          : action(*aggregation, [reactor, response, aggregation] {
              *response = aggregation->Status();
              reactor->Finish(grpc::Status::OK);
            });
  if (!status.ok()) {
    *response = aggregation->Status();
    reactor->Finish(ToGrpcStatus(status));
  }
  return reactor;
}

grpc::ServerWriteReactor<v1::ResultChunk>* ControlService::GetResult(
    grpc::CallbackServerContext* context, const v1::GetResultRequest* request) {
  if (absl::Status auth = context_.authenticator.Check(*context); !auth.ok()) {
    return FailedStream<v1::ResultChunk>(auth);
  }
  absl::StatusOr<std::shared_ptr<Aggregation>> found =
      context_.registry.Find(request->aggregation_id());
  if (!found.ok()) return FailedStream<v1::ResultChunk>(found.status());
  absl::StatusOr<std::shared_ptr<const AggregateResult>> result = (*found)->Result();
  if (!result.ok()) return FailedStream<v1::ResultChunk>(result.status());
  return new ResultReactor(ResultStream(*result, (*found)->Status()));
}

grpc::ServerWriteReactor<v1::AggregationStatus>* ControlService::WatchAggregation(
    grpc::CallbackServerContext* context, const v1::GetAggregationRequest* request) {
  if (absl::Status auth = context_.authenticator.Check(*context); !auth.ok()) {
    return FailedStream<v1::AggregationStatus>(auth);
  }
  absl::StatusOr<std::shared_ptr<Aggregation>> found =
      context_.registry.Find(request->aggregation_id());
  if (!found.ok()) return FailedStream<v1::AggregationStatus>(found.status());
  std::shared_ptr<PushStream<v1::AggregationStatus>> stream =
      PushStream<v1::AggregationStatus>::Create();
  std::weak_ptr<PushStream<v1::AggregationStatus>> weak_stream = stream;
  std::weak_ptr<Aggregation> weak_aggregation = *found;
  auto send_status = [weak_stream, weak_aggregation] {
    std::shared_ptr<PushStream<v1::AggregationStatus>> s = weak_stream.lock();
    std::shared_ptr<Aggregation> a = weak_aggregation.lock();
    if (s == nullptr || a == nullptr) return;
    v1::AggregationStatus status = a->Status();
    const bool final = IsFinished(status.state());
    s->Push(std::move(status));
    if (final) s->Close(grpc::Status::OK);
  };
  const int handle = (*found)->AddWatcher(send_status);
  stream->SetOnDone([weak_aggregation, handle] {
    if (std::shared_ptr<Aggregation> a = weak_aggregation.lock()) a->RemoveWatcher(handle);
  });
  send_status();
  return stream.get();
}

}  // namespace fedagg
