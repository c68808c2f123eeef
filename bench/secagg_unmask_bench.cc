// The root's unmasking of one secure-aggregation cohort (issue 49's goal: N = 1,000
// clients, 1M coordinates, 30% dropping out after their masked input, <= 10 s on the
// 2-core machine). The cohort's stages run for real (keys, shares sealed to neighbours,
// unmasking shares sealed to the root) on a small field; the root then unmasks a sum of
// --coordinates (masks depend on the seeds and the field, not on the field's size, so the
// work timed is the real one: opening the responses, recovering every client's seed with
// Shamir, expanding and removing a mask of --coordinates words per client on every core).
// Prints each run's seconds and the median [min-max].
//   fedagg-secagg-unmask-bench [--clients=1000] [--coordinates=1048576] [--dropout=0.3]
//                              [--degree=72] [--threshold=24] [--repeat=3] [--masks=cpu|thrust-omp|cuda]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#ifdef FEDAGG_BENCH_THRUST_OMP
#include "portable/omp_mask_accumulator.h"
#endif
#ifdef FEDAGG_BENCH_CUDA
#include "cuda/device_masks.h"
#endif
#include "service/core/machine_resources.h"
#include "service/core/program_usage.h"
#include "service/secagg/secagg_client.h"
#include "service/secagg/secagg_unmasker.h"

ABSL_FLAG(int, clients, 1000, "clients in the cohort");
ABSL_FLAG(int64_t, coordinates, int64_t{1} << 20, "coordinates of the sum the root unmasks");
ABSL_FLAG(double, dropout, 0.3, "fraction of the clients that drop out after their masked input");
ABSL_FLAG(double, dropout_before_masking, 0.0,
          "fraction of the clients that drop out after sharing keys, before their masked input (the root then "
          "removes their pairwise masks with each neighbour: the protocol's costly case)");
ABSL_FLAG(int, degree, 72, "neighbours of each client (SecAgg+'s graph)");
ABSL_FLAG(int, threshold, 24, "shares needed to recover a secret");
ABSL_FLAG(int, repeat, 3, "timed unmaskings");
ABSL_FLAG(std::string, masks, "cpu",
          "where the masks are expanded: cpu (OpenSSL on every core), thrust-omp (the portable code a GPU runs, "
          "on the CPU's cores), cuda (the device; with the copies of the sum to it and back)");

