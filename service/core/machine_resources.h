// What this process may use of the machine it runs on: CPU cores and memory, as the
// kernel grants them — the CPUs of its affinity mask, and a container's cgroup (v2)
// limits (cpu.max, memory.max) when they are lower, so that a server in a pod with a
// 4-CPU limit on a 64-core node sizes itself for 4. Used to derive defaults (the ingest
// window, ingest_window_size.h).
#ifndef FEDAGG_SERVICE_CORE_MACHINE_RESOURCES_H_
#define FEDAGG_SERVICE_CORE_MACHINE_RESOURCES_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace fedagg {

struct MachineResources {
  int cores = 1;              // at least 1
  uint64_t memory_bytes = 0;  // physical memory, or the cgroup's limit when lower
};

// This process's resources, read now.
MachineResources ReadMachineResources();

// The cores a cgroup v2 `cpu.max` ("QUOTA PERIOD", or "max PERIOD") allows, rounded up;
// nullopt for no limit or text that is not cpu.max's.
std::optional<int> CoresFromCpuMax(absl::string_view cpu_max);
// The bytes a cgroup v2 `memory.max` ("max" or a number) allows; nullopt for no limit or
// text that is not memory.max's.
std::optional<uint64_t> BytesFromMemoryMax(absl::string_view memory_max);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_MACHINE_RESOURCES_H_
