// fedagg-raw-sink: the baseline of the ingest benchmark. A bare gRPC server, built with
// the same gRPC library and the same receive-size limit as fedagg-server, that serves
// Aggregation.Contribute with the least work the protocol allows: it answers Hello with an
// empty Welcome, reads every message and discards it, and answers each UpdateEnd with an
// Ack. No validation, no checksum, no buffering, no reduction. fedagg-loadgen --sink sends
// it exactly the messages it sends fedagg-server, so the ratio of the two throughputs is
// what the service's own work costs.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <deque>
#include <memory>

#include "service/core/abseil_deadlock_detection.h"
#include "service/core/program_usage.h"
#include "absl/flags/flag.h"
#include "fedagg/v1/aggregation.grpc.pb.h"
#include "service/core/mutex.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50061", "address:port to serve on");

namespace fedagg {
namespace {

// One Contribute stream: one read in flight, writes queued one at a time.
class SinkReactor final : public grpc::ServerBidiReactor<v1::ContributeRequest, v1::ContributeResponse> {
 public:
  SinkReactor() { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      MutexLock lock(&mu_);
      reads_done_ = true;
      MaybeFinish();
      return;
    }
    if (request_.has_hello()) {
      v1::ContributeResponse welcome;
      welcome.mutable_welcome()->set_protocol_version(1);
      Queue(std::move(welcome));
    } else if (request_.has_end()) {
      v1::ContributeResponse ack;
      ack.mutable_ack()->set_contributions(++updates_);
      Queue(std::move(ack));
    }
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&mu_);
    queue_.pop_front();
    writing_ = false;
    if (!ok) queue_.clear();
    if (!queue_.empty()) {
      writing_ = true;
      StartWrite(&queue_.front());
    }
    MaybeFinish();
  }

  void OnDone() override { delete this; }

 private:
  void Queue(v1::ContributeResponse response) {
    MutexLock lock(&mu_);
    queue_.push_back(std::move(response));
    if (!writing_) {
      writing_ = true;
      StartWrite(&queue_.front());
    }
  }
  void MaybeFinish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reads_done_ && !writing_ && !finished_) {
      finished_ = true;
      Finish(grpc::Status::OK);
    }
  }

  v1::ContributeRequest request_;
  int64_t updates_ = 0;
  Mutex mu_;
  std::deque<v1::ContributeResponse> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

class SinkService final : public v1::Aggregation::CallbackService {
  grpc::ServerBidiReactor<v1::ContributeRequest, v1::ContributeResponse>* Contribute(
      grpc::CallbackServerContext*) override {
    return new SinkReactor();
  }
};

}  // namespace
}  // namespace fedagg

int main(int argc, char** argv) {
  fedagg::TurnOffAbseilDeadlockDetection();
  fedagg::SetProgramUsage("A bare Contribute sink: the baseline of fedagg's ingest benchmark.");
  fedagg::ParseProgramCommandLine(argc, argv);
  fedagg::SinkService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>((4 << 20) + (64 << 10)));  // as fedagg-server
  // As fedagg-server: clients ping a connection whose call waits (FedaggChannelArguments).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "fedagg-raw-sink: cannot listen on %s\n", absl::GetFlag(FLAGS_listen).c_str());
    return 1;
  }
  std::fprintf(stderr, "fedagg-raw-sink: listening on port %d\n", port);
  server->Wait();
  return 0;
}
