// Machine resources: the affinity mask, physical memory, and the cgroup v2 limits.
#include "service/core/machine_resources.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "service/core/read_file.h"

namespace fedagg {
namespace {

// The directory of this process's own cgroup (v2: /proc/self/cgroup holds "0::/path").
std::string OwnCgroupDirectory() {
  absl::StatusOr<std::string> membership = ReadFile("/proc/self/cgroup");
  std::string path;
  if (membership.ok()) {
    for (absl::string_view line : absl::StrSplit(*membership, '\n')) {
      if (absl::ConsumePrefix(&line, "0::")) path = std::string(absl::StripAsciiWhitespace(line));
    }
  }
  return "/sys/fs/cgroup" + (path == "/" ? "" : path);
}

// A file of that directory; empty when there is none (no cgroup v2, no limit file).
std::string CgroupFile(const std::string& directory, absl::string_view name) {
  absl::StatusOr<std::string> content = ReadFile(directory + "/" + std::string(name));
  return content.ok() ? *content : std::string();
}

}  // namespace

std::optional<int> CoresFromCpuMax(absl::string_view cpu_max) {
  std::vector<absl::string_view> parts = absl::StrSplit(absl::StripAsciiWhitespace(cpu_max), ' ');
  uint64_t quota = 0, period = 0;
  if (parts.size() != 2 || parts[0] == "max" || !absl::SimpleAtoi(parts[0], &quota) ||
      !absl::SimpleAtoi(parts[1], &period) || quota == 0 || period == 0) {
    return std::nullopt;
  }
  return static_cast<int>((quota + period - 1) / period);
}

std::optional<uint64_t> BytesFromMemoryMax(absl::string_view memory_max) {
  uint64_t bytes = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(memory_max), &bytes) || bytes == 0) return std::nullopt;
  return bytes;
}

MachineResources ReadMachineResources() {
  MachineResources resources;
  const std::string cgroup = OwnCgroupDirectory();
  cpu_set_t mask;
  CPU_ZERO(&mask);
  resources.cores = sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : 1;
  if (std::optional<int> limit = CoresFromCpuMax(CgroupFile(cgroup, "cpu.max"))) {
    resources.cores = std::min(resources.cores, *limit);
  }
  resources.cores = std::max(resources.cores, 1);
  const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
  resources.memory_bytes = pages > 0 && page_bytes > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_bytes) : 0;
  if (std::optional<uint64_t> limit = BytesFromMemoryMax(CgroupFile(cgroup, "memory.max"))) {
    resources.memory_bytes = resources.memory_bytes == 0 ? *limit : std::min(resources.memory_bytes, *limit);
  }
  return resources;
}

}  // namespace fedagg
