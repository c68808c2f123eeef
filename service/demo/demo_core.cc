// fedagg-demo-core: the aggregation core end to end, in one process. Simulated clients
// send updates of a small model (dense layers, a row-sparse embedding table, sparse token
// counts); two simulated intermediate aggregators each reduce half of them in batches,
// serialize their partial aggregates, and a simulated root merges them and reports.
// The result is checked against the float64 reference reduction.
#include <cstdio>
#include <random>
#include <vector>

#include "service/core/abseil_deadlock_detection.h"
#include "service/core/program_usage.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service/core/partial_aggregate.h"
#include "service/core/reference_reducer.h"
#include "service/demo/simulated_model.h"

ABSL_FLAG(int, clients, 200, "number of simulated clients");
ABSL_FLAG(int, batch, 32, "updates reduced per batch");
ABSL_FLAG(uint64_t, seed, 1, "random seed for the simulated updates");

namespace fedagg {
namespace {

int Run() {
  absl::StatusOr<std::shared_ptr<const ReductionSpec>> spec =
      ReductionSpec::Create(demo::SimulatedModelType(), demo::SimulatedModelIntrinsics());
  if (!spec.ok()) {
    std::fprintf(stderr, "spec: %s\n", spec.status().ToString().c_str());
    return 1;
  }
  std::printf("aggregation type: %s\n", (*spec)->value_type().ToString().c_str());
  for (const FieldSpec& field : (*spec)->fields()) {
    std::printf("  %-13s %-16s %s\n", field.path.c_str(), field.type.ToString().c_str(),
                std::string(IntrinsicName(field.intrinsic)).c_str());
  }

  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  const int clients = absl::GetFlag(FLAGS_clients);
  const size_t batch = static_cast<size_t>(std::max(1, absl::GetFlag(FLAGS_batch)));
  std::vector<demo::SimulatedUpdate> updates;
  for (int i = 0; i < clients; ++i) updates.push_back(demo::MakeUpdate(rng));
  std::vector<UpdateView> views;
  for (const demo::SimulatedUpdate& u : updates) views.push_back(u.View());

  const absl::Time start = absl::Now();
  // Two intermediate aggregators, each taking every other client, in batches.
  std::vector<std::string> forwarded;
  for (int node = 0; node < 2; ++node) {
    PartialAggregate partial(*spec);
    std::vector<UpdateView> pending;
    for (size_t i = node; i < views.size(); i += 2) {
      pending.push_back(views[i]);
      if (pending.size() == batch || i + 2 >= views.size()) {
        if (absl::Status s = partial.AccumulateBatch(pending); !s.ok()) {
          std::fprintf(stderr, "accumulate: %s\n", s.ToString().c_str());
          return 1;
        }
        pending.clear();
      }
    }
    absl::StatusOr<std::string> bytes = partial.Serialize();
    if (!bytes.ok()) {
      std::fprintf(stderr, "serialize: %s\n", bytes.status().ToString().c_str());
      return 1;
    }
    forwarded.push_back(*std::move(bytes));
    std::printf("intermediate aggregator %d: %lld contributions, forwards %zu bytes\n", node,
                static_cast<long long>(partial.contributions()), forwarded.back().size());
  }
  // The root merges what its children forwarded.
  PartialAggregate root(*spec);
  for (const std::string& bytes : forwarded) {
    absl::StatusOr<PartialAggregate> child = PartialAggregate::Deserialize(*spec, bytes);
    absl::Status merged = child.ok() ? root.MergeWith(*child) : child.status();
    if (!merged.ok()) {
      std::fprintf(stderr, "merge: %s\n", merged.ToString().c_str());
      return 1;
    }
  }
  absl::StatusOr<AggregateResult> result = root.Report();
  const absl::Duration elapsed = absl::Now() - start;
  if (!result.ok()) {
    std::fprintf(stderr, "report: %s\n", result.status().ToString().c_str());
    return 1;
  }
  std::printf("root: %lld contributions, total weight %.1f, reduced in %s\n",
              static_cast<long long>(result->contributions), result->weight_sum,
              absl::FormatDuration(elapsed).c_str());
  return demo::PrintAndCheck(**spec, updates, *result);
}

}  // namespace
}  // namespace fedagg

int main(int argc, char** argv) {
  fedagg::TurnOffAbseilDeadlockDetection();
  fedagg::SetProgramUsage(
      "Aggregates simulated client updates in-process through two simulated intermediate "
      "aggregators and a root, and checks the result against the reference.");
  fedagg::ParseProgramCommandLine(argc, argv);
  return fedagg::Run();
}
