// The fedagg.v1.Aggregation service.
#include "service/rpc/aggregation_service.h"

#include "service/rpc/contribute_reactor.h"
#include "service/rpc/grpc_status.h"
#include "service/rpc/submit_reactor.h"

namespace fedagg {
namespace {
constexpr int kMaxTasks = 64;
}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
AggregationService::Contribute(grpc::CallbackServerContext* context) {
  return new ContributeReactor(context, context_);
}

grpc::ServerUnaryReactor* AggregationService::GetTask(grpc::CallbackServerContext* context,
                                                      const v1::GetTaskRequest* request,
                                                      v1::GetTaskResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status auth = context_.authenticator.Check(*context); !auth.ok()) {
    reactor->Finish(ToGrpcStatus(auth));
    return reactor;
  }
  const int wanted = request->max_tasks() <= 0 ? 1 : std::min(request->max_tasks(), kMaxTasks);
  response->set_protocol_version(kProtocolVersion);
  for (const auto& aggregation : context_.registry.OpenAggregations(wanted, request->client_id())) {
    *response->add_tasks() = aggregation->config().proto;
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerReadReactor<grpc::ByteBuffer>* AggregationService::Submit(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new SubmitReactor(context, context_, response);
}

}  // namespace fedagg
