// DeviceMonitor: what a backend that reduces on accelerator devices reports about them
// when /metrics is scraped — each device's memory, exported as
// fedagg_gpu_memory_used_bytes and fedagg_gpu_memory_total_bytes. A backend's
// AccumulatorFactory::device_monitor() returns one; a backend that reduces in host memory
// (cpu, thrust-omp) returns none and the server exports no device metric. Read on the
// metrics endpoint's thread at every scrape: implementations are thread-safe and quick.
#ifndef FEDAGG_SERVICE_CORE_DEVICE_MONITOR_H_
#define FEDAGG_SERVICE_CORE_DEVICE_MONITOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace fedagg {

struct DeviceMemoryReading {
  int device = 0;            // the device's index as the runtime numbers it
  uint64_t used_bytes = 0;   // in use on the device by every process: total minus free
  uint64_t total_bytes = 0;  // the device's memory
};

class DeviceMonitor {
 public:
  virtual ~DeviceMonitor() = default;
  // One reading per device the backend reduces on, taken now; an error, with the
  // runtime's message, when a device cannot be read.
  virtual absl::StatusOr<std::vector<DeviceMemoryReading>> ReadMemory() const = 0;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_DEVICE_MONITOR_H_