namespace fedagg {
namespace {

int Main() {
  const int n = absl::GetFlag(FLAGS_clients);
  absl::StatusOr<SecAggUnmasker> root = SecAggUnmasker::Create();
  if (!root.ok()) return 1;
  SecAggCohort cohort;
  cohort.context = "bench";
  cohort.threshold = absl::GetFlag(FLAGS_threshold);
  cohort.field_sizes = {16};  // the clients' stages on a small field
  cohort.root_public_key = root->public_key();
  absl::StatusOr<NeighbourGraph> graph = NeighbourGraph::Harary(n, absl::GetFlag(FLAGS_degree), MaskSeed{});
  if (!graph.ok()) {
    std::fprintf(stderr, "%s\n", graph.status().ToString().c_str());
    return 2;
  }
  cohort.graph = *std::move(graph);
  std::vector<SecAggClient> clients;
  for (int c = 0; c < n; ++c) {
    absl::StatusOr<SecAggClient> client = SecAggClient::Create();
    if (!client.ok()) return 1;
    clients.push_back(*std::move(client));
    cohort.keys.push_back(clients.back().keys());
  }
  const auto setup_start = std::chrono::steady_clock::now();
  std::vector<std::vector<SharedKeys>> inbox(static_cast<size_t>(n));
  for (int c = 0; c < n; ++c) {
    absl::StatusOr<std::vector<SharedKeys>> sent = clients[c].ShareKeys(cohort, c);
    if (!sent.ok()) {
      std::fprintf(stderr, "%s\n", sent.status().ToString().c_str());
      return 1;
    }
    for (SharedKeys& message : *sent) inbox[message.to].push_back(std::move(message));
  }
  const std::vector<std::vector<uint32_t>> input = {std::vector<uint32_t>(16, 1)};
  std::mt19937_64 rng(1);
  std::vector<bool> masked(static_cast<size_t>(n), true);
  int dropped_before = 0;
  for (int c = 0; c < n; ++c) {
    if (std::uniform_real_distribution<double>(0, 1)(rng) < absl::GetFlag(FLAGS_dropout_before_masking)) {
      masked[c] = false;
      ++dropped_before;
      continue;
    }
    if (!clients[c].MaskInput(cohort, inbox[c], input).ok()) return 1;
  }
  std::vector<UnmaskingShares> responses;
  int dropped = 0;
  for (int c = 0; c < n; ++c) {
    if (!masked[c]) continue;
    if (std::uniform_real_distribution<double>(0, 1)(rng) < absl::GetFlag(FLAGS_dropout)) {
      ++dropped;
      continue;
    }
    absl::StatusOr<UnmaskingShares> response = clients[c].Unmask(cohort, masked);
    if (!response.ok()) return 1;
    responses.push_back(*std::move(response));
  }
  const double setup = std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();
  std::printf("cohort: %d clients (degree %d, threshold %d), %d dropped before their masked input, %d after it; its "
              "stages took %.1f s\n",
              n, cohort.graph.degree(), cohort.threshold, dropped_before, dropped, setup);
  cohort.field_sizes = {static_cast<size_t>(absl::GetFlag(FLAGS_coordinates))};
  ThreadPool pool(std::max(1, ReadMachineResources().cores));
  SecAggUnmasker::MaskAdder add_masks;  // null: the CPU's MaskAccumulator
  const std::string where = absl::GetFlag(FLAGS_masks);
#ifdef FEDAGG_BENCH_THRUST_OMP
  if (where == "thrust-omp") add_masks = AddMasksOnThrustOmp;
#endif
#ifdef FEDAGG_BENCH_CUDA
  if (where == "cuda") add_masks = std::bind_front(cuda::AddMasksOnDevice, 0);
#endif
  if (where != "cpu" && add_masks == nullptr) {
    std::fprintf(stderr, "--masks=%s is not built here (cpu%s%s)\n", where.c_str(),
#ifdef FEDAGG_BENCH_THRUST_OMP
                 ", thrust-omp",
#else
                 "",
#endif
#ifdef FEDAGG_BENCH_CUDA
                 ", cuda");
#else
                 "");
#endif
    return 2;
  }
  std::vector<double> seconds;
  for (int run = 0; run < absl::GetFlag(FLAGS_repeat); ++run) {
    std::vector<std::vector<uint32_t>> sum = {std::vector<uint32_t>(cohort.field_sizes[0], 0)};
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<std::vector<uint32_t>>> unmasked =
        root->Unmask(cohort, std::vector<bool>(static_cast<size_t>(n), true), masked, responses, std::move(sum), &pool,
                     add_masks);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!unmasked.ok()) {
      std::fprintf(stderr, "unmasking failed: %s\n", unmasked.status().ToString().c_str());
      return 1;
    }
    std::printf("run %d: unmasked %zu coordinates of %d clients in %.2f s (masks: %s; %d host threads)\n", run + 1,
                cohort.field_sizes[0], n, seconds.back(), where.c_str(), pool.threads());
  }
  std::sort(seconds.begin(), seconds.end());
  std::printf("unmasking: %.2f s median [%.2f-%.2f] (goal <= 10 s on 2 cores)\n", seconds[seconds.size() / 2],
              seconds.front(), seconds.back());
  return 0;
}

}  // namespace
}  // namespace fedagg

int main(int argc, char** argv) {
  fedagg::SetProgramUsage("fedagg-secagg-unmask-bench: the root's unmasking of one secure-aggregation cohort");
  fedagg::ParseProgramCommandLine(argc, argv);
  return fedagg::Main();
}
