// DeviceSelection: the devices a backend reduces on, from --devices: "all" (every device
// the backend finds; the default) or a list of distinct device ids, "0,2". The cuda
// backend takes CUDA device ids; the thrust-omp backend takes the list's length as its
// number of simulated devices (a test aid, docs/GPU.md); the cpu backend has no devices.
#ifndef FEDAGG_SERVICE_BACKEND_DEVICE_SELECTION_H_
#define FEDAGG_SERVICE_BACKEND_DEVICE_SELECTION_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fedagg {

// nullopt: all devices; otherwise the ids, in the order given, none repeated.
using DeviceSelection = std::optional<std::vector<int>>;

// INVALID_ARGUMENT, saying what is wrong, for anything but "all" or distinct ids >= 0.
absl::StatusOr<DeviceSelection> ParseDeviceSelection(absl::string_view flag);

// "all" or "0,2": the flag's form, for messages.
std::string DeviceSelectionName(const DeviceSelection& devices);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_BACKEND_DEVICE_SELECTION_H_
