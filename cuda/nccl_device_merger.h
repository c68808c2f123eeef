// NcclDeviceMerger: the cuda backend's DeviceMerger (portable/device_merger.h) across the
// GPUs of one node. For summing states — federated_sum, _mean, _weighted_mean and the
// dense-result sparse family — it adds each state array of every device (values, and the
// per-row counts and weight sums where kept) into device 0's in place with ncclReduce
// through the DeviceGroup, with no copy through the host. The union state of
// sparse_sum_sparse (each device holds its own index set) and federated_max / _min (whose
// NaN rule, the CPU backend's, NCCL does not promise) go through the host instead
// (portable/host_device_merger.h). The children must be DeviceBoundReducers over the cuda
// backend's reducers, child d on the group's device d. Needs GPUs to run: tested under
// tests/cuda where two or more exist; it has not run on a GPU yet (docs/GPU.md).
#ifndef FEDAGG_CUDA_NCCL_DEVICE_MERGER_H_
#define FEDAGG_CUDA_NCCL_DEVICE_MERGER_H_

#include <memory>
#include <vector>

#include "cuda/device_group.h"
#include "portable/device_merger.h"
#include "portable/host_device_merger.h"

namespace fedagg::cuda {

template <typename Acc>
class NcclDeviceMerger final : public portable::DeviceMerger<Acc> {
 public:
  // `first_device` makes reducers on group->devices()[0] (for the host fallback).
  NcclDeviceMerger(std::shared_ptr<DeviceGroup> group, portable::ReducerMaker<Acc> first_device)
      : group_(std::move(group)), host_(std::move(first_device)) {}

  portable::Outcome SumIntoFirst(
      const portable::ReducerSpec& spec,
      const std::vector<std::unique_ptr<portable::FieldReducer<Acc>>>& children) const override;

 private:
  const std::shared_ptr<DeviceGroup> group_;
  const portable::HostDeviceMerger<Acc> host_;
};

// The mergers of every accumulator type over `group`; `first_device` as above.
portable::DeviceMergers NcclDeviceMergers(std::shared_ptr<DeviceGroup> group,
                                          const portable::ReducerMakers& first_device);

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_NCCL_DEVICE_MERGER_H_
