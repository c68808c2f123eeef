// fedagg's C++ client library.
//   ContributeStream — one Aggregation.Contribute stream: hello/welcome, then updates
//                      (each field dense, sparse or row-sparse, as the caller holds it:
//                      sent in the encoding the field declares, encoding_conversion.h),
//                      each checked locally against the spec, chunked, and acknowledged.
//                      An update refused for a passing reason, or cut off by a broken
//                      stream, is sent again (over a reopened stream when it broke).
//   SubmitUpdate     — the same update over the client-streaming Submit path.
//   ControlClient    — create, inspect, seal, cancel aggregations; fetch and watch results.
//   ConnectToFedagg  — a channel with the keepalive pings a long wait for an ack needs.
// Every call returns absl::Status with the server's code and message.
#ifndef FEDAGG_CLIENT_STUB_CLIENT_H_
#define FEDAGG_CLIENT_STUB_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fedagg/v1/aggregation.grpc.pb.h"
#include "fedagg/v1/control.grpc.pb.h"
#include "service/core/aggregate_result.h"
#include "service/core/field_value.h"

namespace fedagg {

struct CallOptions {
  std::string token;                      // bearer token, when the server asks for one
  absl::Duration timeout = absl::Seconds(30);
  // ContributeStream sends an update this many times in all, waiting initial_backoff and
  // then twice as long before each further send, when it was refused with UNAVAILABLE
  // (e.g. an intermediate aggregator still joining the aggregation at its parent) or with
  // RESOURCE_EXHAUSTED from the server's memory budget, or when the stream broke before
  // the update's answer (then the stream is reopened, with a new hello/welcome, first).
  // Safe: the server counts an update once per client id (docs/PROTOCOL.md 3.5).
  int max_attempts = 8;
  absl::Duration initial_backoff = absl::Milliseconds(25);
  // The ack level an update waits for: RECEIVED (counted in the server's memory) or
  // DURABLE (in a checkpoint on disk; up to one --checkpoint_interval later, and refused
  // with FAILED_PRECONDITION by a server without --checkpoint_dir). The returned Ack's
  // `level` says what was reached: a DURABLE request answered RECEIVED means the server
  // stopped before a checkpoint held the update — send it again, with the same client id,
  // once the server is back (it is counted once either way).
  v1::AckLevel ack_level = v1::RECEIVED;
  // The seed of the stochastic rounding of encoded fields (ConvertedUpdate::Of); unset: a
  // random one per update, which is what keeps clients' rounding errors independent.
  std::optional<uint64_t> encoding_seed;
};

// The channel arguments of a connection to a fedagg server: while a call is open, the
// connection is pinged after `keepalive` without traffic and dropped when a ping is not
// answered within as long again, so a stream waiting for an ack from a server that the
// network cut off ends with UNAVAILABLE (ContributeStream then sends the update again)
// instead of waiting forever. fedagg servers take pings every 500 ms or more: keep it at
// 1 s or more.
grpc::ChannelArguments FedaggChannelArguments(absl::Duration keepalive = absl::Seconds(20));
// A channel to `target` with FedaggChannelArguments(keepalive).
std::shared_ptr<grpc::Channel> ConnectToFedagg(const std::string& target,
                                               const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                               absl::Duration keepalive = absl::Seconds(20));

class ContributeStream {
 public:
  static constexpr size_t kDefaultChunkBytes = 1 << 20;

  // Opens the stream and exchanges hello / welcome (one try: an unreachable server is
  // reported at once).
  static absl::StatusOr<std::unique_ptr<ContributeStream>> Open(
      std::shared_ptr<grpc::Channel> channel, const std::string& client_id,
      const CallOptions& options = {});
  ~ContributeStream();

