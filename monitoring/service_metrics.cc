// ServiceMetrics: registration of fedagg's metric set.
#include "monitoring/service_metrics.h"

#include <unistd.h>

#include <fstream>

namespace fedagg {
namespace {
const std::vector<double> kLatencyBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                            0.1,    0.25,  0.5,    1,     2.5,  5,     10};
const std::vector<double> kBatchBounds = {1, 2, 4, 8, 16, 32, 64, 128};
}  // namespace

ServiceMetrics::ServiceMetrics(MetricsRegistry& registry)
    : updates_received(registry.AddCounter("fedagg_updates_received_total",
                                           "Client updates whose header was received.").WithLabels({})),
      updates_accepted(registry.AddCounter("fedagg_updates_accepted_total",
                                           "Client updates validated, counted and acknowledged.").WithLabels({})),
      updates_rejected(registry.AddCounter("fedagg_updates_rejected_total",
                                           "Client updates refused, by gRPC status code.", {"reason"})),
      payload_bytes(registry.AddCounter("fedagg_payload_bytes_total",
                                        "Bytes of update chunks received.").WithLabels({})),
      active_streams(registry.AddGauge("fedagg_active_streams", "Open Contribute streams.").WithLabels({})),
      update_latency(registry.AddHistogram("fedagg_update_latency_seconds",
                                           "Time from an update's header to its ack.", kLatencyBounds)
                         .WithLabels({})),
      batch_reduction(registry.AddHistogram("fedagg_batch_reduction_seconds",
                                            "Time to reduce one batch of updates.", kLatencyBounds)
                          .WithLabels({})),
      batch_fill(registry.AddHistogram("fedagg_batch_fill_updates", "Updates per reduced batch.", kBatchBounds)
                     .WithLabels({})),
      partial_forwards(registry.AddCounter("fedagg_partial_forwards_total",
                                           "Partial aggregates pushed to the parent aggregator, by result.",
                                           {"result"})),
      partials_merged(registry.AddCounter("fedagg_partials_merged_total",
                                          "Partial aggregates of child aggregators merged here.").WithLabels({})),
      checkpoint_writes(registry.AddCounter("fedagg_checkpoint_writes_total",
                                            "Aggregation checkpoints written to --checkpoint_dir, by result.",
                                            {"result"})),
      checkpoint_write(registry.AddHistogram("fedagg_checkpoint_write_seconds",
                                             "Time to snapshot, encode and durably write one checkpoint.",
                                             kLatencyBounds)
                           .WithLabels({})),
      streams_refused(registry.AddCounter("fedagg_streams_refused_total",
                                          "Contribute and Submit streams refused when they started, by "
                                          "reason (unauthenticated, identity_limit).",
                                          {"reason"})),
      stalled_updates_evicted(registry.AddCounter("fedagg_stalled_updates_evicted_total",
                                                  "Updates discarded because their client sent nothing "
                                                  "for --stall_timeout.").WithLabels({})),
      http_requests(registry.AddCounter("fedagg_http_requests_total",
                                        "Requests of the HTTP path (--http_address), by route and HTTP status.",
                                        {"route", "status"})),
      http_upload_bytes(registry.AddCounter("fedagg_http_upload_bytes_total",
                                            "Bytes of HTTP upload writes, by what became of them: appended "
                                            "(committed), repeated (a re-sent committed range), discarded "
                                            "(a checksum, a difference or a broken body).",
                                            {"kind"})) {}

double ProcessResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  if (!(statm >> pages_total >> pages_resident)) return 0;
  return static_cast<double>(pages_resident) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

}  // namespace fedagg
