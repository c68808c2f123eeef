// ThrustFieldReducer compiled by nvcc for the CUDA system: the GPU kernels of the cuda
// backend's dense, scatter and union reductions (portable/thrust_field_reducer.h).
#include "cuda/cuda_reducers.h"
#include "cuda/cuda_system.h"
#include "portable/thrust_field_reducer.h"

namespace fedagg::cuda {

portable::ReducerMakers CudaReducerMakers() {
  return portable::ThrustReducerMakers<portable::CudaSystem>();
}

}  // namespace fedagg::cuda
