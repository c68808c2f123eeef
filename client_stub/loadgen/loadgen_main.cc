// fedagg-loadgen: N logical clients (thousands from one process, over a few channels)
// against a running fedagg tree. It creates an aggregation at the root (or joins one given
// by id), sends every client's update through the servers named, at a target rate or with
// a bound on clients in flight, with deliberate faults if asked (streams cut mid-update,
// acks lost and the update sent again with the same client id, slow senders); then seals,
// fetches the result and checks it against the value it computed itself from what it
// sent. Reports updates/s, payload bytes/s, latency percentiles and counts, as text or
// JSON. Exit codes: 0 every update counted and the result checked; 1 a refusal, a failed
// step or a wrong result; 2 a usage error.
#include <cstdio>
#include <string>
#include <vector>

#include "service/core/abseil_deadlock_detection.h"
#include "service/core/program_usage.h"
#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client_stub/client.h"
#include "client_stub/loadgen/load_runner.h"
#include "client_stub/loadgen/report.h"
#include "client_stub/loadgen/result_check.h"
#include "client_stub/loadgen/workload.h"
#include "service/core/read_file.h"
#include "service/core/status_macros.h"
#include "service/core/value_encoder.h"
#include "service/rounds/spec_conversion.h"

ABSL_FLAG(std::string, control, "localhost:50051", "the root aggregator: create, seal, result");
ABSL_FLAG(std::string, servers, "", "comma-separated servers the clients connect to (default: --control)");
ABSL_FLAG(int, channels, 2, "gRPC channels (connections) per server");
ABSL_FLAG(std::string, token_file, "", "file holding a bearer token");
ABSL_FLAG(int64_t, clients, 100, "logical clients per round, one update each");
ABSL_FLAG(int, rounds, 1, "aggregations to run one after the other (create, send, seal, result, check)");
ABSL_FLAG(double, rate, 0, "client starts per second (0: as fast as --concurrency allows)");
ABSL_FLAG(int, concurrency, 256, "clients in flight at most");
ABSL_FLAG(std::string, type, "<w=float32[1024]>",
          "value type of a created aggregation, e.g. '<dense=float32[256,64],emb=float32[10000,32],tok=int64[50000]>'");
ABSL_FLAG(std::string, intrinsics, "federated_sum",
          "one intrinsic per leaf field, e.g. federated_mean,row_sparse_sum,sparse_sum+counts; +clip=C gives a "
          "field its own L2 bound under --privacy (federated_mean+clip=0.5)");
ABSL_FLAG(std::string, density, "0.01",
          "sparse and row-sparse fields: fraction of coordinates / rows an update touches; one value, or one per field");
ABSL_FLAG(std::string, encoding, "",
          "create: the value encoding of every linear field (all but federated_max/min) that names none in "
          "--intrinsics (quantized:BITS[/BLOCK], discretized:BITS@SCALE; docs/SEMANTICS.md); updates are "
          "sent encoded and checked against the reference of what was sent, decoded");
ABSL_FLAG(bool, float64, false, "create: accumulate float32/16 inputs in float64");
ABSL_FLAG(bool, deterministic, false, "create: a deterministic aggregation (exact sums; docs/SEMANTICS.md section 9)");
ABSL_FLAG(std::string, privacy, "",
          "create: differential privacy, 'clip=C,z=Z,clients=E[,quantile=Q,...]' (docs/SEMANTICS.md section 12); "
          "the check then clips the reference as the server does and tests the noise's mean and standard deviation");
ABSL_FLAG(std::string, secure, "",
          "create: a secure aggregation, 'on' or 'cohort=N[,min=M,degree=D,threshold=T,timeout_ms=X]' or with the graph derived per cohort 'cohort=N,adversarial=A,dropout=P' "
          "(docs/SEMANTICS.md section 13; every field discretized, e.g. --encoding=discretized:32@0.001); each "
          "client then runs on a thread of its own, --concurrency of them at once (at least the cohort)");
ABSL_FLAG(double, leave_before_sharing, 0, "fault, secure aggregation: clients that leave before sharing their keys");
ABSL_FLAG(double, leave_before_input, 0, "fault, secure aggregation: clients that leave before their masked update");
ABSL_FLAG(double, leave_before_unmasking, 0,
          "fault, secure aggregation: clients that leave after their masked update, before unmasking");
