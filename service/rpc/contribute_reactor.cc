// ContributeReactor: the bidirectional contribution stream.
#include "service/rpc/contribute_reactor.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "service/rpc/grpc_status.h"
#include "service/rpc/raw_chunk.h"
#include "service/rpc/raw_message.h"
#include "service/rpc/update_stream_limits.h"

namespace fedagg {
namespace {
// Responses queued before the reactor stops reading until the client catches up.
constexpr size_t kMaxQueuedResponses = 8;
}  // namespace

ContributeReactor::ContributeReactor(grpc::CallbackServerContext* context, ServiceContext& service)
    : service_(service), assembler_(service), stall_(service.stall_sweeper, [this] { EvictStalled(); }) {
  service_.metrics.active_streams.Add(1);
  absl::StatusOr<StreamLimiter::Slot> slot = AdmitStream(*context, service);
  if (!slot.ok()) {
    MutexLock lock(&mu_);
    finished_ = true;
    Finish(ToGrpcStatus(slot.status()));
    return;
  }
  stream_slot_ = *std::move(slot);
  StartRead(&raw_request_);
}

void ContributeReactor::OnDone() {
  service_.metrics.active_streams.Add(-1);
  stream_slot_ = {};
  // Every path that ends the stream discarded the update first; once the watch is shut
  // down no eviction runs, so nothing touches the server's state after.
  stall_.Shutdown();
  delete this;
}

void ContributeReactor::OnReadDone(bool ok) {
  if (!stall_.MessageArrived()) return;  // the update was evicted; the stream is finishing
  bool read_on = false;
  if (!ok) {
    // The client half-closed or the stream broke: an update in progress is discarded.
    assembler_.Abandon();
    FinishWhenDrained(grpc::Status::OK);
  } else {
    // A chunk is read in place (its payload copied once, into the update); every other
    // request is parsed.
    std::optional<RawChunk> chunk;
    if (phase_ != Phase::kAwaitHello) chunk = ReadRawChunk(raw_request_, v1::ContributeRequest::kChunkFieldNumber);
    Outcome outcome;
    if (chunk.has_value()) {
      raw_request_.Clear();
      outcome = HandleChunk(*chunk);
    } else {
      absl::Status parsed = ParseRawMessage(raw_request_, &request_);
      outcome = parsed.ok() ? Handle(request_) : Outcome{ToGrpcStatus(parsed)};
    }
    if (outcome.end.has_value()) {
      assembler_.Abandon();
      FinishWhenDrained(*outcome.end);
    }
    // A paused read belongs to Begin's completion from here on: the assembler is its.
    if (outcome.paused) {
      stall_.MessageHandled();
      return;
    }
    read_on = !outcome.end.has_value();
  }
  if (!assembler_.active()) stall_.UpdateClosed();
  stall_.MessageHandled();
  if (read_on) ContinueReading();
}

void ContributeReactor::EvictStalled() {
  const std::string aggregation_id = assembler_.aggregation_id();
  assembler_.Abandon();
  phase_ = Phase::kIdle;
  service_.metrics.stalled_updates_evicted.Increment();
  FinishWhenDrained(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                 StalledUpdateMessage(aggregation_id, service_.stall_sweeper->timeout())));
}

void ContributeReactor::ContinueReading() {
  MutexLock lock(&mu_);
  if (outbox_.size() >= kMaxQueuedResponses) {
    read_paused_ = true;  // OnWriteDone resumes reading
  } else {
    StartRead(&raw_request_);
  }
}

