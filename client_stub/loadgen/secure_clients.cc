// The load generator's secure-aggregation clients: one thread each, ContributeSecurely.
#include <algorithm>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client_stub/client.h"
#include "client_stub/loadgen/load_runner.h"
#include "service/core/mutex.h"

namespace fedagg::loadgen {

RunStats LoadRunner::RunSecure(const v1::AggregationSpec& spec, absl::Span<const GeneratedUpdate> pool) {
  RunStats stats;
  stats.counted_per_update.assign(pool.size(), 0);
  Mutex mu;
  int64_t next = 0;  // the next client to run; guarded by mu
  const int per_server = std::max(1, options_.channels_per_server);
  const int64_t servers = static_cast<int64_t>(options_.servers.size());
  const absl::Time start = absl::Now();
  const auto run_clients = [&] {
    for (;;) {
      int64_t i = 0;
      {
        MutexLock lock(&mu);
        if (next >= options_.clients) return;
        i = next++;
      }
      const size_t k = static_cast<size_t>(i) % pool.size();
      const std::string client_id = absl::StrCat(options_.client_id_prefix, i);
      const std::shared_ptr<grpc::Channel>& channel =
          channels_[static_cast<size_t>((i % servers) * per_server + (i / servers) % per_server)];
      SecureContributionOptions secure;
      secure.token = options_.token;
      secure.update_is_encoded = true;  // the pool's updates are encoded once, as the spec declares
      secure.dropout = options_.faults.For(i).leave;
      CallOptions call;
      call.token = options_.token;
      call.max_attempts = options_.max_attempts;
      const absl::Time began = absl::Now();
      absl::StatusOr<std::unique_ptr<ContributeStream>> stream = ContributeStream::Open(channel, client_id, call);
      absl::StatusOr<v1::Ack> ack =
          stream.ok() ? ContributeSecurely(channel, **stream, spec, client_id, pool[k].view(), secure) : stream.status();
      if (stream.ok()) (void)(*stream)->Close();
      // A client that left before unmasking was counted (its ack came first); one that
      // left earlier was not.
      const bool left = secure.dropout != SecureDropout::kNone && ack.status().code() == absl::StatusCode::kCancelled;
      const bool counted = ack.ok() || (left && secure.dropout == SecureDropout::kBeforeUnmasking);
      MutexLock lock(&mu);
      stats.latencies_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - began));
      if (counted) {
        ++stats.acked;
        ++stats.counted_per_update[k];
        stats.payload_bytes += pool[k].payload_bytes();
      }
      if (left) {
        if (!counted) ++stats.left;
        continue;
      }
      if (!ack.ok()) {
        ++stats.refused;
        ++stats.refused_by_code[absl::StatusCodeToString(ack.status().code())];
        if (stats.first_refusal.empty()) stats.first_refusal = ack.status().ToString();
      }
    }
  };
  std::vector<std::thread> threads;
  const int64_t count = std::min<int64_t>(std::max(1, options_.concurrency), options_.clients);
  for (int64_t t = 0; t < count; ++t) threads.emplace_back(run_clients);
  for (std::thread& thread : threads) thread.join();
  stats.elapsed = absl::Now() - start;
  return stats;
}

}  // namespace fedagg::loadgen
