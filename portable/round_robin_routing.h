// RoundRobinRouting: which device's reducer takes the next batch of a MultiDeviceReducer
// (multi_device_reducer.h) — each device in turn. A policy that weighs the devices' load
// would replace it behind the same Next(batch).
#ifndef FEDAGG_PORTABLE_ROUND_ROBIN_ROUTING_H_
#define FEDAGG_PORTABLE_ROUND_ROBIN_ROUTING_H_

#include <cstddef>

#include "portable/field_reducer.h"

namespace fedagg::portable {

class RoundRobinRouting {
 public:
  explicit RoundRobinRouting(size_t devices) : devices_(devices) {}

  // The device (0 .. devices-1) that reduces `batch`.
  size_t Next(const HostBatch& /*batch*/) {
    const size_t device = next_;
    next_ = (next_ + 1) % devices_;
    return device;
  }

 private:
  const size_t devices_;
  size_t next_ = 0;
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_ROUND_ROBIN_ROUTING_H_