  // The Welcome of the latest hello (the stream reopens after it broke).
  const v1::Welcome& welcome() const { return welcome_; }
  // Puts every field of `update` in the encoding `spec` declares (ConvertedUpdate),
  // validates it locally as the server would, sends it, and waits for the server's answer:
  // the Ack, or the rejection as a Status (the stream stays usable after a rejection).
  //
  // Retries as CallOptions::max_attempts says. When the stream broke (server restarted,
  // connection reset, stream ended with UNAVAILABLE, CANCELLED, DEADLINE_EXCEEDED or
  // ABORTED), the next send reopens it with the same client id, also on a later call. After
  // such a break the first copy may have been counted, so on the resend:
  //   - ALREADY_EXISTS means it was: the update is counted once, and the answer is an Ack
  //     with `contributions` 0 (the count after it is not known; a real Ack has at least 1)
  //     and `level` RECEIVED;
  //   - ABORTED (the broken stream's copy still in flight at the server) is retried.
  // ALREADY_EXISTS on a stream that did not break is returned as it is. Other refusals
  // (INVALID_ARGUMENT, FAILED_PRECONDITION, NOT_FOUND, PERMISSION_DENIED, UNAUTHENTICATED,
  // RESOURCE_EXHAUSTED other than the memory budget, ...) are returned at once. When every
  // attempt failed, the status has the last error's code and a message naming the number of
  // attempts and that error.
  absl::StatusOr<v1::Ack> Contribute(const v1::AggregationSpec& spec, const UpdateView& update);
  // Sends without local validation (to exercise the server's own checks); retries as
  // Contribute does.
  absl::StatusOr<v1::Ack> ContributeUnchecked(const std::string& aggregation_id,
                                              const UpdateView& update);
  // Sends raw protocol messages and waits for one response (tests of malformed streams);
  // no retries, and FAILED_PRECONDITION once the stream has broken.
  absl::StatusOr<v1::Ack> SendRaw(const std::vector<v1::ContributeRequest>& requests);
  // Half-closes and returns the stream's final status (OK when it had already broken: the
  // break was reported by the call that met it).
  absl::Status Close();

  void set_chunk_bytes(size_t bytes) { chunk_bytes_ = bytes; }

 private:
  // One Contribute call: its context and its reader-writer.
  struct Call {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::ContributeRequest, v1::ContributeResponse>> stream;
  };

  ContributeStream() = default;
  // Starts a new call and exchanges hello / welcome; on failure no call is held.
  absl::Status Connect();
  // Ends the current call after a failed read or write and returns its status.
  absl::Status FinishBrokenCall();
  absl::StatusOr<v1::Ack> AwaitAnswer();
  absl::StatusOr<v1::Ack> SendOnce(const std::string& aggregation_id, const UpdateView& update);

  std::unique_ptr<v1::Aggregation::Stub> stub_;
  std::unique_ptr<Call> call_;  // null after the stream broke, until it is reopened
  v1::Welcome welcome_;
  std::string client_id_;
  CallOptions options_;
  size_t chunk_bytes_ = kDefaultChunkBytes;
  bool closed_ = false;  // Close() was called
};

// One update over Aggregation.Submit (for callers without bidirectional streams).
absl::StatusOr<v1::Ack> SubmitUpdate(std::shared_ptr<grpc::Channel> channel,
                                     const std::string& client_id,
                                     const v1::AggregationSpec& spec, const UpdateView& update,
                                     const CallOptions& options = {});

class ControlClient {
 public:
  explicit ControlClient(std::shared_ptr<grpc::Channel> channel, CallOptions options = {});

  absl::StatusOr<v1::AggregationStatus> Create(const v1::AggregationSpec& spec);
  absl::StatusOr<v1::AggregationStatus> Get(const std::string& id);
  absl::StatusOr<std::vector<v1::AggregationStatus>> List();
  absl::StatusOr<v1::AggregationStatus> Seal(const std::string& id);
  absl::StatusOr<v1::AggregationStatus> Cancel(const std::string& id, const std::string& reason);
  // The open aggregations the task path hands out (Aggregation.GetTask).
  absl::StatusOr<std::vector<v1::AggregationSpec>> GetTasks(const std::string& client_id, int max);
  // Reassembles the streamed result of a FINALIZED aggregation.
  absl::StatusOr<AggregateResult> GetResult(const std::string& id);
  // Calls `on_status` for the current status and each change until a final state;
  // returns that final status.
  absl::StatusOr<v1::AggregationStatus> WatchUntilFinal(
      const std::string& id, const std::function<void(const v1::AggregationStatus&)>& on_status = {});

 private:
  void Prepare(grpc::ClientContext& context, bool with_deadline = true) const;
  // One unary call with this client's token and deadline.
  template <typename Stub, typename Request, typename Response>
  absl::StatusOr<Response> Unary(Stub& stub,
                                 grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                                 const Request& request) const;

  std::unique_ptr<v1::Control::Stub> control_;
  std::unique_ptr<v1::Aggregation::Stub> aggregation_;
  CallOptions options_;
};

}  // namespace fedagg

#endif  // FEDAGG_CLIENT_STUB_CLIENT_H_
