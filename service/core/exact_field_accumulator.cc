// Exact accumulation of a deterministic aggregation's floating-point fields
// (exact_field_accumulator.h).
#include "service/core/exact_field_accumulator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_kernels.h"
#include "service/core/field_report.h"

namespace fedagg {
namespace {

// Below this many elements per thread, splitting costs more than it saves.
constexpr int64_t kMinElementsPerThread = 1 << 12;
// Rows of a sparse-family field below which its batch is not split over threads.
constexpr int64_t kMinRowsPerThread = 1 << 12;
// Entries ahead whose sums the sparse family's scatter asks the cache for: each is a miss
// in a state this large, and several in flight hide most of their latency.
constexpr size_t kPrefetchDistance = 16;
// Elements of a dense field whose batch is pre-summed together (AccumulateDense).
constexpr int64_t kElementsPerBlock = 1024;

// What one value adds to its sum: the value, or the value times its update's weight (one
// float64 product, the same on every node).
template <typename In>
double Contribution(In x, double weight, bool weighted) {
  const double value = cpu::Widen<double>(x);
  return weighted ? weight * value : value;
}

template <typename In>
const In* ValuesOf(const FieldValue& value) {
  return reinterpret_cast<const In*>(value.values.data());
}

}  // namespace

ExactFieldAccumulator::ExactFieldAccumulator(const FieldSpec& field, ThreadPool& pool)
    : field_(field),
      pool_(pool),
      weighted_(IsWeighted(field.intrinsic)),
      sums_(ExactSums::GridFor(field.accumulation_dtype),
            field.intrinsic == Intrinsic::kSparseSumSparse ? 0 : field.type.num_elements()),
      counts_(field.keeps_counts && field.intrinsic != Intrinsic::kSparseSumSparse
                  ? static_cast<size_t>(field.rows)
                  : 0,
              0),
      weight_sums_(ExactSums::Grid::kFloat64, field.keeps_weight_sums ? field.rows : 0) {
  if (field.intrinsic == Intrinsic::kSparseSumSparse) {
    union_.emplace(field.type.num_elements(), ExactSums::GridFor(field.accumulation_dtype), pool);
  }
}

absl::Status ExactFieldAccumulator::AccumulateBatch(absl::Span<const FieldValue* const> values,
                                                    absl::Span<const double> weights) {
  if (values.empty()) return absl::OkStatus();
  if (is_union()) {
    union_->AddBatch(values);  // sparse_sum_sparse takes no weights
  } else if (field_.encoding == Encoding::kDense) {
    AccumulateDense(values, weights);
  } else {
    AccumulateRows(values, weights);
  }
  return absl::OkStatus();
}

void ExactFieldAccumulator::AccumulateDense(absl::Span<const FieldValue* const> values,
                                            absl::Span<const double> weights) {
  cpu::DispatchDType(field_.type.dtype, [&](auto tag) {
    using In = typename decltype(tag)::type;
    pool_.ParallelFor(sums_.size(), kMinElementsPerThread, [&](int64_t begin, int64_t end) {
      // The batch's contributions are first summed in float64, one block of elements at
      // a time, with each addition's rounding error found exactly (Knuth's TwoSum; this
      // file is built with -ffp-contract=off, so a weighted product is rounded before it
      // is added, as everywhere else). Where no addition rounded (values of a few
      // neighbouring binades, as a coordinate's updates mostly are) that sum is exact and
      // goes into the element's exact sum as one value; the other elements take their
      // contributions one by one. Either way the sum is exact. A contribution finer than
      // the float32 grid (a weighted product below 2^-96) is rounded to the grid on its
      // own wherever it is added, so its element takes the one-by-one path too: rounding
      // a sum of such contributions once would depend on which share a batch.
      const double finest_exact = sums_.grid() == ExactSums::Grid::kFloat32 && weighted_ ? 0x1p-96 : 0.0;
      double partial[kElementsPerBlock];
      bool rounded[kElementsPerBlock];
      for (int64_t block = begin; block < end; block += kElementsPerBlock) {
        const int64_t size = std::min(end - block, kElementsPerBlock);
        std::fill_n(partial, size, 0.0);
        std::fill_n(rounded, size, false);
        for (size_t u = 0; u < values.size(); ++u) {
          const In* x = ValuesOf<In>(*values[u]) + block;
          for (int64_t k = 0; k < size; ++k) {
            const double value = Contribution(x[k], weights[u], weighted_);
            const double sum = partial[k] + value;
            const double value_part = sum - partial[k];
            const double error = (partial[k] - (sum - value_part)) + (value - value_part);
            rounded[k] |= (error != 0) | (value != 0 && std::abs(value) < finest_exact);
            partial[k] = sum;
          }
        }
        for (int64_t k = 0; k < size; ++k) {
          if (!rounded[k]) {
            sums_.Add(block + k, partial[k]);
            continue;
          }
          for (size_t u = 0; u < values.size(); ++u) {
            sums_.Add(block + k, Contribution(ValuesOf<In>(*values[u])[block + k], weights[u], weighted_));
          }
        }
      }
    });
  });
}

void ExactFieldAccumulator::AccumulateRows(absl::Span<const FieldValue* const> values,
                                           absl::Span<const double> weights) {
  const int64_t width = field_.row_width;
  const bool per_row = !counts_.empty() || weight_sums_.size() > 0;
  cpu::DispatchDType(field_.type.dtype, [&](auto tag) {
    using In = typename decltype(tag)::type;
    // Each thread takes the entries of one range of rows, from every update: an update
    // whose indices ascend (as validation found) is cut at the range's bounds; another is
    // read whole, its entries outside the range skipped.
    pool_.ParallelFor(field_.rows, kMinRowsPerThread, [&](int64_t row_begin, int64_t row_end) {
      std::vector<size_t> in_range;  // positions of an update's entries in the range
      std::vector<int64_t> rows;     // the rows they hold, for the counts
      for (size_t u = 0; u < values.size(); ++u) {
        const FieldValue& value = *values[u];
        const absl::Span<const int64_t> ids = value.indices;
        in_range.clear();
        if (value.ascending) {
          const size_t first = static_cast<size_t>(std::lower_bound(ids.begin(), ids.end(), row_begin) - ids.begin());
          const size_t last = static_cast<size_t>(std::lower_bound(ids.begin(), ids.end(), row_end) - ids.begin());
          for (size_t k = first; k < last; ++k) in_range.push_back(k);
        } else {
          for (size_t k = 0; k < ids.size(); ++k) {
            if (ids[k] >= row_begin && ids[k] < row_end) in_range.push_back(k);
          }
        }
        const In* x = ValuesOf<In>(value);
        for (size_t n = 0; n < in_range.size(); ++n) {
          if (n + kPrefetchDistance < in_range.size()) sums_.Prefetch(ids[in_range[n + kPrefetchDistance]] * width);
          const size_t k = in_range[n];
          for (int64_t e = 0; e < width; ++e) {
            sums_.Add(ids[k] * width + e, Contribution(x[static_cast<int64_t>(k) * width + e], weights[u], weighted_));
          }
        }
        if (!per_row) continue;
        // An update holding a row more than once counts for it once.
        rows.clear();
        for (size_t k : in_range) rows.push_back(ids[k]);
        if (!value.ascending) std::sort(rows.begin(), rows.end());
        rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
        for (int64_t row : rows) {
          if (!counts_.empty()) ++counts_[static_cast<size_t>(row)];
          if (weight_sums_.size() > 0) weight_sums_.Add(row, weights[u]);
        }
      }
    });
  });
}

absl::Status ExactFieldAccumulator::MergeWith(const FieldAccumulator& other_base) {
  const auto& other = static_cast<const ExactFieldAccumulator&>(other_base);
  if (is_union()) {
    union_->MergeWith(*other.union_);
    return absl::OkStatus();
  }
  pool_.ParallelFor(sums_.size(), kMinElementsPerThread, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) sums_.AddSum(i, other.sums_, i);
  });
  for (size_t r = 0; r < counts_.size(); ++r) counts_[r] += other.counts_[r];
  for (int64_t r = 0; r < weight_sums_.size(); ++r) weight_sums_.AddSum(r, other.weight_sums_, r);
  return absl::OkStatus();
}

