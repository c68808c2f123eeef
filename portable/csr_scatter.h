// CsrScatter<System, Acc>: the dense-result COO family (sparse_sum, sparse_mean,
// sparse_weighted_mean) for a floating-point accumulator, as sparse linear algebra. The
// batch becomes a CSR matrix A [B, D] (csr_batch.h) and the system's SpMV adds
// y += Aᵀw (w = ones, or the update weights); per-coordinate counts of distinct updates
// and weight sums come from A's pattern P (A with values 1, each (update, coordinate)
// once): counts += Pᵀ·1, weight_sums += Pᵀ·w. OmpSystem's SpMV is cpu_spmv.h, CudaSystem's
// cuSPARSE (cuda/sparse_spmv.h).
//
// Applies() is the rule ThrustFieldReducer follows to take this path rather than its sort
// and segmented reduction: a scatter of row width 1 into a floating-point accumulator.
// Integer sums keep the segmented path (it adds in int64 with wrap-around, bit-exact;
// a floating SpMV would not be), row_sparse_* keep it (rows of E elements copied whole)
// and so does sparse_sum_sparse (its state is a sorted union, not a dense vector).
#ifndef FEDAGG_PORTABLE_CSR_SCATTER_H_
#define FEDAGG_PORTABLE_CSR_SCATTER_H_

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <thrust/fill.h>
#include <thrust/transform.h>

#include "portable/csr_batch.h"
#include "portable/csr_matrix.h"
#include "portable/field_reducer.h"
#include "portable/portable_math.h"

namespace fedagg::portable {

// Where a batch is added, in the system's memory: the field's dense state (counts and
// weight_sums null when the spec keeps none) and the batch's weights, one per update.
template <typename Acc>
struct ScatterTargets {
  Acc* values = nullptr;             // [D]
  int64_t* counts = nullptr;         // [D] or null
  double* weight_sums = nullptr;     // [D] or null
  const Acc* weights = nullptr;      // [B], or null: every update weighs 1
  const double* exact_weights = nullptr;  // [B], read when weight_sums is kept
};

namespace csr_functors {

// A count plus a per-batch count computed in double (an exact integer below 2^53).
struct AddCount {
  FEDAGG_HOST_DEVICE int64_t operator()(int64_t count, double batch_count) const {
    return count + static_cast<int64_t>(batch_count);
  }
};

}  // namespace csr_functors

template <typename System, typename Acc>
class CsrScatter {
  template <typename T>
  using Vec = typename System::template vector<T>;

 public:
  static bool Applies(const ReducerSpec& spec, int64_t updates) {
    return std::is_floating_point_v<Acc> && spec.kind == ReducerKind::kScatter && spec.row_width == 1 &&
           CsrBatch<System, Acc>::Fits(updates, spec.rows);
  }

  // 32-bit offsets and columns when they fit, except for a batch whose rows increase on
  // a system whose SpMV gives the same bits either way: that one goes as staged, with its
  // 64-bit ones (no pass to narrow them).
  template <typename In>
  Outcome Add(const CooBatch<In>& batch, const ScatterTargets<Acc>& to) {
    const bool as_staged = batch.rows_increase && System::kWideSpmvReproducible;
    if (!as_staged && CsrBatch<System, Acc>::FitsNarrow(batch.columns, batch.entries)) {
      return AddAs<int32_t>(batch, to);
    }
    return AddAs<int64_t>(batch, to);
  }

  uint64_t Bytes() const {
    return csr_.Bytes() + Bytes(ones_) + Bytes(double_ones_) + Bytes(batch_counts_);
  }

 private:
  template <typename Index, typename In>
  Outcome AddAs(const CooBatch<In>& batch, const ScatterTargets<Acc>& to) {
    const CsrMatrix<Index, Acc> a = csr_.template Build<Index>(batch);
    const Acc* weights = to.weights != nullptr ? to.weights : Ones(ones_, batch.updates);
    if (Outcome done = System::SpmvTranspose(a, weights, to.values); !done.ok()) return done;
    if (to.counts == nullptr && to.weight_sums == nullptr) return Outcome{};
    const CsrMatrix<Index, double> pattern = a.WithValues(Ones(double_ones_, std::max(a.nnz, batch.updates)));
    if (to.weight_sums != nullptr) {
      if (Outcome done = System::SpmvTranspose(pattern, to.exact_weights, to.weight_sums); !done.ok()) {
        return done;
      }
    }
    if (to.counts != nullptr) {
      batch_counts_.resize(static_cast<size_t>(batch.columns));
      thrust::fill(System::policy(), batch_counts_.begin(), batch_counts_.end(), 0.0);
      if (Outcome done = System::SpmvTranspose(pattern, Raw(double_ones_), Raw(batch_counts_)); !done.ok()) {
        return done;
      }
      thrust::transform(System::policy(), to.counts, to.counts + batch.columns, batch_counts_.begin(),
                        to.counts, csr_functors::AddCount{});
    }
    return Outcome{};
  }

  // At least n ones (the vector only ever holds ones).
  template <typename T>
  static const T* Ones(Vec<T>& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n), T{1});
    return Raw(v);
  }
  template <typename T>
  static T* Raw(Vec<T>& v) {
    return thrust::raw_pointer_cast(v.data());
  }
  template <typename T>
  static uint64_t Bytes(const Vec<T>& v) {
    return static_cast<uint64_t>(v.capacity()) * sizeof(T);
  }

  CsrBatch<System, Acc> csr_;
  Vec<Acc> ones_;           // w of the unweighted sums
  Vec<double> double_ones_; // the pattern's values, and x of the counts
  Vec<double> batch_counts_;  // Pᵀ·1 of one batch, added into the int64 counts
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_CSR_SCATTER_H_
