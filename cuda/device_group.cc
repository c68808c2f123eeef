// NCCL across the GPUs of one node.
#include "cuda/device_group.h"

#include "absl/strings/str_cat.h"
#include "cuda/nccl_status.h"

namespace fedagg::cuda {

absl::StatusOr<DeviceGroup> DeviceGroup::Create(int devices) {
  if (devices < 1) return absl::InvalidArgumentError(absl::StrCat("a device group needs >= 1 device, not ", devices));
  std::vector<NcclComm> comms;
  if (devices > 1) {
    std::vector<ncclComm_t> raw(static_cast<size_t>(devices), nullptr);
    FEDAGG_NCCL_RETURN_IF_ERROR(ncclCommInitAll(raw.data(), devices, nullptr));
    for (ncclComm_t comm : raw) comms.emplace_back(comm);
  }
  return DeviceGroup(devices, std::move(comms));
}

absl::Status DeviceGroup::SumIntoFirst(absl::Span<float* const> buffers, size_t count,
                                       absl::Span<const cudaStream_t> streams) {
  if (buffers.size() != static_cast<size_t>(devices_) || streams.size() != buffers.size()) {
    return absl::InvalidArgumentError(absl::StrCat("SumIntoFirst: ", buffers.size(), " buffers and ",
                                                   streams.size(), " streams for ", devices_, " devices"));
  }
  if (devices_ == 1 || count == 0) return absl::OkStatus();
  FEDAGG_NCCL_RETURN_IF_ERROR(ncclGroupStart());
  for (int d = 0; d < devices_; ++d) {
    // In place on the root: its buffer is both a contribution and the result.
    const ncclResult_t result = ncclReduce(buffers[d], buffers[d], count, ncclFloat, ncclSum,
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
