// The load generator's report, in text and JSON.
#include "client_stub/loadgen/report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace fedagg::loadgen {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') absl::StrAppend(&out, "\\", std::string(1, c));
    else if (static_cast<unsigned char>(c) < 0x20) absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
    else out += c;
  }
  return out + "\"";
}

std::string JsonNumber(double x) {
  if (std::isinf(x)) return "1e999";  // JSON has no infinity; parsers read this as one
  if (std::isnan(x)) return "null";
  return absl::StrFormat("%.6g", x);
}

double Seconds(const RunStats& s) { return std::max(1e-9, absl::ToDoubleSeconds(s.elapsed)); }

}  // namespace

bool LoadReport::passed() const {
  // Every client is counted, but those that left a secure cohort, as planned, before theirs was.
  const int64_t clients = clients_per_round * static_cast<int64_t>(std::max<size_t>(1, aggregation_ids.size()));
  if (!failure.empty() || totals.refused > 0 || totals.counted() + totals.left != clients) {
    return false;
  }
  if (sink) return true;
  if (checks.size() != aggregation_ids.size()) return false;
  return std::all_of(checks.begin(), checks.end(), [](const CheckReport& c) { return c.passed; });
}

void Accumulate(const RunStats& run, RunStats& totals) {
  totals.acked += run.acked;
  totals.already_counted += run.already_counted;
  totals.refused += run.refused;
  for (const auto& [code, n] : run.refused_by_code) totals.refused_by_code[code] += n;
  if (totals.first_refusal.empty()) totals.first_refusal = run.first_refusal;
  totals.retried += run.retried;
  totals.disconnects += run.disconnects;
  totals.lost_acks += run.lost_acks;
  totals.slow += run.slow;
  totals.left += run.left;
  totals.latencies_ms.insert(totals.latencies_ms.end(), run.latencies_ms.begin(), run.latencies_ms.end());
  totals.payload_bytes += run.payload_bytes;
  totals.elapsed += run.elapsed;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100 * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

std::string HumanReport(const LoadReport& r) {
  const RunStats& t = r.totals;
  std::string out = absl::StrFormat(
      "fedagg-loadgen: %d round(s) of %d clients, type %s, through %s\n", r.aggregation_ids.size(),
      r.clients_per_round, r.value_type, absl::StrJoin(r.servers, ","));
  absl::StrAppendFormat(&out, "  updates:    %d counted (%d acked, %d already counted), %d refused%s%s; %d sent again\n",
                        t.counted(), t.acked, t.already_counted, t.refused, t.refused ? ": " : "", t.first_refusal,
                        t.retried);
  absl::StrAppendFormat(&out, "  faults:     %d streams cut mid-update, %d acks dropped, %d slow senders, %d left a "
                        "secure cohort before their update counted\n",
                        t.disconnects, t.lost_acks, t.slow, t.left);
  absl::StrAppendFormat(&out, "  throughput: %.1f updates/s, %.3g MB/s payload (%d bytes an update) over %.3f s\n",
                        static_cast<double>(t.counted()) / Seconds(t),
                        static_cast<double>(t.payload_bytes) / Seconds(t) / 1e6, r.payload_bytes_per_update,
                        absl::ToDoubleSeconds(t.elapsed));
  if (r.model_bytes_per_update != r.payload_bytes_per_update) {
    absl::StrAppendFormat(&out, "  encoded:    %.3g MB/s of model (%d bytes an update before encoding, %.2fx the wire)\n",
                          static_cast<double>(t.counted()) * static_cast<double>(r.model_bytes_per_update) /
                              Seconds(t) / 1e6,
                          r.model_bytes_per_update,
                          static_cast<double>(r.model_bytes_per_update) /
                              static_cast<double>(std::max<int64_t>(1, r.payload_bytes_per_update)));
  }
  absl::StrAppendFormat(&out, "  latency:    p50 %.2f ms, p90 %.2f ms, p99 %.2f ms (per client, retries included)\n",
                        Percentile(t.latencies_ms, 50), Percentile(t.latencies_ms, 90), Percentile(t.latencies_ms, 99));
  if (!r.round_ms.empty()) {
    absl::StrAppendFormat(&out, "  rounds:     median %.2f ms, p99 %.2f ms (create to result)\n",
                          Percentile(r.round_ms, 50), Percentile(r.round_ms, 99));
  }
  if (r.sink) absl::StrAppend(&out, "  check:      none (the servers are bare sinks)\n");
  for (size_t i = 0; i < r.checks.size(); ++i) {
    const CheckReport& c = r.checks[i];
    absl::StrAppendFormat(&out, "  check:      %s: %d contributions (expected %d)", r.aggregation_ids[i],
                          c.contributions, c.expected_contributions);
    for (const FieldCheck& f : c.fields) {
      if (f.measured_noise_stddev >= 0) {
        absl::StrAppendFormat(&out, "; %s noise sd %.4g, reported %.4g (relative gap %.3g, tolerance %.3g)", f.path,
                              f.measured_noise_stddev, f.reported_noise_stddev, f.max_relative_error, f.tolerance);
      } else {
        absl::StrAppendFormat(&out, "; %s max rel. error %.3g (tolerance %.3g)", f.path, f.max_relative_error,
                              f.tolerance);
      }
    }
    absl::StrAppend(&out, c.passed ? ": OK\n" : ": MISMATCH\n");
  }
  if (!r.failure.empty()) absl::StrAppend(&out, "  failed:     ", r.failure, "\n");
  absl::StrAppend(&out, r.passed() ? "PASSED\n" : "FAILED\n");
  return out;
}

std::string JsonReport(const LoadReport& r) {
  const RunStats& t = r.totals;
  std::vector<std::string> ids, servers, codes, checks;
  for (const std::string& id : r.aggregation_ids) ids.push_back(JsonString(id));
  for (const std::string& s : r.servers) servers.push_back(JsonString(s));
  for (const auto& [code, n] : t.refused_by_code) codes.push_back(absl::StrCat(JsonString(code), ": ", n));
  std::vector<std::string> rounds;
  for (const LoadReport::RoundThroughput& round : r.round_throughput) {
    const double seconds = std::max(1e-9, absl::ToDoubleSeconds(round.elapsed));
    rounds.push_back(absl::StrCat("{\"seconds\": ", JsonNumber(absl::ToDoubleSeconds(round.elapsed)),
                                  ", \"updates_per_s\": ", JsonNumber(static_cast<double>(round.counted) / seconds),
                                  ", \"payload_bytes_per_s\": ",
                                  JsonNumber(static_cast<double>(round.payload_bytes) / seconds), "}"));
  }
  for (const CheckReport& c : r.checks) {
    std::vector<std::string> fields;
    for (const FieldCheck& f : c.fields) {
      fields.push_back(absl::StrCat("{\"path\": ", JsonString(f.path), ", \"max_relative_error\": ",
                                    JsonNumber(f.max_relative_error), ", \"tolerance\": ", JsonNumber(f.tolerance),
                                    f.measured_noise_stddev >= 0
                                        ? absl::StrCat(", \"noise_stddev\": ", JsonNumber(f.measured_noise_stddev),
                                                       ", \"reported_noise_stddev\": ",
                                                       JsonNumber(f.reported_noise_stddev))
                                        : std::string(),
                                    ", \"passed\": ", f.passed ? "true" : "false", "}"));
    }
    checks.push_back(absl::StrCat("{\"contributions\": ", c.contributions, ", \"expected_contributions\": ",
                                  c.expected_contributions, ", \"passed\": ", c.passed ? "true" : "false",
                                  ", \"fields\": [", absl::StrJoin(fields, ", "), "]}"));
  }
  return absl::StrCat(
      "{\"aggregation_ids\": [", absl::StrJoin(ids, ", "), "], \"value_type\": ", JsonString(r.value_type),
      ", \"servers\": [", absl::StrJoin(servers, ", "), "], \"clients_per_round\": ", r.clients_per_round,
      ", \"rounds\": ", r.aggregation_ids.size(), ", \"payload_bytes_per_update\": ", r.payload_bytes_per_update,
      ", \"model_bytes_per_update\": ", r.model_bytes_per_update,
      ",\n \"updates\": {\"counted\": ", t.counted(), ", \"acked\": ", t.acked, ", \"already_counted\": ",
      t.already_counted, ", \"refused\": ", t.refused, ", \"refused_by_code\": {", absl::StrJoin(codes, ", "),
      "}, \"first_refusal\": ", JsonString(t.first_refusal), ", \"sent_again\": ", t.retried, "}",
      ",\n \"faults\": {\"disconnects\": ", t.disconnects, ", \"lost_acks\": ", t.lost_acks, ", \"slow\": ", t.slow,
      ", \"left_before_counted\": ", t.left, "}",
      ",\n \"throughput\": {\"seconds\": ", JsonNumber(absl::ToDoubleSeconds(t.elapsed)), ", \"updates_per_s\": ",
      JsonNumber(static_cast<double>(t.counted()) / Seconds(t)), ", \"payload_bytes_per_s\": ",
      JsonNumber(static_cast<double>(t.payload_bytes) / Seconds(t)), "}",
      ",\n \"round_throughput\": [", absl::StrJoin(rounds, ", "), "]",
      ",\n \"latency_ms\": {\"p50\": ", JsonNumber(Percentile(t.latencies_ms, 50)), ", \"p90\": ",
      JsonNumber(Percentile(t.latencies_ms, 90)), ", \"p99\": ", JsonNumber(Percentile(t.latencies_ms, 99)), "}",
      ",\n \"round_ms\": {\"median\": ", JsonNumber(Percentile(r.round_ms, 50)), ", \"p99\": ",
      JsonNumber(Percentile(r.round_ms, 99)), ", \"count\": ", r.round_ms.size(), "}",
      ",\n \"sink\": ", r.sink ? "true" : "false", ", \"checks\": [", absl::StrJoin(checks, ", "), "]",
      ", \"failure\": ", JsonString(r.failure), ", \"passed\": ", r.passed() ? "true" : "false", "}\n");
}

}  // namespace fedagg::loadgen
