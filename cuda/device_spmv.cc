// SpmvTransposeOnDevice: the per-thread cuSPARSE multiplier and the mapping of its
// Status to the portable reducers' Outcome.
#include "cuda/device_spmv.h"

#include <map>
#include <string>
#include <type_traits>
#include <utility>

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda/cuda_status.h"
#include "cuda/reduction_stream.h"
#include "cuda/sparse_spmv.h"

namespace fedagg::cuda {
namespace {

absl::StatusOr<SparseTransposeMultiplier*> ThreadMultiplier() {
  int device = 0;
  FEDAGG_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  thread_local std::map<int, SparseTransposeMultiplier> multipliers;
  auto found = multipliers.find(device);
  if (found == multipliers.end()) {
    // The thread's reduction stream is bound before its first reduction, and never changes.
    absl::StatusOr<SparseTransposeMultiplier> made = SparseTransposeMultiplier::Create(CurrentReductionStream());
    if (!made.ok()) return made.status();
    found = multipliers.emplace(device, *std::move(made)).first;
  }
  return &found->second;
}

portable::Outcome FromStatus(const absl::Status& status) {
  if (status.ok()) return portable::Outcome{};
  return portable::Outcome{status.code() == absl::StatusCode::kResourceExhausted
                               ? portable::Outcome::Code::kResourceExhausted
                               : portable::Outcome::Code::kInternal,
                           "cuSPARSE y += A^T x: " + status.ToString()};
}

}  // namespace

template <typename Index, typename T>
portable::Outcome SpmvTransposeOnDevice(const portable::CsrMatrix<Index, T>& a, const T* x, T* y) {
  absl::StatusOr<SparseTransposeMultiplier*> multiplier = ThreadMultiplier();
  if (!multiplier.ok()) return FromStatus(multiplier.status());
  return FromStatus(
      (*multiplier)->AccumulateTranspose(a, x, y, /*deterministic=*/std::is_same_v<Index, int32_t>));
}

template portable::Outcome SpmvTransposeOnDevice(const portable::CsrMatrix<int32_t, float>&, const float*,
                                                 float*);
template portable::Outcome SpmvTransposeOnDevice(const portable::CsrMatrix<int32_t, double>&, const double*,
                                                 double*);
template portable::Outcome SpmvTransposeOnDevice(const portable::CsrMatrix<int64_t, float>&, const float*,
                                                 float*);
template portable::Outcome SpmvTransposeOnDevice(const portable::CsrMatrix<int64_t, double>&, const double*,
                                                 double*);

}  // namespace fedagg::cuda
