// How much freed device memory the reductions' temporary storage keeps. Thrust's
// temporaries come from the device's stream-ordered pool (cudaMallocAsync, cuda_system.h),
// whose default release threshold is 0: at every stream synchronisation (one per Thrust
// algorithm, and one at the end of each staged batch) the pool hands its free memory back
// to the driver, so the next batch's temporaries are mapped afresh. Keeping up to a bound
// makes them a reuse of memory already mapped; above the bound the pool still releases.
#ifndef FEDAGG_CUDA_TEMPORARY_MEMORY_POOL_H_
#define FEDAGG_CUDA_TEMPORARY_MEMORY_POOL_H_

#include <cstdint>

#include "absl/status/status.h"

namespace fedagg::cuda {

// Lets `device`'s default stream-ordered pool keep up to `bytes` of freed memory between
// synchronisations; the runtime's error otherwise.
absl::Status KeepFreedTemporaryMemory(int device, uint64_t bytes);

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_TEMPORARY_MEMORY_POOL_H_
