// SpmvTransposeOnDevice: the cuda backend's y += Aᵀx for the portable reducers
// (CudaSystem::SpmvTranspose), through cuSPARSE (sparse_spmv.h) with one multiplier — a
// cuSPARSE handle and its work buffers — per thread and device, made on first use and
// kept for the thread's life. No Thrust and no Abseil here, so nvcc-compiled reducers
// include it; device_spmv.cc (g++) defines it for the index and value types they use.
#ifndef FEDAGG_CUDA_DEVICE_SPMV_H_
#define FEDAGG_CUDA_DEVICE_SPMV_H_

#include <cstdint>

#include "portable/csr_matrix.h"
#include "portable/field_reducer.h"

namespace fedagg::cuda {

// y[a.columns] += Aᵀ x[a.rows] on the calling thread's reduction stream
// (reduction_stream.h), where the reducer's Thrust kernels run too (so it is ordered
// after the CSR is built and before the state is read). Bitwise reproducible with 32-bit
// indices; with 64-bit ones cuSPARSE offers only the transposed product, whose additions
// are not in a fixed order.
template <typename Index, typename T>
portable::Outcome SpmvTransposeOnDevice(const portable::CsrMatrix<Index, T>& a, const T* x, T* y);

extern template portable::Outcome SpmvTransposeOnDevice(const portable::CsrMatrix<int32_t, float>&,
                                                        const float*, float*);
extern template portable::Outcome SpmvTransposeOnDevice(const portable::CsrMatrix<int32_t, double>&,
                                                        const double*, double*);
extern template portable::Outcome SpmvTransposeOnDevice(const portable::CsrMatrix<int64_t, float>&,
                                                        const float*, float*);
extern template portable::Outcome SpmvTransposeOnDevice(const portable::CsrMatrix<int64_t, double>&,
                                                        const double*, double*);

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_DEVICE_SPMV_H_
