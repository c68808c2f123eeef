// SubmitReactor: one update over a client stream.
#include "service/rpc/submit_reactor.h"

#include <atomic>
#include <memory>
#include <optional>

#include "service/rpc/grpc_status.h"
#include "service/rpc/raw_chunk.h"
#include "service/rpc/raw_message.h"
#include "service/rpc/update_stream_limits.h"

namespace fedagg {

SubmitReactor::SubmitReactor(grpc::CallbackServerContext* context, ServiceContext& service,
                             grpc::ByteBuffer* response)
    : service_(service),
      assembler_(service),
      stall_(service.stall_sweeper, [this] { EvictStalled(); }),
      response_(response) {
  absl::StatusOr<StreamLimiter::Slot> slot = AdmitStream(*context, service);
  if (!slot.ok()) {
    End(ToGrpcStatus(slot.status()));
    return;
  }
  stream_slot_ = *std::move(slot);
  StartRead(&raw_request_);
}

void SubmitReactor::OnDone() {
  stream_slot_ = {};
  stall_.Shutdown();  // no eviction runs after this
  delete this;
}

void SubmitReactor::OnReadDone(bool ok) {
  if (!stall_.MessageArrived()) return;  // the update was evicted; the call is ending
  if (!ok) {
    End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                     "the Submit stream ended before UpdateEnd; the update was discarded"));
  } else if (!Handle()) {
    stall_.MessageHandled();  // a Begin completion may own the assembler now
    return;
  }
  if (!assembler_.active()) stall_.UpdateClosed();
  stall_.MessageHandled();
  if (!finished_) StartRead(&raw_request_);
}

bool SubmitReactor::Handle() {
  // A chunk is read in place (its payload copied once, into the update); every other
  // request is parsed.
  if (std::optional<RawChunk> chunk = ReadRawChunk(raw_request_, v1::SubmitRequest::kChunkFieldNumber)) {
    raw_request_.Clear();
    if (absl::Status added = assembler_.AddChunk(*chunk); !added.ok()) End(ToGrpcStatus(added));
    return true;
  }
  absl::Status status = ParseRawMessage(raw_request_, &request_);
  if (!status.ok()) {
    End(ToGrpcStatus(status));
    return true;
  }
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
                           } else {
                             stall_.UpdateOpened();
                           }
                           if (handoff->exchange(2) == 1 && begun.ok()) StartRead(&raw_request_);
                         });
        // Begun inline: carry on here (OnReadDone reads on unless it failed and ended the
        // call). Otherwise the completion does.
        return handoff->exchange(1) == 2;
      }
    case v1::SubmitRequest::kChunk:
      status = assembler_.AddChunk(request_.chunk());
      break;
    case v1::SubmitRequest::kEnd: {
      const std::string aggregation_id = assembler_.aggregation_id();
      stall_.UpdateClosed();
      // The call is answered when the update is counted (after the parent's claim on an
      // intermediate aggregator, after a checkpoint for DURABLE); nothing more is read.
      status = assembler_.End(request_.end(), [this, aggregation_id](
                                                  absl::StatusOr<UpdateAssembler::Counted> counted) {
        if (!counted.ok()) {
          End(ToGrpcStatus(counted.status()));
          return;
        }
        v1::SubmitResponse response;
        response.mutable_ack()->set_aggregation_id(aggregation_id);
        response.mutable_ack()->set_contributions(counted->contributions);
        response.mutable_ack()->set_level(counted->level);
        *response_ = SerializeRawMessage(response);
        End(grpc::Status::OK);
      });
      if (!status.ok()) break;
      return false;
    }
    default:
      status = absl::InvalidArgumentError("empty SubmitRequest: set header, chunk or end");
  }
  if (!status.ok()) End(ToGrpcStatus(status));
  return true;
}

void SubmitReactor::EvictStalled() {
  const std::string aggregation_id = assembler_.aggregation_id();
  assembler_.Abandon();
  service_.metrics.stalled_updates_evicted.Increment();
  End(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                   StalledUpdateMessage(aggregation_id, service_.stall_sweeper->timeout())));
}

void SubmitReactor::End(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  assembler_.Abandon();
  Finish(status);
}

}  // namespace fedagg
