// HostDeviceMerger: a DeviceMerger through host memory — each child k > 0 is saved to the
// host, loaded into a fresh reducer on the first device and merged into child 0 there.
// Works for every reducer kind on every system: the thrust-omp backend's simulated
// devices use it, and the cuda backend for what NCCL cannot sum in place (the union
// state of sparse_sum_sparse, whose index sets differ per device; max and min).
#ifndef FEDAGG_PORTABLE_HOST_DEVICE_MERGER_H_
#define FEDAGG_PORTABLE_HOST_DEVICE_MERGER_H_

#include <memory>
#include <utility>
#include <vector>

#include "portable/device_merger.h"
#include "portable/field_reducer.h"

namespace fedagg::portable {

template <typename Acc>
class HostDeviceMerger final : public DeviceMerger<Acc> {
 public:
  // `first_device` makes reducers on the device of children[0].
  explicit HostDeviceMerger(ReducerMaker<Acc> first_device) : first_device_(std::move(first_device)) {}

  Outcome SumIntoFirst(const ReducerSpec& spec,
                       const std::vector<std::unique_ptr<FieldReducer<Acc>>>& children) const override {
    for (size_t d = 1; d < children.size(); ++d) {
      HostState<Acc> state;
      if (Outcome saved = children[d]->Save(&state); !saved.ok()) return saved;
      const std::unique_ptr<FieldReducer<Acc>> copy = first_device_(spec);
      if (Outcome loaded = copy->Load(state); !loaded.ok()) return loaded;
      if (Outcome merged = children[0]->Merge(*copy); !merged.ok()) return merged;
    }
    return Outcome{};
  }

 private:
  const ReducerMaker<Acc> first_device_;
};

inline DeviceMergers HostDeviceMergers(const ReducerMakers& first_device) {
  return DeviceMergers{std::make_shared<HostDeviceMerger<float>>(first_device.f32),
                       std::make_shared<HostDeviceMerger<double>>(first_device.f64),
                       std::make_shared<HostDeviceMerger<int64_t>>(first_device.i64)};
}

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_HOST_DEVICE_MERGER_H_
