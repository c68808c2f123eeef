// Runs N logical clients against one aggregation at a target rate and/or with a maximum
// number in flight, over a few channels per server (clients are spread over the servers
// and channels round-robin), and gathers what happened: answers, refusals, faults
// played, per-client latency, which generated update each counted client sent.
#ifndef FEDAGG_CLIENT_STUB_LOADGEN_LOAD_RUNNER_H_
#define FEDAGG_CLIENT_STUB_LOADGEN_LOAD_RUNNER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client_stub/loadgen/workload.h"
#include "fedagg/v1/aggregation.grpc.pb.h"

namespace fedagg::loadgen {

struct RunOptions {
  std::vector<std::string> servers;  // where clients connect (host:port)
  int channels_per_server = 2;
  std::string token;
  int64_t clients = 100;
  std::string client_id_prefix = "loadgen-client-";
  double rate = 0;       // client starts per second; 0: as fast as `concurrency` allows
  int concurrency = 256; // clients in flight at most
  FaultPlan faults;
  size_t chunk_bytes = 1 << 20;
  int max_attempts = 10;
  absl::Duration initial_backoff = absl::Milliseconds(5);
  bool durable = false;  // ask for DURABLE acks (a latency then includes the checkpoint)
};

struct RunStats {
  int64_t acked = 0;
  int64_t already_counted = 0;  // ALREADY_EXISTS: counted by an earlier stream (a lost ack)
  int64_t refused = 0;          // final refusals
  std::map<std::string, int64_t> refused_by_code;
  std::string first_refusal;    // the first final refusal, for a person to read
  int64_t retried = 0;          // refusals and broken streams sent again
  int64_t disconnects = 0, lost_acks = 0, slow = 0;  // faults planned and played
  int64_t left = 0;  // secure aggregation: clients that left as planned before their update counted
  std::vector<int64_t> counted_per_update;  // how many counted clients sent pool update k
  std::vector<double> latencies_ms;         // per answered client
  int64_t payload_bytes = 0;                // of the counted updates
  absl::Duration elapsed;
  int64_t counted() const { return acked + already_counted; }
};

class LoadRunner {
 public:
  explicit LoadRunner(RunOptions options);
  // Sends one update per client to `aggregation_id`; client i sends pool[i % pool.size()].
  RunStats Run(const std::string& aggregation_id, absl::Span<const GeneratedUpdate> pool);
  // The same for a secure aggregation (`spec` declares it; secure_clients.cc): each client
  // runs the protocol on a thread of its own, at most `concurrency` at once (a cohort forms
  // once max_cohort of them wait in it, so concurrency must reach it), its cohort stream
  // and its masked update over one channel; the faults are the plan's dropouts.
  RunStats RunSecure(const v1::AggregationSpec& spec, absl::Span<const GeneratedUpdate> pool);

 private:
  RunOptions options_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;  // server-major
  std::vector<std::unique_ptr<v1::Aggregation::Stub>> stubs_;
};

}  // namespace fedagg::loadgen

#endif  // FEDAGG_CLIENT_STUB_LOADGEN_LOAD_RUNNER_H_
