// The portable reducers instantiated for the CUDA system (cuda_reducers.cu). A plain
// C++17 declaration so host code compiled without nvcc can take the makers.
#ifndef FEDAGG_CUDA_CUDA_REDUCERS_H_
#define FEDAGG_CUDA_CUDA_REDUCERS_H_

#include "portable/device_state.h"
#include "portable/field_reducer.h"

namespace fedagg::cuda {

portable::StagedReducerMakers CudaReducerMakers();

// The device arrays of a dense or scatter reducer made by CudaReducerMakers (allocated now
// if they were not; call it with the reducer's device current), for NCCL; kInternal for a
// reducer of another kind or type. Acc is float, double or int64_t.
template <typename Acc>
portable::Outcome CudaReducerState(portable::StagedFieldReducer<Acc>& reducer, portable::DeviceState<Acc>* out);

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_CUDA_REDUCERS_H_
