// CsrBatch<System, Acc>: turns one batch of the sparse family, as COO entries in a Thrust
// system's memory, into a CSR matrix A [B, D] (row = update, column = coordinate) whose
// values are widened to Acc — the operand of the system's SpMV y += Aᵀx (csr_scatter.h).
// Written once with Thrust algorithms for any system, so the thrust-omp build runs on the
// CPU exactly the path the GPU runs. Offsets and columns are 32-bit when D and the entry
// count allow (FitsNarrow), 64-bit otherwise. A row's columns come out strictly
// increasing, an update's repeated coordinates summed into one entry. When every update's
// indices already increase strictly (the caller checked: CooBatch::rows_increase), the
// batch is a CSR matrix as staged: its update offsets are the row offsets and its indices
// the columns, so a 64-bit build borrows them (and the values too, when they need no
// widening) and makes no pass at all. The vectors are kept between batches, so a batch of
// the same size allocates nothing.
#ifndef FEDAGG_PORTABLE_CSR_BATCH_H_
#define FEDAGG_PORTABLE_CSR_BATCH_H_

#include <cstdint>
#include <limits>
#include <type_traits>

#include <thrust/binary_search.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include "portable/csr_matrix.h"
#include "portable/portable_math.h"

namespace fedagg::portable {

// A batch's COO entries in the system's memory, grouped by update in update order.
template <typename In>
struct CooBatch {
  const int64_t* ids = nullptr;      // [entries], each in [0, columns) (checked before)
  const int64_t* offsets = nullptr;  // [updates + 1]: each update's first entry, then `entries`
  const In* values = nullptr;        // [entries]
  int64_t entries = 0;
  int64_t updates = 0;  // B, the rows of A; an update may have no entry
  int64_t columns = 0;  // D, the coordinates of the field
  // Every update's ids increase strictly: the entries are a CSR matrix as they are.
  bool rows_increase = false;
  // [entries], nondecreasing: the update of each entry; read only when !rows_increase.
  const int32_t* update = nullptr;
};

namespace csr_functors {

// (update, coordinate) as one key ordered row-major: update * D + coordinate.
struct RowMajorKey {
  const int64_t* ids;
  const int32_t* update;
  int64_t columns;
  FEDAGG_HOST_DEVICE int64_t operator()(int64_t k) const {
    return static_cast<int64_t>(update[k]) * columns + ids[k];
  }
};

// The first key of a row.
struct RowStart {
  int64_t columns;
  FEDAGG_HOST_DEVICE int64_t operator()(int64_t row) const { return row * columns; }
};

template <typename Index>
struct ColumnOfKey {
  int64_t columns;
  FEDAGG_HOST_DEVICE Index operator()(int64_t key) const { return static_cast<Index>(key % columns); }
};

template <typename Index>
struct NarrowTo {
  FEDAGG_HOST_DEVICE Index operator()(int64_t v) const { return static_cast<Index>(v); }
};

}  // namespace csr_functors

template <typename System, typename Acc>
class CsrBatch {
  template <typename T>
  using Vec = typename System::template vector<T>;

 public:
  // Whether 32-bit offsets and columns hold a batch of `entries` entries over `columns`
  // coordinates (the entry count bounds the nonzeros).
  static bool FitsNarrow(int64_t columns, int64_t entries) {
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    return columns <= kMax && entries <= kMax;
  }
  // Whether every (update, coordinate) pair of `updates` rows has a row-major int64 key,
  // which the sort of unordered batches needs.
  static bool Fits(int64_t updates, int64_t columns) {
    return columns <= 0 || updates <= std::numeric_limits<int64_t>::max() / columns;
  }

