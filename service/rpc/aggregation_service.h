// The fedagg.v1.Aggregation service: Contribute (bidi stream), GetTask and Submit.
#ifndef FEDAGG_SERVICE_RPC_AGGREGATION_SERVICE_H_
#define FEDAGG_SERVICE_RPC_AGGREGATION_SERVICE_H_

#include "fedagg/v1/aggregation.grpc.pb.h"
#include "service/rpc/service_context.h"

namespace fedagg {

class AggregationService final : public v1::Aggregation::CallbackService {
 public:
  explicit AggregationService(ServiceContext& context) : context_(context) {}

  grpc::ServerBidiReactor<v1::ContributeRequest, v1::ContributeResponse>* Contribute(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetTask(grpc::CallbackServerContext* context,
                                    const v1::GetTaskRequest* request,
                                    v1::GetTaskResponse* response) override;
  grpc::ServerReadReactor<v1::SubmitRequest>* Submit(grpc::CallbackServerContext* context,
                                                     v1::SubmitResponse* response) override;

 private:
  ServiceContext& context_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_AGGREGATION_SERVICE_H_
