// fedagg-demo: drives a running fedagg tree — a root and intermediate aggregators, as
// scripts/demo.sh starts them on loopback. It creates an aggregation of the simulated
// model at the root, runs simulated clients against the intermediate aggregators in
// parallel streams, seals at the root, fetches the result and checks it against the
// float64 reference over the same updates. Then a second round of the same updates with
// the dense layers quantized to 8 bits on the wire (docs/SEMANTICS.md section 11): its
// error against the plain reference must stay within the quantization's bound.
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "service/core/abseil_deadlock_detection.h"
#include "service/core/program_usage.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client_stub/client.h"
#include "service/core/reference_reducer.h"
#include "service/demo/simulated_model.h"
#include "service/core/status_macros.h"
#include "service/rounds/spec_conversion.h"

ABSL_FLAG(std::string, root, "127.0.0.1:50051", "the root aggregator (server placement)");
ABSL_FLAG(std::string, intermediates, "127.0.0.1:50052,127.0.0.1:50053",
          "comma-separated intermediate aggregators the clients connect to");
ABSL_FLAG(int, clients, 200, "number of simulated clients");
ABSL_FLAG(uint64_t, seed, 1, "random seed for the simulated updates");

namespace fedagg {
namespace {

int Fail(const absl::Status& status, const char* what) {
  std::fprintf(stderr, "fedagg-demo: %s: %s\n", what, status.ToString().c_str());
  return 1;
}

// Sends every update through the intermediate aggregators (one thread per aggregator,
// one stream per simulated client), seals at the root and fetches the result.
absl::StatusOr<AggregateResult> RunRound(const v1::AggregationSpec& spec, const std::vector<demo::SimulatedUpdate>& updates,
                                         const std::vector<std::string>& intermediates, ControlClient& control) {
  absl::StatusOr<v1::AggregationStatus> created = control.Create(spec);
  if (!created.ok()) return created.status();
  std::printf("created %s at the root: %s\n", spec.aggregation_id().c_str(),
              ValueTypeFromProto(spec.value_type())->ToString().c_str());
  const absl::Time start = absl::Now();
  std::vector<std::thread> senders;
  std::vector<absl::Status> errors(intermediates.size());
  for (size_t s = 0; s < intermediates.size(); ++s) {
    senders.emplace_back([&, s] {
      auto channel = ConnectToFedagg(intermediates[s], grpc::InsecureChannelCredentials());
      for (size_t i = s; i < updates.size(); i += intermediates.size()) {
        auto stream = ContributeStream::Open(channel, absl::StrCat("demo-client-", i));
        absl::StatusOr<v1::Ack> ack =
            stream.ok() ? (*stream)->Contribute(spec, updates[i].View()) : stream.status();
        if (!ack.ok()) {
          errors[s] = ack.status();
          return;
        }
      }
    });
  }
  for (std::thread& t : senders) t.join();
  for (const absl::Status& error : errors) {
    if (!error.ok()) return error;
  }
  std::printf("%zu clients contributed through %zu intermediate aggregators in %s\n", updates.size(),
              intermediates.size(), absl::FormatDuration(absl::Now() - start).c_str());
  FEDAGG_RETURN_IF_ERROR(control.Seal(spec.aggregation_id()).status());
  FEDAGG_ASSIGN_OR_RETURN(const v1::AggregationStatus final, control.WatchUntilFinal(spec.aggregation_id()));
  std::printf("aggregation %s: %s with %lld contributions from %lld child aggregators%s%s\n",
              spec.aggregation_id().c_str(), v1::AggregationState_Name(final.state()).c_str(),
              static_cast<long long>(final.contributions()), static_cast<long long>(final.children()),
              final.detail().empty() ? "" : ": ", final.detail().c_str());
  if (final.state() != v1::FINALIZED) return absl::FailedPreconditionError("the aggregation did not finalize");
  return control.GetResult(spec.aggregation_id());
}

int Run() {
  const std::vector<std::string> intermediates =
      absl::StrSplit(absl::GetFlag(FLAGS_intermediates), ',', absl::SkipEmpty());
  const int clients = absl::GetFlag(FLAGS_clients);

  v1::AggregationSpec spec;
  spec.set_aggregation_id(absl::StrCat("demo-round-", absl::ToUnixMillis(absl::Now())));
  *spec.mutable_value_type() = ValueTypeToProto(demo::SimulatedModelType());
  for (const FieldIntrinsic& field : demo::SimulatedModelIntrinsics()) {
    v1::FieldIntrinsic* proto = spec.add_intrinsics();
    proto->set_intrinsic(static_cast<v1::Intrinsic>(static_cast<int>(field.intrinsic)));
    proto->set_report_counts(field.report_counts);
  }
  spec.set_min_contributions(clients);
  spec.set_require_finite(true);

  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  std::vector<demo::SimulatedUpdate> updates;
  for (int i = 0; i < clients; ++i) updates.push_back(demo::MakeUpdate(rng));

  ControlClient control(ConnectToFedagg(absl::GetFlag(FLAGS_root), grpc::InsecureChannelCredentials()));
  absl::StatusOr<AggregateResult> result = RunRound(spec, updates, intermediates, control);
  if (!result.ok()) return Fail(result.status(), "the plain round");
  absl::StatusOr<AggregationConfig> config = ConfigFromProto(spec);
  if (const int code = demo::PrintAndCheck(*config->reduction, updates, *result); code != 0) return code;

  // The same updates, the dense layers sent as 8-bit quantized values: about a quarter of
  // their bytes on the wire, decoded as the nodes add them.
  v1::AggregationSpec encoded = spec;
  encoded.set_aggregation_id(absl::StrCat(spec.aggregation_id(), "-quantized8"));
  const ValueEncoding quantized = ValueEncoding::Quantized(8);
  for (int f : {0, 1}) *encoded.mutable_intrinsics(f)->mutable_encoding() = ValueEncodingToProto(quantized);
  std::printf("\nthe same updates, dense layers as %s (%.3f bits a coordinate on the wire instead of 32):\n",
              quantized.ToString().c_str(),
              8.0 * static_cast<double>(quantized.EncodedBytes(256 * 64)) / (256 * 64));
  absl::StatusOr<AggregateResult> quantized_result = RunRound(encoded, updates, intermediates, control);
  if (!quantized_result.ok()) return Fail(quantized_result.status(), "the quantized round");
  return demo::CheckQuantized(*config->reduction, updates, *quantized_result, quantized);
}
}  // namespace
}  // namespace fedagg

int main(int argc, char** argv) {
  fedagg::TurnOffAbseilDeadlockDetection();
  fedagg::SetProgramUsage("Runs simulated clients through a running fedagg tree and checks the result.");
  fedagg::ParseProgramCommandLine(argc, argv);
  return fedagg::Run();
}
