// Per-device accumulators summed into device 0 with NCCL.
#include "cuda/nccl_device_merger.h"

#include <cuda_runtime_api.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_reducers.h"
#include "cuda/cuda_status.h"
#include "cuda/device_bound_reducer.h"
#include "portable/ring_field_reducer.h"

namespace fedagg::cuda {
namespace {

using portable::Outcome;

Outcome ToOutcome(const absl::Status& status) {
  if (status.ok()) return Outcome{};
  return Outcome{status.code() == absl::StatusCode::kResourceExhausted ? Outcome::Code::kResourceExhausted
                                                                      : Outcome::Code::kInternal,
                 std::string(status.message())};
}

Outcome SynchronizeCurrentDevice() {
  if (const cudaError_t error = cudaDeviceSynchronize(); error != cudaSuccess) {
    ClearLastCudaError();
    return Outcome{Outcome::Code::kInternal, std::string("cudaDeviceSynchronize failed: ") + cudaGetErrorString(error)};
  }
  return Outcome{};
}

// One state array of every device, summed into the first.
template <typename T>
Outcome SumArray(DeviceGroup& group, const std::vector<T*>& buffers, size_t count) {
  const std::vector<cudaStream_t> streams(buffers.size(), nullptr);  // each device's default stream
  return ToOutcome(group.SumIntoFirst<T>(buffers, count, streams));
}

}  // namespace

template <typename Acc>
Outcome NcclDeviceMerger<Acc>::SumIntoFirst(
    const portable::ReducerSpec& spec, const std::vector<std::unique_ptr<portable::FieldReducer<Acc>>>& children) const {
  if (spec.kind == portable::ReducerKind::kUnion || spec.op == portable::ReducerOp::kMax ||
      spec.op == portable::ReducerOp::kMin) {
    return host_.SumIntoFirst(spec, children);
  }
  const std::vector<int>& devices = group_->devices();
  if (children.size() != devices.size()) {
    return Outcome{Outcome::Code::kInternal, absl::StrCat(children.size(), " reducers for a group of ",
                                                          devices.size(), " devices")};
  }
  std::vector<const DeviceBoundReducer<Acc>*> bound(children.size());
  std::vector<Acc*> values(children.size());
  std::vector<int64_t*> counts(children.size());
  std::vector<double*> weight_sums(children.size());
  portable::DeviceState<Acc> state;
  for (size_t d = 0; d < children.size(); ++d) {
    bound[d] = dynamic_cast<const DeviceBoundReducer<Acc>*>(children[d].get());
    if (bound[d] == nullptr || bound[d]->device() != devices[d]) {
      return Outcome{Outcome::Code::kInternal, absl::StrCat("reducer ", d, " is not bound to device ", devices[d])};
    }
    // Every reduction the staging ring has queued for this reducer is done, and whatever
    // else is queued on the device finishes, before NCCL reads the arrays.
    const auto* ring = dynamic_cast<const portable::RingFieldReducer<Acc>*>(&bound[d]->inner());
    if (ring == nullptr) {
      return Outcome{Outcome::Code::kInternal, absl::StrCat("reducer ", d, " is not fed by a staging ring")};
    }
    portable::StagedFieldReducer<Acc>* staged = nullptr;
    if (const Outcome settled = ring->Settled(&staged); !settled.ok()) return settled;
    const Outcome viewed = bound[d]->OnDevice([&] {
      const Outcome synchronized = SynchronizeCurrentDevice();
      return synchronized.ok() ? CudaReducerState(*staged, &state) : synchronized;
    });
    if (!viewed.ok()) return viewed;
    values[d] = state.values;
    counts[d] = state.counts;
    weight_sums[d] = state.weight_sums;
  }
  // Every device's arrays have the sizes of the last one's: the same spec.
  if (Outcome summed = SumArray(*group_, values, state.value_count); !summed.ok()) return summed;
  if (Outcome summed = SumArray(*group_, counts, state.count_count); !summed.ok()) return summed;
  if (Outcome summed = SumArray(*group_, weight_sums, state.weight_sum_count); !summed.ok()) return summed;
  for (const DeviceBoundReducer<Acc>* child : bound) {
    if (const Outcome done = child->OnDevice(SynchronizeCurrentDevice); !done.ok()) return done;
  }
  return Outcome{};
}

template class NcclDeviceMerger<float>;
template class NcclDeviceMerger<double>;
template class NcclDeviceMerger<int64_t>;

portable::DeviceMergers NcclDeviceMergers(std::shared_ptr<DeviceGroup> group,
                                          const portable::ReducerMakers& first_device) {
  return portable::DeviceMergers{std::make_shared<NcclDeviceMerger<float>>(group, first_device.f32),
                                 std::make_shared<NcclDeviceMerger<double>>(group, first_device.f64),
                                 std::make_shared<NcclDeviceMerger<int64_t>>(group, first_device.i64)};
}

}  // namespace fedagg::cuda
