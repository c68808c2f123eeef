// DeviceGroup: the GPUs of one node as one NCCL communicator set (ncclCommInitAll over the
// chosen devices), for summing per-device accumulators into the first device (ncclReduce)
// before Report or Serialize copies the result back: the cuda backend's NcclDeviceMerger
// (nccl_device_merger.h). With one device nothing is set up and no NCCL call is made.
// Calls are serialized: NCCL needs every rank's operations on a communicator issued in the
// same order, which two threads interleaving their calls would break.
// Tested only where several GPUs exist (tests/cuda/device_group_test.cc).
#ifndef FEDAGG_CUDA_DEVICE_GROUP_H_
#define FEDAGG_CUDA_DEVICE_GROUP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cuda/cuda_resources.h"
#include "service/core/mutex.h"

namespace fedagg::cuda {

using NcclComm = CudaHandle<ncclComm_t, &ncclCommDestroy>;

// The NCCL type of the element types fedagg's accumulators hold.
template <typename T>
constexpr ncclDataType_t NcclTypeOf();
template <>
constexpr ncclDataType_t NcclTypeOf<float>() { return ncclFloat32; }
template <>
constexpr ncclDataType_t NcclTypeOf<double>() { return ncclFloat64; }
template <>
constexpr ncclDataType_t NcclTypeOf<int64_t>() { return ncclInt64; }

class DeviceGroup {
 public:
  // The CUDA devices `devices` (distinct ids), rank d on devices[d]; INVALID_ARGUMENT for
  // an empty list.
  static absl::StatusOr<std::unique_ptr<DeviceGroup>> Create(std::vector<int> devices);

  const std::vector<int>& devices() const { return devices_; }

  // buffers[d] (count elements on devices[d]) summed into buffers[0], enqueued on
  // streams[d]; the other buffers are left as they were. One device: nothing to do.
  // T is float, double or int64_t (integers wrap around, as the CPU backend's do).
  template <typename T>
  absl::Status SumIntoFirst(absl::Span<T* const> buffers, size_t count, absl::Span<const cudaStream_t> streams) {
    const std::vector<void*> raw(buffers.begin(), buffers.end());
    return Sum(raw, count, NcclTypeOf<T>(), streams);
  }

 private:
  DeviceGroup(std::vector<int> devices, std::vector<NcclComm> comms)
      : devices_(std::move(devices)), comms_(std::move(comms)) {}

  absl::Status Sum(absl::Span<void* const> buffers, size_t count, ncclDataType_t type,
                   absl::Span<const cudaStream_t> streams);

  const std::vector<int> devices_;
  const std::vector<NcclComm> comms_;  // one per device; empty for a single device
  Mutex mutex_;
};

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_DEVICE_GROUP_H_
