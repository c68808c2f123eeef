// The load generator's scheduler: paces client starts, bounds clients in flight, collects
// their outcomes.
#include "client_stub/loadgen/load_runner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client_stub/client.h"
#include "client_stub/loadgen/logical_client.h"
#include "service/core/mutex.h"

namespace fedagg::loadgen {

LoadRunner::LoadRunner(RunOptions options) : options_(std::move(options)) {
  for (const std::string& server : options_.servers) {
    for (int c = 0; c < std::max(1, options_.channels_per_server); ++c) {
      grpc::ChannelArguments args = FedaggChannelArguments();
      args.SetMaxReceiveMessageSize(-1);  // Welcome carries open specs, broadcast included
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per channel
      args.SetInt("fedagg.loadgen.channel", c);
      channels_.push_back(grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args));
      stubs_.push_back(v1::Aggregation::NewStub(channels_.back()));
    }
  }
}

RunStats LoadRunner::Run(const std::string& aggregation_id, absl::Span<const GeneratedUpdate> pool) {
  RunStats stats;
  stats.counted_per_update.assign(pool.size(), 0);
  stats.disconnects = FaultPlan::Picked(options_.faults.disconnect, options_.clients);
  stats.lost_acks = FaultPlan::Picked(options_.faults.lost_ack, options_.clients);
  stats.slow = FaultPlan::Picked(options_.faults.slow, options_.clients);
  Mutex mu;
  int64_t in_flight = 0;  // guarded by mu
  const int per_server = std::max(1, options_.channels_per_server);
  const int64_t servers = static_cast<int64_t>(options_.servers.size());
  const absl::Time start = absl::Now();
  for (int64_t i = 0; i < options_.clients; ++i) {
    if (options_.rate > 0) absl::SleepFor(start + absl::Seconds(static_cast<double>(i) / options_.rate) - absl::Now());
    {
      MutexLock lock(&mu);
      mu.Await([&] { return in_flight < std::max(1, options_.concurrency); });
      ++in_flight;
    }
    const size_t k = static_cast<size_t>(i) % pool.size();
    ClientSettings settings;
    settings.aggregation_id = aggregation_id;
    settings.client_id = absl::StrCat(options_.client_id_prefix, i);
    settings.update = &pool[k].view();
    settings.faults = options_.faults.For(i);
    settings.slow_delay = options_.faults.slow_delay;
    settings.chunk_bytes = options_.chunk_bytes;
    settings.max_attempts = options_.max_attempts;
    settings.initial_backoff = options_.initial_backoff;
    settings.durable = options_.durable;
    settings.token = options_.token;
    const size_t stub = static_cast<size_t>((i % servers) * per_server + (i / servers) % per_server);
    const int64_t payload = pool[k].payload_bytes();
    StartLogicalClient(stubs_[stub].get(), std::move(settings), [&, k, payload](const ClientOutcome& outcome) {
      MutexLock lock(&mu);
      --in_flight;
      stats.retried += outcome.retried;
      stats.latencies_ms.push_back(absl::ToDoubleMilliseconds(outcome.latency));
      switch (outcome.result) {
        case ClientOutcome::Result::kAcked: ++stats.acked; break;
        case ClientOutcome::Result::kAlreadyCounted: ++stats.already_counted; break;
        case ClientOutcome::Result::kRefused:
          ++stats.refused;
          ++stats.refused_by_code[absl::StatusCodeToString(outcome.refusal.code())];
          if (stats.first_refusal.empty()) stats.first_refusal = outcome.refusal.ToString();
          return;
      }
      ++stats.counted_per_update[k];
      stats.payload_bytes += payload;
    });
  }
  MutexLock lock(&mu);
  mu.Await([&] { return in_flight == 0; });
  stats.elapsed = absl::Now() - start;
  return stats;
}

}  // namespace fedagg::loadgen
