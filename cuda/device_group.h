// DeviceGroup: the GPUs of one node as one NCCL communicator set (ncclCommInitAll), for
// summing per-device accumulators into device 0 (ncclReduce) before Report or Serialize
// copies the result back. With one device nothing is set up and no NCCL call is made.
// A thin wrapper, tested only where several GPUs exist (tests/cuda/device_group_test.cc);
// the cuda backend does not spread batches across devices yet (docs/GPU.md).
#ifndef FEDAGG_CUDA_DEVICE_GROUP_H_
#define FEDAGG_CUDA_DEVICE_GROUP_H_

#include <cstddef>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cuda/cuda_resources.h"

namespace fedagg::cuda {

using NcclComm = CudaHandle<ncclComm_t, &ncclCommDestroy>;

class DeviceGroup {
 public:
  // Devices 0 .. devices-1; INVALID_ARGUMENT for devices < 1.
  static absl::StatusOr<DeviceGroup> Create(int devices);

  int devices() const { return devices_; }

  // buffers[d] (count float32 on device d) summed into buffers[0], enqueued on
  // streams[d]; the other buffers are left as they were. One device: nothing to do.
  absl::Status SumIntoFirst(absl::Span<float* const> buffers, size_t count,
                            absl::Span<const cudaStream_t> streams);

 private:
  DeviceGroup(int devices, std::vector<NcclComm> comms) : devices_(devices), comms_(std::move(comms)) {}

  int devices_;
  std::vector<NcclComm> comms_;  // one per device; empty for a single device
};

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_DEVICE_GROUP_H_