ABSL_FLAG(int, distinct_updates, 8, "distinct generated updates; client i sends update i % this");
ABSL_FLAG(uint64_t, seed, 1, "seed of the generated updates");
ABSL_FLAG(int64_t, chunk_kib, 1024, "chunk size of the update stream, KiB (at most 4096)");
ABSL_FLAG(double, disconnect_fraction, 0, "fault: clients whose first stream is cut halfway through the update");
ABSL_FLAG(double, lost_ack_fraction, 0,
          "fault: clients that drop a stream after UpdateEnd without reading the answer, then send again");
ABSL_FLAG(double, slow_fraction, 0, "fault: clients that wait --slow_delay_ms before every message");
ABSL_FLAG(int64_t, slow_delay_ms, 20, "the slow clients' pause before each message");
ABSL_FLAG(int, max_attempts, 10, "sends of one update refused with UNAVAILABLE/ABORTED or cut off, in all");
ABSL_FLAG(bool, durable, false,
          "ask for DURABLE acks (the server must write checkpoints, or be an intermediate under a root that does); "
          "latencies then include the wait for the checkpoint");
ABSL_FLAG(int64_t, retry_backoff_ms, 5, "first wait before sending again; doubles each time, up to 1 s");
ABSL_FLAG(std::string, aggregation_id, "",
          "join this existing aggregation instead of creating one (the check assumes only this run contributes)");
ABSL_FLAG(std::string, id_prefix, "loadgen", "prefix of created aggregation ids");
ABSL_FLAG(bool, seal, true, "seal the aggregation after sending (a joined one may be sealed by someone else)");
ABSL_FLAG(bool, sink, false,
          "the servers are bare Contribute sinks (bench/raw_sink): no Control calls, no result to check");
ABSL_FLAG(int64_t, timeout_s, 300, "deadline of Control calls, including waiting for the final state");
ABSL_FLAG(bool, json, false, "print one JSON object instead of text");

namespace fedagg::loadgen {
namespace {

constexpr int kPassed = 0;
constexpr int kFailed = 1;
constexpr int kUsage = 2;

int Usage(const absl::Status& status) {
  std::fprintf(stderr, "fedagg-loadgen: %s\n", status.ToString().c_str());
  return kUsage;
}

absl::StatusOr<std::vector<double>> ParseDensities(const std::string& list) {
  std::vector<double> out;
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    double d;
    if (!absl::SimpleAtod(item, &d)) return absl::InvalidArgumentError(absl::StrCat("--density: '", item, "' is not a number"));
    out.push_back(d);
  }
  return out;
}

absl::StatusOr<RunOptions> RunOptionsFromFlags(const std::string& token) {
  RunOptions options;
  const std::string servers = absl::GetFlag(FLAGS_servers).empty() ? absl::GetFlag(FLAGS_control) : absl::GetFlag(FLAGS_servers);
  options.servers = absl::StrSplit(servers, ',', absl::SkipEmpty());
  options.channels_per_server = absl::GetFlag(FLAGS_channels);
  options.token = token;
  options.clients = absl::GetFlag(FLAGS_clients);
  options.rate = absl::GetFlag(FLAGS_rate);
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.faults.disconnect = absl::GetFlag(FLAGS_disconnect_fraction);
  options.faults.lost_ack = absl::GetFlag(FLAGS_lost_ack_fraction);
  options.faults.slow = absl::GetFlag(FLAGS_slow_fraction);
  options.faults.slow_delay = absl::Milliseconds(absl::GetFlag(FLAGS_slow_delay_ms));
  options.faults.leave_before_sharing = absl::GetFlag(FLAGS_leave_before_sharing);
  options.faults.leave_before_input = absl::GetFlag(FLAGS_leave_before_input);
  options.faults.leave_before_unmasking = absl::GetFlag(FLAGS_leave_before_unmasking);
  options.chunk_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_chunk_kib)) * 1024;
  options.max_attempts = absl::GetFlag(FLAGS_max_attempts);
  options.initial_backoff = absl::Milliseconds(absl::GetFlag(FLAGS_retry_backoff_ms));
  options.durable = absl::GetFlag(FLAGS_durable);
  if (options.servers.empty()) return absl::InvalidArgumentError("name at least one server");
  if (options.clients < 1) return absl::InvalidArgumentError("--clients must be at least 1");
  if (options.channels_per_server < 1 || options.concurrency < 1 || options.max_attempts < 1) {
    return absl::InvalidArgumentError("--channels, --concurrency and --max_attempts must be at least 1");
  }
  for (double f : {options.faults.disconnect, options.faults.lost_ack, options.faults.slow,
                   options.faults.leave_before_sharing, options.faults.leave_before_input,
                   options.faults.leave_before_unmasking}) {
    if (!(f >= 0 && f <= 1)) return absl::InvalidArgumentError("fault fractions must be in [0, 1]");
  }
  if (options.rate < 0) return absl::InvalidArgumentError("--rate must be >= 0");
  if (options.chunk_bytes < 1 || options.chunk_bytes > (4u << 20)) {
    return absl::InvalidArgumentError("--chunk_kib must be in 1..4096 (the server's chunk limit is 4 MiB)");
  }
  return options;
}

