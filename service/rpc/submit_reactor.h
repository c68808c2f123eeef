// SubmitReactor: one Aggregation.Submit client stream — a single update (header, chunks,
// end) for transports without bidirectional streams, answered once with the ack or the
// rejection as the call's status. Same assembly and accounting as Contribute.
#ifndef FEDAGG_SERVICE_RPC_SUBMIT_REACTOR_H_
#define FEDAGG_SERVICE_RPC_SUBMIT_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include "fedagg/v1/aggregation.grpc.pb.h"
#include "service/rpc/service_context.h"
#include "service/rpc/update_assembler.h"

namespace fedagg {

class SubmitReactor final : public grpc::ServerReadReactor<v1::SubmitRequest> {
 public:
  SubmitReactor(grpc::CallbackServerContext* context, ServiceContext& service,
                v1::SubmitResponse* response);

  void OnReadDone(bool ok) override;
  void OnDone() override { delete this; }

 private:
  void End(const grpc::Status& status);

  UpdateAssembler assembler_;
  v1::SubmitResponse* response_;
  v1::SubmitRequest request_;
  bool header_seen_ = false;
  bool finished_ = false;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_SUBMIT_REACTOR_H_
