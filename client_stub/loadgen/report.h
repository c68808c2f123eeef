// What the load generator prints: updates/s, payload bytes/s, latency percentiles, counts
// of accepted and refused updates, faults played, round latencies and the result check —
// for a person, or as one JSON object (--json) for scripts/bench.sh and the tests.
#ifndef FEDAGG_CLIENT_STUB_LOADGEN_REPORT_H_
#define FEDAGG_CLIENT_STUB_LOADGEN_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client_stub/loadgen/load_runner.h"
#include "client_stub/loadgen/result_check.h"

namespace fedagg::loadgen {

struct LoadReport {
  std::vector<std::string> aggregation_ids;  // one per round
  std::string value_type;
  std::vector<std::string> servers;
  int64_t clients_per_round = 0;
  int64_t payload_bytes_per_update = 0;      // the largest of the generated updates
  // The same update's bytes before value encoding (equal to payload_bytes_per_update when
  // no field is encoded): updates/s times this is the model bytes a node takes in.
  int64_t model_bytes_per_update = 0;
  RunStats totals;                           // summed over rounds (elapsed: sending time)
  // Each round's sending time and what it counted: the first round of a fresh server
  // pays its one-time costs (mappings, a device's first launches), later rounds do not.
  struct RoundThroughput {
    absl::Duration elapsed;
    int64_t counted = 0;
    int64_t payload_bytes = 0;
  };
  std::vector<RoundThroughput> round_throughput;
  std::vector<double> round_ms;              // create to result, per round
  bool sink = false;                         // the servers were bare sinks: nothing to check
  std::vector<CheckReport> checks;           // one per round
  std::string failure;                       // a step that failed (create, seal, result ...)
  bool passed() const;
};

// Adds `run` into `totals`.
void Accumulate(const RunStats& run, RunStats& totals);
// The p-th percentile (0..100, nearest rank) of `values`; 0 when empty.
double Percentile(std::vector<double> values, double p);

std::string HumanReport(const LoadReport& report);
std::string JsonReport(const LoadReport& report);

}  // namespace fedagg::loadgen

#endif  // FEDAGG_CLIENT_STUB_LOADGEN_REPORT_H_
