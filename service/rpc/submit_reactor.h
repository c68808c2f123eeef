// SubmitReactor: one Aggregation.Submit client stream — a single update (header, chunks,
// end) for transports without bidirectional streams, answered once with the ack or the
// rejection as the call's status. A request that is not a valid protobuf ends the call
// with INVALID_ARGUMENT. Same assembly, accounting and stream limits as
// Contribute (update_stream_limits.h): a stalled update is evicted with DEADLINE_EXCEEDED.
#ifndef FEDAGG_SERVICE_RPC_SUBMIT_REACTOR_H_
#define FEDAGG_SERVICE_RPC_SUBMIT_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include "fedagg/v1/aggregation.grpc.pb.h"
#include "service/rpc/service_context.h"
#include "service/rpc/stall_watch.h"
#include "service/rpc/stream_limiter.h"
#include "service/rpc/update_assembler.h"

namespace fedagg {

class SubmitReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  SubmitReactor(grpc::CallbackServerContext* context, ServiceContext& service,
                grpc::ByteBuffer* response);

  void OnReadDone(bool ok) override;
  void OnDone() override;

 private:
  // Handles one request; false when the call ended or a Begin completion reads on.
  bool Handle();
  void End(const grpc::Status& status);
  // StallWatch's eviction: discards the update and ends the call.
  void EvictStalled();

  ServiceContext& service_;
  StreamLimiter::Slot stream_slot_;
  UpdateAssembler assembler_;
  StallWatch stall_;
  grpc::ByteBuffer* response_;
  grpc::ByteBuffer raw_request_;  // the read target (raw_message.h says why raw)
  v1::SubmitRequest request_;
  bool header_seen_ = false;
  bool finished_ = false;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_SUBMIT_REACTOR_H_