absl::StatusOr<v1::AggregationSpec> SpecFromFlags() {
  v1::AggregationSpec spec;
  FEDAGG_ASSIGN_OR_RETURN(ValueType type, ParseValueType(absl::GetFlag(FLAGS_type)));
  *spec.mutable_value_type() = ValueTypeToProto(type);
  FEDAGG_ASSIGN_OR_RETURN(std::vector<v1::FieldIntrinsic> intrinsics, ParseIntrinsicList(absl::GetFlag(FLAGS_intrinsics)));
  FEDAGG_RETURN_IF_ERROR(ApplyEncodingToLinearFields(absl::GetFlag(FLAGS_encoding), intrinsics));
  for (const v1::FieldIntrinsic& field : intrinsics) *spec.add_intrinsics() = field;
  // Rotated fields get their seeds here (the root keeps a creator's), as the updates are
  // encoded once, before the aggregations are created.
  uint64_t next = absl::GetFlag(FLAGS_seed);
  AssignRotationSeeds(spec, [&] { return Mix64(++next); });
  spec.set_min_contributions(absl::GetFlag(FLAGS_clients));
  spec.set_float64_accumulation(absl::GetFlag(FLAGS_float64));
  spec.set_deterministic(absl::GetFlag(FLAGS_deterministic));
  FEDAGG_ASSIGN_OR_RETURN(std::optional<v1::DifferentialPrivacy> privacy, ParsePrivacy(absl::GetFlag(FLAGS_privacy)));
  if (privacy.has_value()) *spec.mutable_privacy() = *privacy;
  FEDAGG_ASSIGN_OR_RETURN(std::optional<v1::SecureAggregation> secure,
                          ParseSecureAggregation(absl::GetFlag(FLAGS_secure)));
  if (secure.has_value()) {
    *spec.mutable_secure() = *secure;
    // The clients planned to leave before their update counts are not waited for.
    const int64_t clients = absl::GetFlag(FLAGS_clients);
    spec.set_min_contributions(std::max<int64_t>(
        1, clients - FaultPlan::Picked(absl::GetFlag(FLAGS_leave_before_sharing), clients) -
               FaultPlan::Picked(absl::GetFlag(FLAGS_leave_before_input), clients)));
  }
  spec.set_aggregation_id(absl::StrCat(absl::GetFlag(FLAGS_id_prefix), "-", absl::ToUnixMillis(absl::Now())));
  return spec;
}

