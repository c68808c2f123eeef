// ThrustFieldReducer compiled by nvcc for the CUDA system: the GPU kernels of the cuda
// backend's dense, scatter and union reductions (portable/thrust_field_reducer.h).
#include "cuda/cuda_reducers.h"
#include "cuda/cuda_system.h"
#include "portable/thrust_field_reducer.h"

namespace fedagg::cuda {

portable::StagedReducerMakers CudaReducerMakers() {
  return portable::ThrustReducerMakers<portable::CudaSystem>();
}

template <typename Acc>
portable::Outcome CudaReducerState(portable::StagedFieldReducer<Acc>& reducer, portable::DeviceState<Acc>* out) {
  auto* cuda_reducer = dynamic_cast<portable::ThrustFieldReducer<portable::CudaSystem, Acc>*>(&reducer);
  if (cuda_reducer == nullptr) {
    return portable::Outcome{portable::Outcome::Code::kInternal,
                             "the reducer is not the cuda backend's: its device state cannot be read"};
  }
  return cuda_reducer->ViewState(out);
}

template portable::Outcome CudaReducerState<float>(portable::StagedFieldReducer<float>&, portable::DeviceState<float>*);
template portable::Outcome CudaReducerState<double>(portable::StagedFieldReducer<double>&, portable::DeviceState<double>*);
template portable::Outcome CudaReducerState<int64_t>(portable::StagedFieldReducer<int64_t>&,
                                                     portable::DeviceState<int64_t>*);

}  // namespace fedagg::cuda
