// ServiceMetrics: the metrics a fedagg server exports, all prefixed fedagg_ with units in
// their names, registered once on a MetricsRegistry. The RPC layer, the rounds layer (via
// AggregationOptions::on_batch_reduced and CheckpointerOptions::on_written) and the tier
// link update them; gauges that
// describe state (aggregations by state, queue depth, memory, GPU memory) are read at
// scrape time and registered by FedaggServer (service/server.cc).
#ifndef FEDAGG_MONITORING_SERVICE_METRICS_H_
#define FEDAGG_MONITORING_SERVICE_METRICS_H_

#include "monitoring/metrics_registry.h"

namespace fedagg {

struct ServiceMetrics {
  explicit ServiceMetrics(MetricsRegistry& registry);

  Counter& updates_received;            // update headers received
  Counter& updates_accepted;            // updates counted (acked)
  Family<Counter>& updates_rejected;    // by reason: the status code's name
  Counter& payload_bytes;               // chunk bytes received
  Gauge& active_streams;                // open Contribute streams
  Histogram& update_latency;            // header received -> ack, seconds
  Histogram& batch_reduction;           // one batch reduced into the partial aggregate, seconds
  Histogram& batch_fill;                // updates per reduced batch
  Family<Counter>& partial_forwards;    // pushes to the parent, by result (ok, failed)
  Counter& partials_merged;             // child partials merged here
  Family<Counter>& checkpoint_writes;   // checkpoint files written (--checkpoint_dir), by result
  Histogram& checkpoint_write;          // one checkpoint snapshot, encoded and written, seconds
  Family<Counter>& streams_refused;     // update streams refused at the start, by reason
  Counter& stalled_updates_evicted;     // updates discarded after --stall_timeout
  Family<Counter>& http_requests;       // HTTP path requests, by route and HTTP status
  Family<Counter>& http_upload_bytes;   // HTTP upload bytes, by kind: appended, repeated, discarded
};

// Resident memory of this process, from /proc/self/statm (0 where unavailable).
double ProcessResidentBytes();

}  // namespace fedagg

#endif  // FEDAGG_MONITORING_SERVICE_METRICS_H_
