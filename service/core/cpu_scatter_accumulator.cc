// CPU accumulator for the dense-result sparse family (scatter into a dense table): COO
// batches go through the partitioned scatter, row-sparse batches through ScatterAddRows.
#include "service/core/cpu_scatter_accumulator.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_kernels.h"
#include "service/core/cpu_partitioned_scatter.h"
#include "service/core/field_report.h"

namespace fedagg {

namespace {
// Below this many elements in a row-sparse batch, one thread adds all the rows.
constexpr int64_t kMinElementsToSplit = int64_t{1} << 16;
}  // namespace

template <typename Acc>
CpuScatterAccumulator<Acc>::CpuScatterAccumulator(const FieldSpec& field, ThreadPool& pool)
    : field_(field), pool_(pool), acc_(static_cast<size_t>(field.rows * field.row_width)) {
  const size_t rows = static_cast<size_t>(field.rows);
  if (field.keeps_counts) {
    counts_.assign(rows, 0);
    if (field.encoding == Encoding::kRowSparse) last_touch_.assign(rows, 0);
  }
  if (field.keeps_weight_sums) weight_sums_.assign(rows, 0.0);
}

template <typename Acc>
absl::Status CpuScatterAccumulator<Acc>::AccumulateBatch(absl::Span<const FieldValue* const> values,
                                                 absl::Span<const double> weights) {
  if (field_.encoding == Encoding::kSparse) {
    cpu::PartitionedScatterAdd<Acc>(values, weights, weighted(),
                                    cpu::ScatterTarget<Acc>{absl::MakeSpan(acc_), absl::MakeSpan(counts_),
                                                            absl::MakeSpan(weight_sums_)},
                                    pool_);
    return absl::OkStatus();
  }
  AccumulateRows(values);
  return absl::OkStatus();
}

template <typename Acc>
void CpuScatterAccumulator<Acc>::AccumulateRows(absl::Span<const FieldValue* const> values) {
  int64_t entries = 0;
  for (const FieldValue* value : values) entries += static_cast<int64_t>(value->indices.size());
  const uint64_t first_serial = next_serial_;
  next_serial_ += values.size();
  const int64_t width = field_.row_width;
  cpu::DispatchDType(field_.type.dtype, [&](auto tag) {
    using In = typename decltype(tag)::type;
    // Threads own disjoint row ranges: each reads every row id but adds only the rows in
    // its range, so no two threads touch the same row, and per row, updates still add in
    // batch order.
    const int64_t min_rows = entries * width < kMinElementsToSplit ? field_.rows : 1 << 12;
    pool_.ParallelFor(field_.rows, min_rows, [&](int64_t row_begin, int64_t row_end) {
      for (size_t i = 0; i < values.size(); ++i) {
        const FieldValue& value = *values[i];
        cpu::ScatterAddRows(acc_.data(), width, value.indices.data(),
                            reinterpret_cast<const In*>(value.values.data()), value.indices.size(),
                            row_begin, row_end);
        if (counts_.empty()) continue;
        const uint64_t serial = first_serial + i;
        for (const int64_t row : value.indices) {
          if (row < row_begin || row >= row_end || last_touch_[static_cast<size_t>(row)] == serial) continue;
          last_touch_[static_cast<size_t>(row)] = serial;
          ++counts_[static_cast<size_t>(row)];
        }
      }
    });
  });
}

template <typename Acc>
absl::Status CpuScatterAccumulator<Acc>::MergeWith(const FieldAccumulator& other_base) {
  const auto& other = static_cast<const CpuScatterAccumulator<Acc>&>(other_base);
  for (size_t i = 0; i < acc_.size(); ++i) acc_[i] = cpu::Add(acc_[i], other.acc_[i]);
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  for (size_t i = 0; i < weight_sums_.size(); ++i) weight_sums_[i] += other.weight_sums_[i];
  return absl::OkStatus();
}

template <typename Acc>
absl::Status CpuScatterAccumulator<Acc>::SerializeTo(ByteWriter& out) const {
  out.PutArray(acc_.data(), acc_.size());
  out.PutArray(counts_.data(), counts_.size());
  out.PutArray(weight_sums_.data(), weight_sums_.size());
  return absl::OkStatus();
}

template <typename Acc>
absl::Status CpuScatterAccumulator<Acc>::DeserializeFrom(ByteReader& in, int64_t contributions) {
  const std::string what = absl::StrCat("field '", field_.path, "'");
  if (absl::Status s = in.GetArrayExact(acc_.data(), acc_.size(), what); !s.ok()) return s;
  if (absl::Status s = in.GetArrayExact(counts_.data(), counts_.size(), what + " counts"); !s.ok()) {
    return s;
  }
  if (absl::Status s = in.GetArrayExact(weight_sums_.data(), weight_sums_.size(),
                                        what + " weight sums");
      !s.ok()) {
    return s;
  }
  for (int64_t count : counts_) {
    if (count < 0 || count > contributions) {
      return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " has a count of ",
                                              count, " with only ", contributions,
                                              " contributions"));
    }
  }
  for (double w : weight_sums_) {
    if (!std::isfinite(w) || w < 0) {
      return absl::DataLossError(absl::StrCat("partial aggregate: ", what,
                                              " has an invalid weight sum ", w));
    }
  }
  return absl::OkStatus();
}

template <typename Acc>
absl::StatusOr<ReportedField> CpuScatterAccumulator<Acc>::Report(int64_t, double) const {
  return ReportScatter<Acc>(field_, acc_, counts_, weight_sums_);
}

template <typename Acc>
uint64_t CpuScatterAccumulator<Acc>::MemoryBytes() const {
  return acc_.capacity() * sizeof(acc_[0]) +
         counts_.capacity() * sizeof(counts_[0]) +
         weight_sums_.capacity() * sizeof(weight_sums_[0]) +
         last_touch_.capacity() * sizeof(last_touch_[0]);
}

template class CpuScatterAccumulator<float>;
template class CpuScatterAccumulator<double>;
template class CpuScatterAccumulator<int64_t>;

}  // namespace fedagg
