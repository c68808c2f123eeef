// The CUDA stream the calling thread's reductions run on: each compute lane of a staging
// ring binds a stream of its own (CudaCopyEngine::BindThread), so the reductions of
// different lanes run at once on one device; other threads (Merge, Save and Load on the
// caller's thread) use the legacy default stream. Read by CudaSystem (Thrust's policy,
// its temporary storage, copies) and by the cuSPARSE multiplier. Plain C++17: nvcc and
// g++ both read it.
#ifndef FEDAGG_CUDA_REDUCTION_STREAM_H_
#define FEDAGG_CUDA_REDUCTION_STREAM_H_

#include <cuda_runtime_api.h>

namespace fedagg::cuda {

// The stream bound to this thread; nullptr (the legacy default stream) when none is.
cudaStream_t CurrentReductionStream();
void BindReductionStream(cudaStream_t stream);

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_REDUCTION_STREAM_H_