  // A of `batch` (Fits(batch.updates, batch.columns) must hold), valid until the next Build.
  template <typename Index, typename In>
  CsrMatrix<Index, Acc> Build(const CooBatch<In>& batch) {
    static_assert(std::is_same_v<Index, int32_t> || std::is_same_v<Index, int64_t>);
    Vec<Index>& offsets = Offsets<Index>();
    Vec<Index>& columns = Columns<Index>();
    const auto policy = System::policy();
    const thrust::counting_iterator<int64_t> first(0);
    const int64_t entries = batch.entries;
    if (batch.rows_increase) {
      const Acc* values = Widened(batch);
      if constexpr (std::is_same_v<Index, int64_t>) {
        return CsrMatrix<Index, Acc>{batch.updates, batch.columns, entries, batch.offsets, batch.ids, values};
      } else {
        offsets.resize(static_cast<size_t>(batch.updates + 1));
        columns.resize(static_cast<size_t>(entries));
        thrust::transform(policy, batch.offsets, batch.offsets + batch.updates + 1, offsets.begin(),
                          csr_functors::NarrowTo<Index>{});
        thrust::transform(policy, batch.ids, batch.ids + entries, columns.begin(), csr_functors::NarrowTo<Index>{});
        return CsrMatrix<Index, Acc>{batch.updates, batch.columns, entries, Raw(offsets), Raw(columns), values};
      }
    }
    // Sort the entries row-major (stably: repeated coordinates are summed in batch
    // order), then sum the runs of one key.
    offsets.resize(static_cast<size_t>(batch.updates + 1));
    keys_.resize(static_cast<size_t>(entries));
    order_.resize(static_cast<size_t>(entries));
    unique_keys_.resize(static_cast<size_t>(entries));
    values_.resize(static_cast<size_t>(entries));
    thrust::transform(policy, first, first + entries, keys_.begin(),
                      csr_functors::RowMajorKey{batch.ids, batch.update, batch.columns});
    thrust::sequence(policy, order_.begin(), order_.end(), int64_t{0});
    thrust::stable_sort_by_key(policy, keys_.begin(), keys_.end(), order_.begin());
    const auto ends = thrust::reduce_by_key(
        policy, keys_.begin(), keys_.end(),
        thrust::make_transform_iterator(order_.begin(), WidenEntry<Acc, In>{batch.values}),
        unique_keys_.begin(), values_.begin());
    const int64_t nnz = ends.first - unique_keys_.begin();
    columns.resize(static_cast<size_t>(nnz));
    thrust::transform(policy, unique_keys_.begin(), unique_keys_.begin() + nnz, columns.begin(),
                      csr_functors::ColumnOfKey<Index>{batch.columns});
    const auto row_starts = thrust::make_transform_iterator(first, csr_functors::RowStart{batch.columns});
    thrust::lower_bound(policy, unique_keys_.begin(), unique_keys_.begin() + nnz, row_starts,
                        row_starts + (batch.updates + 1), offsets.begin());
    return CsrMatrix<Index, Acc>{batch.updates, batch.columns, nnz, Raw(offsets), Raw(columns), Raw(values_)};
  }

  // Bytes of the vectors kept between batches.
  uint64_t Bytes() const {
    return Bytes(narrow_offsets_) + Bytes(narrow_columns_) + Bytes(wide_offsets_) + Bytes(wide_columns_) +
           Bytes(values_) + Bytes(keys_) + Bytes(order_) + Bytes(unique_keys_);
  }

 private:
  // The batch's values as Acc: its own when they are Acc already, else widened here.
  template <typename In>
  const Acc* Widened(const CooBatch<In>& batch) {
    if constexpr (std::is_same_v<In, Acc>) {
      return batch.values;
    } else {
      values_.resize(static_cast<size_t>(batch.entries));
      const thrust::counting_iterator<int64_t> first(0);
      thrust::transform(System::policy(), first, first + batch.entries, values_.begin(),
                        WidenEntry<Acc, In>{batch.values});
      return Raw(values_);
    }
  }

  template <typename T>
  static uint64_t Bytes(const Vec<T>& v) {
    return static_cast<uint64_t>(v.capacity()) * sizeof(T);
  }
  template <typename T>
  static const T* Raw(const Vec<T>& v) {
    return thrust::raw_pointer_cast(v.data());
  }
  template <typename Index>
  Vec<Index>& Offsets() {
    if constexpr (std::is_same_v<Index, int32_t>) {
      return narrow_offsets_;
    } else {
      return wide_offsets_;
    }
  }
  template <typename Index>
  Vec<Index>& Columns() {
    if constexpr (std::is_same_v<Index, int32_t>) {
      return narrow_columns_;
    } else {
      return wide_columns_;
    }
  }

  Vec<int32_t> narrow_offsets_;
  Vec<int32_t> narrow_columns_;
  Vec<int64_t> wide_offsets_;
  Vec<int64_t> wide_columns_;
  Vec<Acc> values_;  // widened or summed values; unused when a batch's own are borrowed
  // Only for batches whose updates' indices are not strictly increasing.
  Vec<int64_t> keys_;
  Vec<int64_t> order_;
  Vec<int64_t> unique_keys_;
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_CSR_BATCH_H_