absl::Status ExactFieldAccumulator::SerializeTo(ByteWriter& out) const {
  if (is_union()) {
    union_->SerializeTo(out);
    return absl::OkStatus();
  }
  sums_.SerializeTo(out);
  if (field_.encoding != Encoding::kDense) {
    out.PutArray(counts_.data(), counts_.size());
    weight_sums_.SerializeTo(out);
  }
  return absl::OkStatus();
}

absl::Status ExactFieldAccumulator::DeserializeFrom(ByteReader& in, int64_t contributions) {
  const std::string what = absl::StrCat("field '", field_.path, "'");
  if (is_union()) return union_->DeserializeFrom(in, contributions, what);
  if (absl::Status s = sums_.DeserializeFrom(in, what); !s.ok()) return s;
  if (field_.encoding != Encoding::kDense) {
    if (absl::Status s = in.GetArrayExact(counts_.data(), counts_.size(), what + " counts"); !s.ok()) return s;
    for (int64_t count : counts_) {
      if (count < 0 || count > contributions) {
        return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " has a count of ", count,
                                                " with ", contributions, " contributions"));
      }
    }
  }
  if (field_.encoding != Encoding::kDense) {
    if (absl::Status s = weight_sums_.DeserializeFrom(in, what + " weight sums"); !s.ok()) return s;
    for (int64_t r = 0; r < weight_sums_.size(); ++r) {
      if (!(weight_sums_.Rounded(r) >= 0)) {
        return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " has a negative weight sum"));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<double> ExactFieldAccumulator::RoundedSums(const ExactSums& sums) const {
  std::vector<double> rounded(static_cast<size_t>(sums.size()));
  pool_.ParallelFor(sums.size(), kMinElementsPerThread, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) rounded[static_cast<size_t>(i)] = sums.Rounded(i);
  });
  return rounded;
}

