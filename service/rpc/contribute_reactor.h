// ContributeReactor: one Aggregation.Contribute bidirectional stream. Reads one message
// at a time (so gRPC flow control pushes back on fast senders), keeps one write in
// flight, and never blocks: hello -> welcome; per update header, chunks, end -> ack or
// rejection. A rejected update's remaining chunks are skipped; the stream stays usable.
// An update's answer that waits (for its claim at the parent on an intermediate
// aggregator, for a checkpoint when DURABLE) is sent when it comes, while the stream goes
// on reading the next update: answers carry their aggregation id.
// A stream cut mid-update discards that update whole; so does a request that is not a
// valid protobuf, which ends the stream with INVALID_ARGUMENT. The call is refused when its caller
// already holds --max_streams_per_identity streams; an update whose client stops sending
// for --stall_timeout is discarded and the stream ended (StallWatch).
#ifndef FEDAGG_SERVICE_RPC_CONTRIBUTE_REACTOR_H_
#define FEDAGG_SERVICE_RPC_CONTRIBUTE_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "service/core/mutex.h"
#include "fedagg/v1/aggregation.grpc.pb.h"
#include "service/rpc/service_context.h"
#include "service/rpc/stall_watch.h"
#include "service/rpc/stream_limiter.h"
#include "service/rpc/update_assembler.h"

namespace fedagg {

class ContributeReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ContributeReactor(grpc::CallbackServerContext* context, ServiceContext& service);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  enum class Phase { kAwaitHello, kIdle, kInUpdate, kSkippingUpdate };

  // What to do after one request.
  struct Outcome {
    std::optional<grpc::Status> end;  // end the stream with this status
    bool paused = false;              // an asynchronous step resumes reading later
  };
  Outcome Handle(const v1::ContributeRequest& request);
  // A chunk, parsed (v1::Chunk) or read in place (RawChunk).
  template <typename ChunkMessage>
  Outcome HandleChunk(const ChunkMessage& chunk);
  // Starts the next read, or pauses reading while too many responses are queued.
  void ContinueReading();
  static v1::ContributeResponse RejectionOf(const absl::Status& status, const std::string& aggregation_id);
  void Reject(const absl::Status& status, const std::string& aggregation_id);
  // Queues a response; starts writing when no write is in flight.
  void Send(v1::ContributeResponse response);
  void SendLocked(v1::ContributeResponse response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the stream once reading stopped and every queued response was written.
  void FinishWhenDrained(grpc::Status status);
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // StallWatch's eviction: discards the update in progress and ends the stream.
  void EvictStalled();

  ServiceContext& service_;
  StreamLimiter::Slot stream_slot_;
  UpdateAssembler assembler_;  // touched only from OnReadDone (one read at a time) and EvictStalled
  StallWatch stall_;
  Phase phase_ = Phase::kAwaitHello;
  std::string client_id_;
  grpc::ByteBuffer raw_request_;  // the read target (raw_message.h says why raw)
  v1::ContributeRequest request_;

  Mutex mu_;
  std::deque<grpc::ByteBuffer> outbox_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> finish_status_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // Updates whose answer is still to come (End's completion); the stream finishes after them.
  int awaiting_acks_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_CONTRIBUTE_REACTOR_H_
