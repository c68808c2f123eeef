// The load generator's logical client: a chain of Contribute streams, each a
// ClientBidiReactor, until the update is answered for good.
#include "client_stub/loadgen/logical_client.h"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "client_stub/update_encoder.h"
#include "service/rpc/grpc_status.h"

namespace fedagg::loadgen {
namespace {

// How one stream is meant to end.
enum class StreamPlan {
  kCutHalfway,          // fault: cancel after about half of the update's messages
  kDropBeforeAnswer,    // fault: cancel right after UpdateEnd, never reading the answer
  kWhole,               // send the update and read the answer
};

struct StreamResult {
  StreamPlan plan;
  std::optional<absl::Status> answer;  // OK for an ack, the Rejection otherwise
  absl::Status stream_status;
};

class LogicalClient;

// One Contribute stream: hello, welcome, one update, its answer, half-close.
class StreamAttempt final : public grpc::ClientBidiReactor<v1::ContributeRequest, v1::ContributeResponse> {
 public:
  StreamAttempt(LogicalClient* owner, const ClientSettings& settings, StreamPlan plan)
      : owner_(owner),
        settings_(settings),
        plan_(plan),
        encoder_(settings.aggregation_id, /*client_id=*/"", *settings.update, settings.chunk_bytes) {}

  void Start(v1::Aggregation::Stub* stub) {
    if (!settings_.token.empty()) context_.AddMetadata("authorization", "Bearer " + settings_.token);
    stub->async()->Contribute(&context_, this);
    request_.mutable_hello()->set_protocol_version(1);
    request_.mutable_hello()->set_client_id(settings_.client_id);
    StartWrite(&request_);
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return;  // the stream is over; OnDone tells how
    if (!hello_written_) {
      hello_written_ = true;
      StartRead(&response_);  // the Welcome
      return;
    }
    if (!encoder_.done()) {
      SendNext();
    } else if (plan_ == StreamPlan::kDropBeforeAnswer) {
      context_.TryCancel();
    } else {
      StartRead(&response_);  // the answer
    }
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (!welcomed_) {
      welcomed_ = true;
      if (!response_.has_welcome()) {
        answer_ = absl::InternalError("the server answered Hello with something other than Welcome");
        StartWritesDone();
        return;
      }
      SendNext();
      return;
    }
    if (response_.has_ack()) {
      answer_ = absl::OkStatus();
    } else if (response_.has_rejection()) {
      answer_ = absl::Status(static_cast<absl::StatusCode>(response_.rejection().code()),
                             response_.rejection().message());
    } else {
      answer_ = absl::InternalError("unexpected response while waiting for an ack");
    }
    StartWritesDone();
  }

  void OnDone(const grpc::Status& status) override;

 private:
  // Writes the next message, after the slow client's pause when it is one.
  void SendNext() {
    if (!settings_.faults.slow) {
      WriteNextPiece();
      return;
    }
    AddHold();  // keeps OnDone away while the alarm is pending
    alarms_.push_back(std::make_unique<grpc::Alarm>());
    alarms_.back()->Set(absl::ToChronoTime(absl::Now() + settings_.slow_delay), [this](bool) {
      WriteNextPiece();
      RemoveHold();
    });
  }

  void WriteNextPiece() {
    if (plan_ == StreamPlan::kCutHalfway && encoder_.pieces_produced() >= std::max<int64_t>(1, encoder_.total_pieces() / 2)) {
      context_.TryCancel();
      return;
    }
    encoder_.Next(request_);
    if (settings_.durable && request_.has_header()) request_.mutable_header()->set_ack_level(v1::DURABLE);
    StartWrite(&request_);
  }

  LogicalClient* owner_;
  const ClientSettings& settings_;
  const StreamPlan plan_;
  UpdateEncoder encoder_;
  grpc::ClientContext context_;
  v1::ContributeRequest request_;
  v1::ContributeResponse response_;
  std::vector<std::unique_ptr<grpc::Alarm>> alarms_;
  bool hello_written_ = false;
  bool welcomed_ = false;
  std::optional<absl::Status> answer_;
};

class LogicalClient {
 public:
  LogicalClient(v1::Aggregation::Stub* stub, ClientSettings settings, std::function<void(const ClientOutcome&)> done)
      : stub_(stub),
        settings_(std::move(settings)),
        done_(std::move(done)),
        start_(absl::Now()),
        backoff_(settings_.initial_backoff) {
    // Faults first, in this order, then the update sent whole.
    if (settings_.faults.disconnect) plans_.push_back(StreamPlan::kCutHalfway);
    if (settings_.faults.lost_ack) plans_.push_back(StreamPlan::kDropBeforeAnswer);
  }

  void StartNextStream() {
    StreamPlan plan = StreamPlan::kWhole;
    if (next_plan_ < plans_.size()) plan = plans_[next_plan_++];
    else ++whole_sends_;
    (new StreamAttempt(this, settings_, plan))->Start(stub_);
  }

  // Called from the stream's OnDone; may delete this.
  void StreamEnded(const StreamResult& result) {
    if (result.plan != StreamPlan::kWhole) {
      StartNextStream();  // the fault was played; now the next stream
      return;
    }
    absl::Status status = result.answer.has_value() ? *result.answer : result.stream_status;
    if (!result.answer.has_value() && status.ok()) {
      status = absl::UnavailableError("the server closed the stream without answering the update");
    }
    const bool again_shortly =
        status.code() == absl::StatusCode::kUnavailable || status.code() == absl::StatusCode::kAborted;
    if (status.ok()) return Finish(ClientOutcome::Result::kAcked, status);
    if (status.code() == absl::StatusCode::kAlreadyExists) return Finish(ClientOutcome::Result::kAlreadyCounted, status);
    if (!again_shortly || whole_sends_ >= settings_.max_attempts) return Finish(ClientOutcome::Result::kRefused, status);
    ++retried_;
    alarms_.push_back(std::make_unique<grpc::Alarm>());
    alarms_.back()->Set(absl::ToChronoTime(absl::Now() + backoff_), [this](bool) { StartNextStream(); });
    backoff_ = std::min(backoff_ * 2, absl::Seconds(1));
  }

 private:
  void Finish(ClientOutcome::Result result, const absl::Status& status) {
    ClientOutcome outcome;
    outcome.result = result;
    if (result == ClientOutcome::Result::kRefused) outcome.refusal = status;
    outcome.latency = absl::Now() - start_;
    outcome.retried = retried_;
    std::function<void(const ClientOutcome&)> done = std::move(done_);
    delete this;
    done(outcome);
  }

  v1::Aggregation::Stub* stub_;
  const ClientSettings settings_;
  std::function<void(const ClientOutcome&)> done_;
  const absl::Time start_;
  absl::Duration backoff_;
  std::vector<StreamPlan> plans_;
  size_t next_plan_ = 0;
  int whole_sends_ = 0;
  int retried_ = 0;
  std::vector<std::unique_ptr<grpc::Alarm>> alarms_;
};

void StreamAttempt::OnDone(const grpc::Status& status) {
  StreamResult result{plan_, answer_, FromGrpcStatus(status)};
  LogicalClient* owner = owner_;
  delete this;
  owner->StreamEnded(result);
}

}  // namespace

void StartLogicalClient(v1::Aggregation::Stub* stub, ClientSettings settings,
                        std::function<void(const ClientOutcome&)> done) {
  (new LogicalClient(stub, std::move(settings), std::move(done)))->StartNextStream();
}

}  // namespace fedagg::loadgen
