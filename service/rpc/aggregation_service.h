// The fedagg.v1.Aggregation service: Contribute (bidi stream), GetTask and Submit.
#ifndef FEDAGG_SERVICE_RPC_AGGREGATION_SERVICE_H_
#define FEDAGG_SERVICE_RPC_AGGREGATION_SERVICE_H_

#include "absl/strings/string_view.h"
#include "fedagg/v1/aggregation.grpc.pb.h"
#include "service/rpc/service_context.h"

namespace fedagg {

// Contribute and Submit take raw bytes and parse them themselves (raw_message.h).
class AggregationService final
    : public v1::Aggregation::WithRawCallbackMethod_Contribute<
          v1::Aggregation::WithCallbackMethod_GetTask<v1::Aggregation::WithRawCallbackMethod_Submit<v1::Aggregation::Service>>> {
 public:
  // The methods registered raw, by path.
  static constexpr absl::string_view kRawMethods[] = {"/fedagg.v1.Aggregation/Contribute",
                                                      "/fedagg.v1.Aggregation/Submit"};

  explicit AggregationService(ServiceContext& context) : context_(context) {}

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Contribute(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetTask(grpc::CallbackServerContext* context,
                                    const v1::GetTaskRequest* request,
                                    v1::GetTaskResponse* response) override;
  grpc::ServerReadReactor<grpc::ByteBuffer>* Submit(grpc::CallbackServerContext* context,
                                                    grpc::ByteBuffer* response) override;

 private:
  ServiceContext& context_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_AGGREGATION_SERVICE_H_
