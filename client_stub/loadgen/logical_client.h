// One logical client of the load generator: sends its one update to an aggregation over
// Aggregation.Contribute with gRPC's callback API — no thread of its own, so one process
// runs thousands side by side over a few channels. It plays its deliberate faults first
// (a stream cut halfway through the update, a stream dropped before the answer), each on
// its own stream, then sends the update whole; refusals that mean "again shortly"
// (UNAVAILABLE, ABORTED) and broken streams are retried on a new stream with doubling
// backoff. Slow clients wait before every message. The client reports once, on a gRPC
// thread, and then deletes itself.
#ifndef FEDAGG_CLIENT_STUB_LOADGEN_LOGICAL_CLIENT_H_
#define FEDAGG_CLIENT_STUB_LOADGEN_LOGICAL_CLIENT_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client_stub/loadgen/workload.h"
#include "fedagg/v1/aggregation.grpc.pb.h"
#include "service/core/field_value.h"

namespace fedagg::loadgen {

struct ClientSettings {
  std::string aggregation_id;
  std::string client_id;
  const UpdateView* update = nullptr;  // outlives the client
  FaultPlan::ClientFaults faults;
  absl::Duration slow_delay;
  size_t chunk_bytes = 1 << 20;
  int max_attempts = 10;  // sends of the whole update (faults not counted)
  absl::Duration initial_backoff = absl::Milliseconds(5);
  std::string token;
  bool durable = false;  // the header asks for a DURABLE ack
};

struct ClientOutcome {
  enum class Result { kAcked, kAlreadyCounted, kRefused };
  Result result = Result::kRefused;
  absl::Status refusal;      // kRefused: the last refusal or stream status
  absl::Duration latency;    // from start to the final answer, faults and retries included
  int retried = 0;           // refusals and broken streams that were sent again
};

// Starts the client; `done` is called exactly once, on a gRPC thread, and must not block.
void StartLogicalClient(v1::Aggregation::Stub* stub, ClientSettings settings,
                        std::function<void(const ClientOutcome&)> done);

}  // namespace fedagg::loadgen

#endif  // FEDAGG_CLIENT_STUB_LOADGEN_LOGICAL_CLIENT_H_
