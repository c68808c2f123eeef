// Finds the CUDA devices this process can use. Used by --backend=auto to choose between
// the CUDA and CPU backends, and by GPU tests to skip themselves on machines without one.
#ifndef FEDAGG_CUDA_DEVICE_PROBE_H_
#define FEDAGG_CUDA_DEVICE_PROBE_H_

#include "absl/status/statusor.h"

namespace fedagg::cuda {

// The number of usable CUDA devices (>= 1), or UNAVAILABLE with the runtime's reason
// (no driver, no device) — never a crash.
absl::StatusOr<int> UsableDeviceCount();

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_DEVICE_PROBE_H_
