// fedagg-server's backend flags: which backend reduces, on which devices, where the cuda
// plugin is, and how device backends stage batches.
#include <algorithm>

#include "absl/flags/flag.h"
#include "service/flags/server_flags.h"
#include "service/core/status_macros.h"

ABSL_FLAG(std::string, backend, "auto",
          "reduction backend: auto (cuda when a CUDA device is found, else cpu), cpu, cuda, or "
          "thrust-omp (the CUDA backend's code on the CPU's cores, for checking); docs/GPU.md");
ABSL_FLAG(std::string, devices, "all",
          "devices to reduce on: all (every CUDA device found) or ids such as 0,2; batches go to "
          "them in turn and Serialize / Report sum them with NCCL. With --backend=thrust-omp, the "
          "list's length is a number of simulated devices on the CPU (a test aid); docs/GPU.md");
ABSL_FLAG(std::string, cuda_plugin, "",
          "path of the cuda backend plugin (libfedagg_backend_cuda.so), loaded when --backend=cuda, "
          "or auto on a host whose NVIDIA driver finds a device; empty: the one beside this program");
ABSL_FLAG(int, staging_slots, 4,
          "cuda / thrust-omp: slots of the staging ring that overlaps receiving, copying to the "
          "device and reducing (each --staging_slot_mib of host memory, pinned for cuda, plus as "
          "much device memory; counted in --memory_budget_bytes)");
ABSL_FLAG(int, staging_slot_mib, 64,
          "cuda / thrust-omp: MiB of one staging slot; a batch larger than a slot is staged in parts");

namespace fedagg {

absl::StatusOr<BackendChoice> ChooseBackendFromFlags() {
  BackendOptions options;
  FEDAGG_ASSIGN_OR_RETURN(options.devices, ParseDeviceSelection(absl::GetFlag(FLAGS_devices)));
  options.cuda_plugin = absl::GetFlag(FLAGS_cuda_plugin);
  options.staging_slots = absl::GetFlag(FLAGS_staging_slots);
  options.staging_slot_bytes = static_cast<uint64_t>(std::max(absl::GetFlag(FLAGS_staging_slot_mib), 0)) << 20;
  return ChooseBackend(absl::GetFlag(FLAGS_backend), options);
}

}  // namespace fedagg
