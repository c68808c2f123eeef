// CPU accumulator for the dense-result sparse family (scatter into a dense table).
#include "service/core/cpu_scatter_accumulator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_kernels.h"

namespace fedagg {

namespace {
// Below this many entries in a batch, the threads scatter straight from the updates.
constexpr size_t kMinEntriesToPartition = 1 << 16;
// The rows of one bucket (accumulator, counts, last touches, weight sums) fit in about
// this much cache, so a bucket's scatter hits cache instead of memory.
constexpr size_t kBucketBytes = 256 << 10;
}  // namespace

template <typename Acc>
CpuScatterAccumulator<Acc>::CpuScatterAccumulator(const FieldSpec& field, ThreadPool& pool)
    : field_(field), pool_(pool), acc_(static_cast<size_t>(field.rows * field.row_width)) {
  const size_t rows = static_cast<size_t>(field.rows);
  if (field.keeps_counts) {
    counts_.assign(rows, 0);
    last_touch_.assign(rows, 0);
  }
  if (weighted()) weight_sums_.assign(rows, 0.0);
  // Rows per bucket: a power of two, so a row's bucket is a shift.
  const size_t row_bytes = sizeof(Acc) + (field.keeps_counts ? sizeof(int64_t) + sizeof(uint64_t) : 0) +
                           (weighted() ? sizeof(double) : 0);
  while (bucket_shift_ < 32 && (size_t{2} << bucket_shift_) * row_bytes <= kBucketBytes) ++bucket_shift_;
}

template <typename Acc>
absl::Status CpuScatterAccumulator<Acc>::AccumulateBatch(absl::Span<const FieldValue* const> values,
                                                 absl::Span<const double> weights) {
  size_t entries = 0;
  for (const FieldValue* value : values) entries += value->indices.size();
  const uint64_t first_serial = next_serial_;
  next_serial_ += values.size();
  cpu::DispatchDType(field_.type.dtype, [&](auto tag) {
    using In = typename decltype(tag)::type;
    // One entry of update `i` into `row`: its values, and the row's count and weight sum
    // once per update. Per row, updates add in batch order whichever path runs.
    auto scatter = [&](size_t i, int64_t row, const In* source) {
      cpu::ScatterAddRows(acc_.data(), field_.row_width, &row, source, 1, static_cast<Acc>(weights[i]), weighted());
      const uint64_t serial = first_serial + i;
      if (counts_.empty() || last_touch_[row] == serial) return;
      last_touch_[row] = serial;
      ++counts_[row];
      if (!weight_sums_.empty()) weight_sums_[row] += weights[i];
    };
    const size_t buckets = static_cast<size_t>(((field_.rows - 1) >> bucket_shift_) + 1);
    if (field_.row_width != 1 || entries < kMinEntriesToPartition || buckets == 1) {
      // Threads own disjoint row ranges: each reads every index but writes only its rows.
      // (Row-sparse entries are whole rows: their scatter already streams.)
      const int64_t min_rows = entries < kMinEntriesToPartition ? field_.rows : 1 << 12;
      pool_.ParallelFor(field_.rows, min_rows, [&](int64_t row_begin, int64_t row_end) {
        for (size_t i = 0; i < values.size(); ++i) {
          const absl::Span<const int64_t> ids = values[i]->indices;
          const In* rows = reinterpret_cast<const In*>(values[i]->values.data());
          for (size_t k = 0; k < ids.size(); ++k) {
            if (ids[k] >= row_begin && ids[k] < row_end) scatter(i, ids[k], rows + static_cast<int64_t>(k) * field_.row_width);
          }
        }
      });
      return;
    }
    // A random scatter into a table larger than the cache misses about once per entry.
    // So the entries (row, value, update) are first partitioned by row range, in batch
    // order: each group of updates counts its entries per bucket, the counts give every
    // (bucket, group) its place, and each group copies its entries there. Then each
    // bucket is scattered while its rows sit in cache, the buckets spread over the
    // threads (disjoint rows: no two threads touch a row). All three passes stream.
    const size_t groups = std::min<size_t>(static_cast<size_t>(pool_.threads()), values.size());
    auto group_begin = [&](size_t g) { return g * values.size() / groups; };
    std::vector<size_t> places(groups * buckets + 1, 0);  // [g * buckets + b], then running starts
    pool_.ParallelFor(static_cast<int64_t>(groups), 1, [&](int64_t g0, int64_t g1) {
      for (size_t g = static_cast<size_t>(g0); g < static_cast<size_t>(g1); ++g) {
        size_t* counts = &places[g * buckets];
        for (size_t i = group_begin(g); i < group_begin(g + 1); ++i) {
          for (const int64_t row : values[i]->indices) ++counts[row >> bucket_shift_];
        }
      }
    });
    // Starts in (bucket, group) order; bucket_starts_[b] is the start of bucket b.
    bucket_starts_.assign(buckets + 1, 0);
    size_t next = 0;
    for (size_t b = 0; b < buckets; ++b) {
      bucket_starts_[b] = next;
      for (size_t g = 0; g < groups; ++g) {
        const size_t count = places[g * buckets + b];
        places[g * buckets + b] = next;
        next += count;
      }
    }
    bucket_starts_[buckets] = next;
    PartitionedEntry<In>* partitioned = PartitionBuffer<In>(entries);
    pool_.ParallelFor(static_cast<int64_t>(groups), 1, [&](int64_t g0, int64_t g1) {
      for (size_t g = static_cast<size_t>(g0); g < static_cast<size_t>(g1); ++g) {
        size_t* place = &places[g * buckets];
        for (size_t i = group_begin(g); i < group_begin(g + 1); ++i) {
          const absl::Span<const int64_t> ids = values[i]->indices;
          const In* source = reinterpret_cast<const In*>(values[i]->values.data());
          for (size_t k = 0; k < ids.size(); ++k) {
            partitioned[place[ids[k] >> bucket_shift_]++] = PartitionedEntry<In>{ids[k], source[k], static_cast<uint32_t>(i)};
          }
        }
      }
    });
    pool_.ParallelFor(static_cast<int64_t>(buckets), 1, [&](int64_t first, int64_t last) {
      for (size_t e = bucket_starts_[first]; e < bucket_starts_[last]; ++e) {
        scatter(partitioned[e].update, partitioned[e].row, &partitioned[e].value);
      }
    });
  });
  return absl::OkStatus();
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
  ReportedField out{field_.path, field_.intrinsic, Tensor{field_.result_dtype, field_.type.shape, {}}};
  out.value.bytes.resize(acc_.size() * DTypeSize(field_.result_dtype));
  const bool mean = field_.intrinsic == Intrinsic::kSparseMean ||
                    field_.intrinsic == Intrinsic::kRowSparseMean || weighted();
  const int64_t width = field_.row_width;
  cpu::DispatchDType(field_.result_dtype, [&](auto tag) {
    using Out = typename decltype(tag)::type;
    if constexpr (std::is_same_v<Out, float> || std::is_same_v<Out, double> ||
                  std::is_same_v<Out, int64_t>) {
      absl::Span<Out> dst = out.value.mutable_values<Out>();
      for (int64_t row = 0; row < field_.rows; ++row) {
        using Div = std::conditional_t<std::is_integral_v<Acc>, double, Acc>;
        Div divisor = 0;
        if (mean) divisor = weighted() ? static_cast<Div>(weight_sums_[row]) : static_cast<Div>(counts_[row]);
        for (int64_t e = 0; e < width; ++e) {
          const size_t i = static_cast<size_t>(row * width + e);
          // A coordinate nobody touched has mean 0: there is nothing to divide.
          dst[i] = mean ? (divisor == 0 ? Out{0} : static_cast<Out>(static_cast<Div>(acc_[i]) / divisor))
                        : static_cast<Out>(acc_[i]);
        }
      }
    }
  });
  if (field_.report_counts) out.counts = counts_;
  return out;
}

template <typename Acc>
uint64_t CpuScatterAccumulator<Acc>::MemoryBytes() const {
  return acc_.capacity() * sizeof(acc_[0]) +
         counts_.capacity() * sizeof(counts_[0]) +
         weight_sums_.capacity() * sizeof(weight_sums_[0]) +
         last_touch_.capacity() * sizeof(last_touch_[0]) + partition_bytes_.capacity() +
         bucket_starts_.capacity() * sizeof(bucket_starts_[0]);
}

template class CpuScatterAccumulator<float>;
template class CpuScatterAccumulator<double>;
template class CpuScatterAccumulator<int64_t>;

}  // namespace fedagg