ContributeReactor::Outcome ContributeReactor::Handle(const v1::ContributeRequest& request) {
  using Kind = v1::ContributeRequest::KindCase;
  if (phase_ == Phase::kAwaitHello) {
    if (request.kind_case() != Kind::kHello) {
      return {grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                           "the first message of a Contribute stream must be Hello")};
    }
    if (request.hello().protocol_version() == 0) {
      return {grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           "Hello.protocol_version is 0; this server speaks version 1")};
    }
    if (request.hello().client_id().empty()) {
      return {grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           "Hello.client_id is empty; it is the exactly-once key of your updates")};
    }
    client_id_ = request.hello().client_id();
    v1::ContributeResponse response;
    v1::Welcome* welcome = response.mutable_welcome();
    welcome->set_protocol_version(std::min(request.hello().protocol_version(), kProtocolVersion));
    for (const auto& aggregation : service_.registry.OpenAggregations(service_.welcome_aggregations, client_id_)) {
      *welcome->add_open_aggregations() = aggregation->config().proto;
    }
    phase_ = Phase::kIdle;
    Send(std::move(response));
    return {};
  }
  switch (request.kind_case()) {
    case Kind::kHello:
      return {grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "Hello sent twice on one stream")};
    case Kind::kHeader: {
      // A header while an update is in progress: the previous one is incomplete.
      if (phase_ == Phase::kInUpdate) {
        const std::string previous = assembler_.aggregation_id();
        assembler_.Abandon();
        Reject(absl::InvalidArgumentError(
                   "a new update header arrived before the previous update ended; the previous "
                   "update was discarded"),
               previous);
      }
      // Begin completes inline for a known aggregation, or later when an intermediate
      // aggregator first asks its parent. Whichever of this handler and the completion
      // finishes second continues the read loop.
      auto handoff = std::make_shared<std::atomic<int>>(0);  // 1: handler returned, 2: done
      const std::string aggregation_id = request.header().aggregation_id();
      assembler_.Begin(request.header(), client_id_, [this, handoff, aggregation_id](absl::Status begun) {
        if (!begun.ok()) {
          Reject(begun, aggregation_id);
          phase_ = Phase::kSkippingUpdate;
        } else {
          phase_ = Phase::kInUpdate;
          stall_.UpdateOpened();
        }
        if (handoff->exchange(2) == 1) ContinueReading();
      });
      return Outcome{std::nullopt, handoff->exchange(1) != 2};
    }
    case Kind::kChunk:
      return HandleChunk(request.chunk());
    case Kind::kEnd: {
      if (phase_ == Phase::kSkippingUpdate) {
        phase_ = Phase::kIdle;
        return {};
      }
      if (phase_ != Phase::kInUpdate) {
        Reject(absl::FailedPreconditionError("update end without an update header"), "");
        return {};
      }
      const std::string aggregation_id = assembler_.aggregation_id();
      {
        MutexLock lock(&mu_);
        ++awaiting_acks_;
      }
      // The answer comes when the update is counted (after the parent's claim on an
      // intermediate aggregator, after a checkpoint for DURABLE), while this stream goes
      // on reading the next update.
      absl::Status ended = assembler_.End(
          request.end(), [this, aggregation_id](absl::StatusOr<UpdateAssembler::Counted> counted) {
            v1::ContributeResponse response;
            if (counted.ok()) {
              response.mutable_ack()->set_aggregation_id(aggregation_id);
              response.mutable_ack()->set_contributions(counted->contributions);
              response.mutable_ack()->set_level(counted->level);
            } else {
              response = RejectionOf(counted.status(), aggregation_id);
            }
            MutexLock lock(&mu_);
            --awaiting_acks_;
            SendLocked(std::move(response));
            MaybeFinishLocked();
          });
      phase_ = Phase::kIdle;
      if (!ended.ok()) {
        {
          MutexLock lock(&mu_);
          --awaiting_acks_;
        }
        Reject(ended, aggregation_id);
      }
      return {};
    }
    default:
      return {grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           "empty ContributeRequest: set hello, header, chunk or end")};
  }
}

template <typename ChunkMessage>
ContributeReactor::Outcome ContributeReactor::HandleChunk(const ChunkMessage& chunk) {
  if (phase_ == Phase::kSkippingUpdate) return {};
  if (phase_ != Phase::kInUpdate) {
    Reject(absl::FailedPreconditionError("chunk outside an update: send an update header first"), "");
    phase_ = Phase::kSkippingUpdate;
    return {};
  }
  if (absl::Status added = assembler_.AddChunk(chunk); !added.ok()) {
    Reject(added, assembler_.aggregation_id());
    phase_ = Phase::kSkippingUpdate;
  }
  return {};
}

v1::ContributeResponse ContributeReactor::RejectionOf(const absl::Status& status, const std::string& aggregation_id) {
  v1::ContributeResponse response;
  v1::Rejection* rejection = response.mutable_rejection();
  rejection->set_aggregation_id(aggregation_id);
  rejection->set_code(static_cast<int32_t>(status.code()));
  rejection->set_message(std::string(status.message()));
  return response;
}

void ContributeReactor::Reject(const absl::Status& status, const std::string& aggregation_id) {
  Send(RejectionOf(status, aggregation_id));
}

void ContributeReactor::Send(v1::ContributeResponse response) {
  MutexLock lock(&mu_);
  SendLocked(std::move(response));
}

void ContributeReactor::SendLocked(v1::ContributeResponse response) {
  if (finished_) return;
  outbox_.push_back(SerializeRawMessage(response));
  if (!writing_) {
    writing_ = true;
    StartWrite(&outbox_.front());
  }
}

void ContributeReactor::OnWriteDone(bool ok) {
  MutexLock lock(&mu_);
  outbox_.pop_front();
  writing_ = false;
  if (!ok) {
    // The client is gone; reads will fail too and finish the stream.
    outbox_.clear();
  } else if (!outbox_.empty()) {
    writing_ = true;
    StartWrite(&outbox_.front());
  }
  if (read_paused_ && outbox_.size() < kMaxQueuedResponses && !finish_status_.has_value()) {
    read_paused_ = false;
    StartRead(&raw_request_);
  }
  MaybeFinishLocked();
}

void ContributeReactor::FinishWhenDrained(grpc::Status status) {
  MutexLock lock(&mu_);
  if (!finish_status_.has_value()) finish_status_ = std::move(status);
  MaybeFinishLocked();
}

void ContributeReactor::MaybeFinishLocked() {
  if (finished_ || !finish_status_.has_value() || writing_ || !outbox_.empty() || awaiting_acks_ > 0) return;
  finished_ = true;
  Finish(*finish_status_);
}

}  // namespace fedagg
