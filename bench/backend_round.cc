// fedagg-backend-round: weighted-mean rounds on fedagg's CPU backend alone (no service, no
// network), fed from the update file that bench/peers_bench.py writes, so that fedagg's
// reduction and the peers' aggregation functions see the same inputs. Client i sends
// update i % K of the file with weight 1 + i % 7 (the rule peers_bench.py uses too). Each
// update is copied into a fresh UpdateBuffer (what the server receives an update into), as
// if it had just arrived, reduced in batches closed at --batch_size updates or
// --batch_max_mib as the server closes them, then released. The last round's mean goes to --out
// (raw float32) for the caller to check against its float64 reference.
// Prints one JSON line: seconds per round, the RSS before the first round and the peak.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "service/core/abseil_deadlock_detection.h"
#include "service/core/program_usage.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "service/core/partial_aggregate.h"
#include "service/core/read_file.h"
#include "service/core/update_buffer.h"

ABSL_FLAG(std::string, updates_file, "", "K updates of --elements float32 values each, back to back");
ABSL_FLAG(int64_t, elements, 0, "float32 elements per update");
ABSL_FLAG(int64_t, clients, 100, "updates per round");
ABSL_FLAG(int, batch_size, 16, "updates reduced in one pass at most (the server's --batch_size)");
ABSL_FLAG(int, batch_max_mib, 64, "a batch is reduced once it holds this many MiB (the server's --batch_max_mib)");
ABSL_FLAG(int, rounds, 3, "rounds to time");
ABSL_FLAG(std::string, out, "", "where the last round's mean is written (raw float32)");

namespace fedagg {
namespace {

int64_t StatusKib(const char* key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::string(key).size()));
  }
  return -1;
}

absl::Status Run() {
  const int64_t elements = absl::GetFlag(FLAGS_elements);
  const int64_t clients = absl::GetFlag(FLAGS_clients);
  const int batch_size = absl::GetFlag(FLAGS_batch_size);
  if (elements <= 0 || clients <= 0 || batch_size <= 0 || absl::GetFlag(FLAGS_rounds) <= 0) {
    return absl::InvalidArgumentError("--elements, --clients, --batch_size and --rounds must be positive");
  }
  absl::StatusOr<std::string> file = ReadFile(absl::GetFlag(FLAGS_updates_file));
  if (!file.ok()) return file.status();
  const size_t update_bytes = static_cast<size_t>(elements) * sizeof(float);
  if (file->empty() || file->size() % update_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s holds %d bytes, not a whole number of updates of %d float32 values",
        absl::GetFlag(FLAGS_updates_file), file->size(), elements));
  }
  const int64_t distinct = static_cast<int64_t>(file->size() / update_bytes);
  absl::StatusOr<std::shared_ptr<const ReductionSpec>> spec = ReductionSpec::Create(
      ValueType::Tensor(DType::kFloat32, {elements}), {{Intrinsic::kFederatedWeightedMean}});
  if (!spec.ok()) return spec.status();

  const int64_t idle_kib = StatusKib("VmRSS:");
  std::vector<double> seconds;
  std::vector<float> mean;
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    const auto start = std::chrono::steady_clock::now();
    PartialAggregate partial(*spec);
    // The server closes a batch at --batch_size updates, or at the first update that brings
    // it to --batch_max_mib.
    const int64_t max_bytes = int64_t{absl::GetFlag(FLAGS_batch_max_mib)} << 20;
    const int64_t per_batch = std::min<int64_t>(
        batch_size, std::max<int64_t>(1, (max_bytes + static_cast<int64_t>(update_bytes) - 1) /
                                             static_cast<int64_t>(update_bytes)));
    for (int64_t first = 0; first < clients; first += per_batch) {
      const int64_t count = std::min(per_batch, clients - first);
      std::vector<UpdateBuffer> arrived;
      std::vector<UpdateView> views;
      for (int64_t k = 0; k < count; ++k) {
        const int64_t client = first + k;
        absl::StatusOr<UpdateBuffer> buffer =
            UpdateBuffer::Create(**spec, {0}, 1.0 + client % 7, update_bytes);
        if (!buffer.ok()) return buffer.status();
        absl::Span<std::byte> values = buffer->section(0, UpdateBuffer::Section::kValues);
        std::memcpy(values.data(), file->data() + (client % distinct) * update_bytes, values.size());
        arrived.push_back(*std::move(buffer));
      }
      for (const UpdateBuffer& buffer : arrived) views.push_back(buffer.view());
      if (absl::Status s = partial.AccumulateBatch(views); !s.ok()) return s;
    }
    absl::StatusOr<AggregateResult> result = partial.Report();
    if (!result.ok()) return result.status();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    const auto values = result->fields[0].value.values<float>();
    mean.assign(values.begin(), values.end());
  }
  std::ofstream out(absl::GetFlag(FLAGS_out), std::ios::binary);
  out.write(reinterpret_cast<const char*>(mean.data()), static_cast<std::streamsize>(mean.size() * sizeof(float)));
  if (!out.good()) return absl::UnavailableError("cannot write " + absl::GetFlag(FLAGS_out));
  std::printf("{\"seconds\": [%s], \"idle_rss_kib\": %lld, \"peak_rss_kib\": %lld}\n",
              absl::StrJoin(seconds, ", ").c_str(), static_cast<long long>(idle_kib),
              static_cast<long long>(StatusKib("VmHWM:")));
  return absl::OkStatus();
}

}  // namespace
}  // namespace fedagg

int main(int argc, char** argv) {
  fedagg::TurnOffAbseilDeadlockDetection();
  fedagg::SetProgramUsage("Weighted-mean rounds on fedagg's CPU backend over an update file (bench/peers_bench.py).");
  fedagg::ParseProgramCommandLine(argc, argv);
  if (absl::Status status = fedagg::Run(); !status.ok()) {
    std::fprintf(stderr, "fedagg-backend-round: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
