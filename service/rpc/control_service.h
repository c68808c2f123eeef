// The fedagg.v1.Control service: the server placement's operations — create, inspect,
// list, seal and cancel aggregations, stream results in chunks, watch state changes.
#ifndef FEDAGG_SERVICE_RPC_CONTROL_SERVICE_H_
#define FEDAGG_SERVICE_RPC_CONTROL_SERVICE_H_

#include <functional>
#include <string>

#include "fedagg/v1/control.grpc.pb.h"
#include "service/rpc/service_context.h"

namespace fedagg {

class ControlService final : public v1::Control::CallbackService {
 public:
  explicit ControlService(ServiceContext& context) : context_(context) {}

  grpc::ServerUnaryReactor* CreateAggregation(grpc::CallbackServerContext* context,
                                              const v1::CreateAggregationRequest* request,
                                              v1::AggregationStatus* response) override;
  grpc::ServerUnaryReactor* GetAggregation(grpc::CallbackServerContext* context,
                                           const v1::GetAggregationRequest* request,
                                           v1::AggregationStatus* response) override;
  grpc::ServerUnaryReactor* ListAggregations(grpc::CallbackServerContext* context,
                                             const v1::ListAggregationsRequest* request,
                                             v1::ListAggregationsResponse* response) override;
  grpc::ServerUnaryReactor* SealAggregation(grpc::CallbackServerContext* context,
                                            const v1::SealAggregationRequest* request,
                                            v1::AggregationStatus* response) override;
  grpc::ServerUnaryReactor* CancelAggregation(grpc::CallbackServerContext* context,
                                              const v1::CancelAggregationRequest* request,
                                              v1::AggregationStatus* response) override;
  grpc::ServerWriteReactor<v1::ResultChunk>* GetResult(grpc::CallbackServerContext* context,
                                                       const v1::GetResultRequest* request) override;
  grpc::ServerWriteReactor<v1::AggregationStatus>* WatchAggregation(
      grpc::CallbackServerContext* context, const v1::GetAggregationRequest* request) override;

 private:
  // Seal and Cancel: refused on intermediate aggregators, applied to the aggregation
  // at the root; answers with its status afterwards. An action that returns OK calls
  // its `answer` once, now or later on another thread (a seal, once the finalization is
  // over): the RPC thread never waits for it. One that fails does not call it.
  using RootAction = std::function<absl::Status(Aggregation&, std::function<void()> answer)>;
  grpc::ServerUnaryReactor* ApplyAtRoot(grpc::CallbackServerContext* context,
                                        const std::string& aggregation_id, const char* verb,
                                        v1::AggregationStatus* response, const RootAction& action);

  ServiceContext& context_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_CONTROL_SERVICE_H_
