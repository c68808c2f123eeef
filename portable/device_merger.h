// DeviceMerger: how a MultiDeviceReducer (multi_device_reducer.h) brings the states of its
// per-device reducers together before Save — every child added into the first. Two
// implementations: through the host (host_device_merger.h: any system, any reducer kind)
// and with NCCL on the GPUs (cuda/nccl_device_merger.h). C++17, no Thrust, no Abseil.
#ifndef FEDAGG_PORTABLE_DEVICE_MERGER_H_
#define FEDAGG_PORTABLE_DEVICE_MERGER_H_

#include <memory>
#include <vector>

#include "portable/field_reducer.h"

namespace fedagg::portable {

template <typename Acc>
class DeviceMerger {
 public:
  virtual ~DeviceMerger() = default;

  // Adds the states of children[1..] into children[0]; children[d] reduces on the d-th
  // device of the set and all have `spec`. On success children[1..] still hold their own
  // state (the caller drops them). On failure children[0] may hold some of the others'
  // state, added once or not at all: the caller must not use any of them as a result.
  // Called from several threads at once (one per aggregation).
  virtual Outcome SumIntoFirst(const ReducerSpec& spec,
                               const std::vector<std::unique_ptr<FieldReducer<Acc>>>& children) const = 0;
};

// One merger per accumulator type, as ReducerMakers has one maker per type.
struct DeviceMergers {
  std::shared_ptr<const DeviceMerger<float>> f32;
  std::shared_ptr<const DeviceMerger<double>> f64;
  std::shared_ptr<const DeviceMerger<int64_t>> i64;
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_DEVICE_MERGER_H_
