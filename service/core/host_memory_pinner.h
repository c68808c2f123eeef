// HostMemoryPinner: how a device backend makes host memory readable by its copy engines at
// full speed (page-locked and registered for DMA; the cuda backend's uses
// cudaHostRegister). The memory updates are received into is pinned by LargeAllocation
// once, when it is mapped, and stays pinned while it is cached for the next update, so
// the staging copies go from the received bytes straight to the device. No device API
// here: service/core stays free of CUDA.
#ifndef FEDAGG_SERVICE_CORE_HOST_MEMORY_PINNER_H_
#define FEDAGG_SERVICE_CORE_HOST_MEMORY_PINNER_H_

#include <cstddef>

namespace fedagg {

class HostMemoryPinner {
 public:
  virtual ~HostMemoryPinner() = default;
  // Pins [data, data + bytes) (page-aligned); false when it could not, and the memory is
  // then used as it is, unpinned.
  virtual bool Pin(void* data, size_t bytes) = 0;
  // Undoes a Pin that returned true, before the memory is unmapped.
  virtual void Unpin(void* data, size_t bytes) = 0;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_HOST_MEMORY_PINNER_H_
