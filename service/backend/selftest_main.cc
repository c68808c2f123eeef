// fedagg-selftest: checks every intrinsic of one backend against the float64 reference
// and the CPU backend on random data (backend_check.h) and prints a pass/fail table.
// Exit status: 0 all passed, 1 some failed, 2 bad usage, 77 backend not available on
// this machine (no GPU: ctest shows it as skipped). The first thing to run on a new GPU
// machine (docs/GPU.md).
#include <cstdio>
#include <random>
#include <string>

#include "service/core/abseil_deadlock_detection.h"
#include "service/core/program_usage.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_join.h"
#include "service/backend/backend_check.h"
#include "service/backend/backend_choice.h"

ABSL_FLAG(std::string, backend, "cpu", "backend to check: cpu, thrust-omp or cuda");
ABSL_FLAG(std::string, devices, "all",
          "devices of the backend: all, or ids such as 0,1 (thrust-omp: that many simulated devices)");
ABSL_FLAG(std::string, cuda_plugin, "",
          "cuda: the plugin to check (libfedagg_backend_cuda.so of this or another build of the "
          "same interface); empty: the one beside this program");
ABSL_FLAG(uint64_t, seed, 0, "random seed (0: a fresh one, printed)");
ABSL_FLAG(int, rounds, 3, "random data sets per intrinsic and dtype");

namespace {
constexpr int kSkipped = 77;
}  // namespace

int main(int argc, char** argv) {
  fedagg::TurnOffAbseilDeadlockDetection();
  fedagg::SetProgramUsage(
      "fedagg-selftest --backend=cpu|thrust-omp|cuda [--devices=all|0,1,...] [--cuda_plugin=PATH]: "
      "every intrinsic of one backend against the float64 reference, as a pass/fail table");
  fedagg::ParseProgramCommandLine(argc, argv);
  const std::string name = absl::GetFlag(FLAGS_backend);
  if (name == "auto") {
    std::fprintf(stderr, "fedagg-selftest: name a backend (%s), not auto\n",
                 absl::StrJoin(fedagg::BuiltBackends(), ", ").c_str());
    return 2;
  }
  absl::StatusOr<fedagg::DeviceSelection> devices = fedagg::ParseDeviceSelection(absl::GetFlag(FLAGS_devices));
  if (!devices.ok()) {
    std::fprintf(stderr, "fedagg-selftest: %s\n", std::string(devices.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<fedagg::BackendChoice> choice = fedagg::ChooseBackend(
      name, fedagg::BackendOptions{.devices = *devices, .cuda_plugin = absl::GetFlag(FLAGS_cuda_plugin)});
  if (!choice.ok()) {
    const std::string message(choice.status().message());
    if (choice.status().code() == absl::StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "fedagg-selftest: %s\n", message.c_str());
      return 2;
    }
    std::printf("fedagg-selftest: SKIPPED: %s\n", message.c_str());
    return kSkipped;
  }
  uint64_t seed = absl::GetFlag(FLAGS_seed);
  if (seed == 0) seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  std::printf("fedagg-selftest: backend %s, seed %llu (--seed=%llu replays this run)\n%s\n\n",
              name.c_str(), static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed),
              choice->reason.c_str());
  std::printf("%-24s %-9s %-12s %s\n", "intrinsic", "dtype", "max rel err", "result");
  int failed = 0, total = 0;
  const std::vector<fedagg::BackendCase> cases = fedagg::AllBackendCases();
  for (size_t i = 0; i < cases.size(); ++i) {
    double worst = 0;
    std::string detail;
    for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
      const fedagg::BackendCheckResult result =
          fedagg::CheckBackend(*choice->backend, cases[i], seed + 1000 * round + i);
      worst = std::max(worst, result.max_relative_error);
      if (!result.passed && detail.empty()) detail = result.detail;
    }
    ++total;
    if (!detail.empty()) ++failed;
    std::printf("%-24s %-9s %-12.3g %s%s%s\n",
                std::string(fedagg::IntrinsicName(cases[i].intrinsic)).c_str(),
                std::string(fedagg::DTypeName(cases[i].dtype)).c_str(), worst,
                detail.empty() ? "PASS" : "FAIL", detail.empty() ? "" : ": ", detail.c_str());
  }
  std::printf("\n%d of %d cases passed on the %s backend\n", total - failed, total, name.c_str());
  return failed == 0 ? 0 : 1;
}
