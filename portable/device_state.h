// DeviceState: where a dense or scatter reducer keeps its state in its system's memory
// (device pointers on CUDA), for a merger that sums the state arrays of several devices in
// place (cuda/nccl_device_merger.h). Counts and weight sums are empty when not kept.
// C++17, no Thrust.
#ifndef FEDAGG_PORTABLE_DEVICE_STATE_H_
#define FEDAGG_PORTABLE_DEVICE_STATE_H_

#include <cstddef>
#include <cstdint>

namespace fedagg::portable {

template <typename Acc>
struct DeviceState {
  Acc* values = nullptr;
  size_t value_count = 0;
  int64_t* counts = nullptr;
  size_t count_count = 0;
  double* weight_sums = nullptr;
  size_t weight_sum_count = 0;
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_DEVICE_STATE_H_
