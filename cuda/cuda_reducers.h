// The portable reducers instantiated for the CUDA system (cuda_reducers.cu). A plain
// C++17 declaration so host code compiled without nvcc can take the makers.
#ifndef FEDAGG_CUDA_CUDA_REDUCERS_H_
#define FEDAGG_CUDA_CUDA_REDUCERS_H_

#include "portable/field_reducer.h"

namespace fedagg::cuda {

portable::ReducerMakers CudaReducerMakers();

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_CUDA_REDUCERS_H_