int Run() {
  std::string token;
  if (!absl::GetFlag(FLAGS_token_file).empty()) {
    absl::StatusOr<std::string> read = ReadFile(absl::GetFlag(FLAGS_token_file));
    if (!read.ok()) return Usage(read.status());
    token = std::string(absl::StripAsciiWhitespace(*read));
  }
  absl::StatusOr<RunOptions> options = RunOptionsFromFlags(token);
  if (!options.ok()) return Usage(options.status());
  const bool sink = absl::GetFlag(FLAGS_sink);
  const bool join = !absl::GetFlag(FLAGS_aggregation_id).empty();
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (rounds < 1) return Usage(absl::InvalidArgumentError("--rounds must be at least 1"));
  if (join && (rounds > 1 || sink)) {
    return Usage(absl::InvalidArgumentError("--aggregation_id joins one aggregation: not with --rounds > 1 or --sink"));
  }
  CallOptions call;
  call.token = token;
  call.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  grpc::ChannelArguments args = FedaggChannelArguments();
  args.SetMaxReceiveMessageSize(-1);
  ControlClient control(grpc::CreateCustomChannel(absl::GetFlag(FLAGS_control), grpc::InsecureChannelCredentials(), args),
                        call);

  absl::StatusOr<v1::AggregationSpec> spec;
  if (join) {
    absl::StatusOr<v1::AggregationStatus> status = control.Get(absl::GetFlag(FLAGS_aggregation_id));
    if (!status.ok()) {
      std::fprintf(stderr, "fedagg-loadgen: look up the aggregation to join: %s\n", status.status().ToString().c_str());
      return kFailed;
    }
    spec = status->spec();
  } else {
    spec = SpecFromFlags();
    if (!spec.ok()) return Usage(spec.status());
  }
  absl::StatusOr<AggregationConfig> config = ConfigFromProto(*spec);
  if (!config.ok()) return Usage(config.status());
  absl::StatusOr<std::vector<double>> densities = ParseDensities(absl::GetFlag(FLAGS_density));
  if (!densities.ok()) return Usage(densities.status());
  const int distinct = static_cast<int>(std::min<int64_t>(absl::GetFlag(FLAGS_distinct_updates), options->clients));
  absl::StatusOr<std::vector<GeneratedUpdate>> pool =
      GenerateUpdates(*config->reduction, *densities, distinct, absl::GetFlag(FLAGS_seed));
  if (!pool.ok()) return Usage(pool.status());

  LoadReport report;
  report.value_type = config->reduction->value_type().ToString();
  report.servers = options->servers;
  report.clients_per_round = options->clients;
  report.sink = sink;
  for (const GeneratedUpdate& update : *pool) {
    report.payload_bytes_per_update = std::max(report.payload_bytes_per_update, update.payload_bytes());
    report.model_bytes_per_update = std::max(report.model_bytes_per_update, update.model_bytes());
  }
  LoadRunner runner(*options);
  const std::string base_id = spec->aggregation_id();
  for (int round = 0; round < rounds && report.failure.empty(); ++round) {
    if (!join && rounds > 1) spec->set_aggregation_id(absl::StrCat(base_id, "-r", round));
    const std::string& id = spec->aggregation_id();
    report.aggregation_ids.push_back(id);
    const absl::Time round_start = absl::Now();
    // A secure aggregation's clients need the spec as the root made it (its key).
    v1::AggregationSpec made = *spec;
    if (!join && !sink) {
      absl::StatusOr<v1::AggregationStatus> created = control.Create(*spec);
      if (!created.ok()) {
        report.failure = absl::StrCat("create ", id, ": ", created.status().ToString());
        break;
      }
      made = created->spec();
    }
    const RunStats stats = made.has_secure() ? runner.RunSecure(made, *pool) : runner.Run(id, *pool);
    Accumulate(stats, report.totals);
    report.round_throughput.push_back({stats.elapsed, stats.counted(), stats.payload_bytes});
    if (sink) continue;
    if (absl::GetFlag(FLAGS_seal)) {
      absl::StatusOr<v1::AggregationStatus> sealed = control.Seal(id);
      if (!sealed.ok()) {
        report.failure = absl::StrCat("seal ", id, ": ", sealed.status().ToString());
        break;
      }
    }
    absl::StatusOr<v1::AggregationStatus> final = control.WatchUntilFinal(id);
    if (!final.ok() || final->state() != v1::FINALIZED) {
      report.failure = final.ok() ? absl::StrCat(id, " ended ", v1::AggregationState_Name(final->state()), ": ", final->detail())
                                  : absl::StrCat("watch ", id, ": ", final.status().ToString());
      break;
    }
    absl::StatusOr<AggregateResult> result = control.GetResult(id);
    if (!result.ok()) {
      report.failure = absl::StrCat("fetch the result of ", id, ": ", result.status().ToString());
      break;
    }
    report.round_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - round_start));
    report.checks.push_back(CheckResult(*config->reduction, *pool, stats.counted_per_update, *result));
  }
  std::fputs((absl::GetFlag(FLAGS_json) ? JsonReport(report) : HumanReport(report)).c_str(), stdout);
  return report.passed() ? kPassed : kFailed;
}

}  // namespace
}  // namespace fedagg::loadgen

int main(int argc, char** argv) {
  fedagg::TurnOffAbseilDeadlockDetection();
  fedagg::SetProgramUsage(
      "Runs N logical clients against a running fedagg tree and checks the result.\n"
      "  fedagg-loadgen --control=ROOT:PORT [--servers=A:PORT,B:PORT] --clients=N [flags]");
  fedagg::ParseProgramCommandLine(argc, argv);
  return fedagg::loadgen::Run();
}
