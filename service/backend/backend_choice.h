// Chooses the reduction backend from --backend: "cpu"; "cuda" (a GPU through the CUDA
// backend); "thrust-omp" (the CUDA backend's portable reduction on the CPU's cores,
// for checking it without a GPU); "auto" = cuda when the NVIDIA driver finds a device and
// the cuda plugin loads, cpu otherwise. The cuda backend lives in a plugin
// (backend_plugin.h) loaded only then, so this code links no CUDA library. --devices
// (device_selection.h) picks the devices of cuda and the simulated devices of thrust-omp.
// The choice comes with the reason, for the log.
#ifndef FEDAGG_SERVICE_BACKEND_BACKEND_CHOICE_H_
#define FEDAGG_SERVICE_BACKEND_BACKEND_CHOICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/backend/device_selection.h"
#include "service/core/accumulator_factory.h"

namespace fedagg {

// How a device backend (thrust-omp, cuda) reduces: on which devices (--devices), and how
// it stages batches — one ring per device of `staging_slots` slots of
// `staging_slot_bytes` each (portable/staging_ring.h). The cpu backend has neither.
struct BackendOptions {
  DeviceSelection devices;
  std::string cuda_plugin;  // --cuda_plugin: the plugin's path; empty: beside the program
  int staging_slots = 4;
  uint64_t staging_slot_bytes = uint64_t{64} << 20;
};

struct BackendChoice {
  const AccumulatorFactory* backend = nullptr;  // process-wide, never freed
  std::string reason;                           // one line: why this backend
};

// INVALID_ARGUMENT for an unknown name, for staging options out of range, for devices the
// machine does not have and for devices given to the cpu backend; FAILED_PRECONDITION for
// a backend this build lacks and for cuda when its plugin is missing or cannot be loaded
// (naming what is missing); UNAVAILABLE for cuda on a machine without a usable device
// (with the reason). auto falls back to cpu, saying why, only with all devices: with
// devices named it fails as cuda would.
absl::StatusOr<BackendChoice> ChooseBackend(absl::string_view name, const BackendOptions& options = {});

// The backends --backend may name: "cpu", "thrust-omp" when this build has it, and
// "cuda" (a plugin, installed or not).
std::vector<std::string> BuiltBackends();

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_BACKEND_BACKEND_CHOICE_H_
