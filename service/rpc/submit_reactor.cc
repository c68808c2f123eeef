// SubmitReactor: one update over a client stream.
#include "service/rpc/submit_reactor.h"

#include <atomic>
#include <memory>

#include "service/rpc/grpc_status.h"

namespace fedagg {

SubmitReactor::SubmitReactor(grpc::CallbackServerContext* context, ServiceContext& service,
                             v1::SubmitResponse* response)
    : assembler_(service.registry, service.metrics, service.max_update_bytes), response_(response) {
  if (absl::Status auth = service.authenticator.Check(*context); !auth.ok()) {
    End(ToGrpcStatus(auth));
    return;
  }
  StartRead(&request_);
}

void SubmitReactor::OnReadDone(bool ok) {
  if (!ok) {
    End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                     "the Submit stream ended before UpdateEnd; the update was discarded"));
    return;
  }
  absl::Status status;
  switch (request_.kind_case()) {
    case v1::SubmitRequest::kHeader:
      if (header_seen_) {
        status = absl::InvalidArgumentError("Submit carries one update: a second header arrived");
        break;
      }
      header_seen_ = true;
      {
        // Whichever of this handler and Begin's completion finishes second reads on.
        auto handoff = std::make_shared<std::atomic<int>>(0);  // 1: handler returned, 2: done
        assembler_.Begin(request_.header(), request_.header().client_id(),
                         [this, handoff](absl::Status begun) {
                           if (!begun.ok()) {
                             End(ToGrpcStatus(begun));
                             return;
                           }
                           if (handoff->exchange(2) == 1) StartRead(&request_);
                         });
        if (handoff->exchange(1) == 2) StartRead(&request_);
      }
      return;
    case v1::SubmitRequest::kChunk:
      status = assembler_.AddChunk(request_.chunk());
      break;
    case v1::SubmitRequest::kEnd: {
      const std::string aggregation_id = assembler_.aggregation_id();
      absl::StatusOr<int64_t> counted = assembler_.End(request_.end());
      if (!counted.ok()) {
        status = counted.status();
        break;
      }
      response_->mutable_ack()->set_aggregation_id(aggregation_id);
      response_->mutable_ack()->set_contributions(*counted);
      // The call is answered when the ack's level is known (after a checkpoint, for DURABLE).
      assembler_.AwaitAckLevel([this](v1::AckLevel level) {
        response_->mutable_ack()->set_level(level);
        End(grpc::Status::OK);
      });
      return;
    }
    default:
      status = absl::InvalidArgumentError("empty SubmitRequest: set header, chunk or end");
  }
  if (!status.ok()) {
    End(ToGrpcStatus(status));
    return;
  }
  StartRead(&request_);
}

void SubmitReactor::End(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  assembler_.Abandon();
  Finish(status);
}

}  // namespace fedagg
