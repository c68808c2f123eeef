// NCCL across the GPUs of one node.
#include "cuda/device_group.h"

#include "absl/strings/str_cat.h"
#include "cuda/nccl_status.h"

namespace fedagg::cuda {

absl::StatusOr<std::unique_ptr<DeviceGroup>> DeviceGroup::Create(std::vector<int> devices) {
  if (devices.empty()) return absl::InvalidArgumentError("a device group needs at least one device");
  std::vector<NcclComm> comms;
  if (devices.size() > 1) {
    std::vector<ncclComm_t> raw(devices.size(), nullptr);
    FEDAGG_NCCL_RETURN_IF_ERROR(ncclCommInitAll(raw.data(), static_cast<int>(devices.size()), devices.data()));
    for (ncclComm_t comm : raw) comms.emplace_back(comm);
  }
  return std::unique_ptr<DeviceGroup>(new DeviceGroup(std::move(devices), std::move(comms)));
}

absl::Status DeviceGroup::Sum(absl::Span<void* const> buffers, size_t count, ncclDataType_t type,
                              absl::Span<const cudaStream_t> streams) {
  if (buffers.size() != devices_.size() || streams.size() != buffers.size()) {
    return absl::InvalidArgumentError(absl::StrCat("SumIntoFirst: ", buffers.size(), " buffers and ",
                                                   streams.size(), " streams for ", devices_.size(), " devices"));
  }
  if (devices_.size() == 1 || count == 0) return absl::OkStatus();
  MutexLock lock(&mutex_);
  FEDAGG_NCCL_RETURN_IF_ERROR(ncclGroupStart());
  for (size_t d = 0; d < devices_.size(); ++d) {
    // In place on the root: its buffer is both a contribution and the result.
    const ncclResult_t result = ncclReduce(buffers[d], buffers[d], count, type, ncclSum,
                                           /*root=*/0, comms_[d].get(), streams[d]);
    if (result != ncclSuccess) {
      static_cast<void>(ncclGroupEnd());
      return NcclStatus(result, "ncclReduce");
    }
  }
  FEDAGG_NCCL_RETURN_IF_ERROR(ncclGroupEnd());
  return absl::OkStatus();
}

}  // namespace fedagg::cuda
