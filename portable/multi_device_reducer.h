// MultiDeviceReducer: one field reduced on several devices of a node. It holds one child
// FieldReducer per device (made by that device's maker); each batch goes whole to one
// child, chosen by RoundRobinRouting; Merge merges child d with the other reducer's child
// d; Save (and SaveResult) first adds every child into child 0 through a DeviceMerger
// (host or NCCL), replaces the others with fresh, empty reducers and then saves child 0; Load loads into
// child 0 and replaces the others with fresh ones. So the saved state is the same sum as
// one device's (byte-identical for exact arithmetic). MultiDeviceMakers composes the
// makers: for one device it returns that device's makers as they are, no wrapper.
//
// Failures. A child's or the merger's Outcome is returned as it is. A failure (of
// Accumulate — an index outside the field included —, Merge, Save, Load or the merger)
// leaves the children as the failing call left them — part of a merge or of a batch may
// have been applied, once or not at all — so the reducer is broken from then on: every
// later call returns that first failure, and no Save reports a partial sum as OK. The
// aggregation then fails (docs/GPU.md "Failures").
// A child may reduce asynchronously and report a batch's failure at a later call or at
// Save; that outcome is handled the same way when it arrives.
// C++17, no Thrust, no Abseil.
#ifndef FEDAGG_PORTABLE_MULTI_DEVICE_REDUCER_H_
#define FEDAGG_PORTABLE_MULTI_DEVICE_REDUCER_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "portable/device_merger.h"
#include "portable/field_reducer.h"
#include "portable/round_robin_routing.h"

namespace fedagg::portable {

template <typename Acc>
class MultiDeviceReducer final : public FieldReducer<Acc> {
 public:
  // devices[d] makes the reducers of device d (at least two devices); `merger` sums them.
  MultiDeviceReducer(const ReducerSpec& spec, std::vector<ReducerMaker<Acc>> devices,
                     std::shared_ptr<const DeviceMerger<Acc>> merger)
      : spec_(spec), devices_(std::move(devices)), merger_(std::move(merger)), routing_(devices_.size()) {
    for (const ReducerMaker<Acc>& make : devices_) children_.push_back(make(spec_));
  }

  Outcome Accumulate(const HostBatch& batch) override {
    if (!failure_.ok()) return failure_;
    return Remember(children_[routing_.Next(batch)]->Accumulate(batch));
  }

  Outcome Merge(const FieldReducer<Acc>& other_base) override {
    if (!failure_.ok()) return failure_;
    const auto* other = dynamic_cast<const MultiDeviceReducer*>(&other_base);
    if (other == nullptr || other->children_.size() != children_.size()) {
      return Remember(Outcome{Outcome::Code::kInternal,
                              "cannot merge reducers that run on different sets of devices"});
    }
    if (!other->failure_.ok()) return Remember(other->failure_);
    for (size_t d = 0; d < children_.size(); ++d) {
      if (Outcome merged = children_[d]->Merge(*other->children_[d]); !merged.ok()) {
        return Remember(std::move(merged));
      }
    }
    return Outcome{};
  }

  // Logically const: the sum over the children is unchanged, only where it lives moves.
  Outcome Save(HostState<Acc>* out) const override {
    return SaveFromFirst([&] { return children_[0]->Save(out); });
  }

  Outcome SaveResult(const ResultRequest& request) const override {
    return SaveFromFirst([&] { return children_[0]->SaveResult(request); });
  }

  Outcome Load(const HostState<Acc>& in) override {
    if (!failure_.ok()) return failure_;
    FreshChildrenAfterFirst();
    return Remember(children_[0]->Load(in));
  }

  uint64_t HostBytes() const override {
    uint64_t bytes = 0;
    for (const auto& child : children_) bytes += child->HostBytes();
    return bytes;
  }

 private:
  Outcome Remember(Outcome outcome) const {
    if (!outcome.ok()) failure_ = outcome;
    return outcome;
  }

  // Adds every child into child 0, replaces the others with fresh ones, then runs
  // save_first() (a save of child 0).
  template <typename SaveFirst>
  Outcome SaveFromFirst(SaveFirst&& save_first) const {
    if (!failure_.ok()) return failure_;
    if (Outcome merged = merger_->SumIntoFirst(spec_, children_); !merged.ok()) {
      return Remember(std::move(merged));
    }
    FreshChildrenAfterFirst();
    return Remember(save_first());
  }

  void FreshChildrenAfterFirst() const {
    for (size_t d = 1; d < children_.size(); ++d) children_[d] = devices_[d](spec_);
  }

  const ReducerSpec spec_;
  const std::vector<ReducerMaker<Acc>> devices_;
  const std::shared_ptr<const DeviceMerger<Acc>> merger_;
  RoundRobinRouting routing_;
  // Mutable because Save gathers the state into child 0 (see SaveFromFirst).
  mutable std::vector<std::unique_ptr<FieldReducer<Acc>>> children_;
  mutable Outcome failure_;  // the first failure; ok() while the reducer is sound
};

// The makers of reducers over `devices` (one maker per device, at least one), merged by
// `merger`: one device gives its own maker back unchanged.
template <typename Acc>
ReducerMaker<Acc> MultiDeviceMaker(std::vector<ReducerMaker<Acc>> devices,
                                   std::shared_ptr<const DeviceMerger<Acc>> merger) {
  if (devices.size() == 1) return devices[0];
  return [devices = std::move(devices), merger = std::move(merger)](const ReducerSpec& spec) {
    return std::unique_ptr<FieldReducer<Acc>>(new MultiDeviceReducer<Acc>(spec, devices, merger));
  };
}

inline ReducerMakers MultiDeviceMakers(const std::vector<ReducerMakers>& devices, const DeviceMergers& mergers) {
  std::vector<ReducerMaker<float>> f32;
  std::vector<ReducerMaker<double>> f64;
  std::vector<ReducerMaker<int64_t>> i64;
  for (const ReducerMakers& device : devices) {
    f32.push_back(device.f32);
    f64.push_back(device.f64);
    i64.push_back(device.i64);
  }
  return ReducerMakers{MultiDeviceMaker(std::move(f32), mergers.f32), MultiDeviceMaker(std::move(f64), mergers.f64),
                       MultiDeviceMaker(std::move(i64), mergers.i64)};
}

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_MULTI_DEVICE_REDUCER_H_