absl::StatusOr<ReportedField> ExactFieldAccumulator::Report(int64_t contributions, double weight_sum) const {
  if (is_union()) {
    auto report = [&](auto zero) {
      using Out = decltype(zero);
      const std::vector<ExactSparseUnion::Piece> shards = union_->Pieces();
      std::vector<std::vector<Out>> values(shards.size());
      std::vector<UnionPiece<Out>> pieces;
      pieces.reserve(shards.size());
      for (size_t p = 0; p < shards.size(); ++p) {
        const std::vector<double> sums = RoundedSums(*shards[p].sums);
        values[p].assign(sums.begin(), sums.end());
        pieces.push_back({shards[p].indices, values[p], shards[p].counts});
      }
      return ReportUnion<Out>(field_, pieces);
    };
    return field_.result_dtype == DType::kFloat32 ? report(0.0f) : report(0.0);
  }
  const std::vector<double> sums = RoundedSums(sums_);
  if (field_.encoding == Encoding::kDense) return ReportDense<double>(field_, sums, contributions, weight_sum);
  return ReportScatter<double>(field_, sums, counts_, RoundedSums(weight_sums_));
}

uint64_t ExactFieldAccumulator::MemoryBytes() const {
  return sums_.MemoryBytes() + weight_sums_.MemoryBytes() + counts_.capacity() * sizeof(int64_t) +
         (is_union() ? union_->MemoryBytes() : 0);
}

}  // namespace fedagg
