// The automatic ingest window: 16 MiB per core, within [64 MiB, 1 GiB], under the caps.
#include "service/core/ingest_window_size.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace fedagg {
namespace {
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kPerCore = 16 * kMiB;
constexpr uint64_t kSmallest = 64 * kMiB;
constexpr uint64_t kLargest = uint64_t{1} << 30;
constexpr uint64_t kLeast = kMiB;  // whatever the caps: an update is still received alone
}  // namespace

IngestWindowSize AutoIngestWindow(const MachineResources& machine, uint64_t memory_budget_bytes) {
  const int cores = std::max(machine.cores, 1);
  uint64_t bytes = std::clamp(kPerCore * static_cast<uint64_t>(cores), kSmallest, kLargest);
  std::string reason = absl::StrCat("auto: ", cores, cores == 1 ? " core" : " cores");
  if (memory_budget_bytes > 0 && bytes > memory_budget_bytes / 4) {
    bytes = memory_budget_bytes / 4;
    absl::StrAppend(&reason, ", a quarter of --memory_budget_bytes");
  }
  if (machine.memory_bytes > 0 && bytes > machine.memory_bytes / 16) {
    bytes = machine.memory_bytes / 16;
    absl::StrAppend(&reason, ", a sixteenth of the machine's ", machine.memory_bytes / kMiB, " MiB");
  }
  bytes = std::max(bytes, kLeast);
  return {bytes, reason};
}

}  // namespace fedagg
