// The last step of every intrinsic, from a field's accumulated arrays (field_report.h).
#include "service/core/field_report.h"

#include <algorithm>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_kernels.h"
#include "service/core/dtype.h"
#include "service/core/rotation.h"

namespace fedagg {
namespace {

// Calls body(dst) with the result tensor's values for the result dtypes the reductions
// produce (float32, float64, int64).
template <typename Body>
void WithResultValues(Tensor& out, Body&& body) {
  cpu::DispatchDType(out.dtype, [&](auto tag) {
    using Out = typename decltype(tag)::type;
    if constexpr (std::is_same_v<Out, float> || std::is_same_v<Out, double> ||
                  std::is_same_v<Out, int64_t>) {
      body(out.mutable_values<Out>());
    }
  });
}

// Divisions happen in the accumulation precision, or float64 for integer sums.
template <typename Acc>
using Divisor = std::conditional_t<std::is_integral_v<Acc>, double, Acc>;

ReportedField EmptyResult(const FieldSpec& field, std::vector<int64_t> shape, size_t elements) {
  ReportedField out{field.path, field.intrinsic, Tensor{field.result_dtype, std::move(shape), {}}};
  out.value.bytes.resize(elements * DTypeSize(field.result_dtype));
  out.has_counts = field.report_counts;
  return out;
}

}  // namespace

ResultDivision DivisionOf(const FieldSpec& field, int64_t contributions, double weight_sum) {
  using By = ResultDivision::By;
  switch (field.intrinsic) {
    case Intrinsic::kFederatedMean:
      return contributions == 0 ? ResultDivision{} : ResultDivision{By::kScalar, static_cast<double>(contributions)};
    case Intrinsic::kFederatedWeightedMean:
      return weight_sum == 0 ? ResultDivision{} : ResultDivision{By::kScalar, weight_sum};
    case Intrinsic::kSparseMean:
    case Intrinsic::kRowSparseMean: return ResultDivision{By::kRowCount, 0};
    case Intrinsic::kSparseWeightedMean: return ResultDivision{By::kRowWeightSum, 0};
    default: return ResultDivision{};
  }
}

template <typename Acc>
ReportedField ReportDense(const FieldSpec& field, absl::Span<const Acc> acc, int64_t contributions,
                          double weight_sum) {
  ReportedField out = EmptyResult(field, field.type.shape, acc.size());
  const ResultDivision division = DivisionOf(field, contributions, weight_sum);
  WithResultValues(out.value, [&](auto dst) {
    using Out = typename decltype(dst)::value_type;
    if (field.value_encoding.discretized()) {  // integer steps times the scale, in float64
      const double scale = field.value_encoding.scale;
      const double d = division.by == ResultDivision::By::kNothing ? 1.0 : division.scalar;
      const int shift = 64 - field.modulus_bits;  // a secure sum: the low modulus_bits bits, signed
      for (size_t i = 0; i < acc.size(); ++i) {
        const int64_t steps = field.modulus_bits == 0
                                  ? static_cast<int64_t>(acc[i])
                                  : static_cast<int64_t>(static_cast<uint64_t>(acc[i]) << shift) >> shift;
        dst[i] = static_cast<Out>(static_cast<double>(steps) * scale / d);
      }
    } else if (division.by == ResultDivision::By::kNothing) {
      for (size_t i = 0; i < acc.size(); ++i) dst[i] = static_cast<Out>(acc[i]);
    } else {
      const Divisor<Acc> d = static_cast<Divisor<Acc>>(division.scalar);
      for (size_t i = 0; i < acc.size(); ++i) dst[i] = static_cast<Out>(static_cast<Divisor<Acc>>(acc[i]) / d);
    }
  });
  UnrotateResult(field.value_encoding, out.value);
  return out;
}

template <typename Acc>
ReportedField ReportScatter(const FieldSpec& field, absl::Span<const Acc> acc,
                            absl::Span<const int64_t> counts, absl::Span<const double> weight_sums) {
  ReportedField out = EmptyResult(field, field.type.shape, acc.size());
  const ResultDivision::By by = DivisionOf(field, 0, 0).by;
  const int64_t width = field.row_width;
  WithResultValues(out.value, [&](auto dst) {
    using Out = typename decltype(dst)::value_type;
    if (by == ResultDivision::By::kNothing) {
      for (size_t i = 0; i < acc.size(); ++i) dst[i] = static_cast<Out>(acc[i]);
      return;
    }
    for (int64_t row = 0; row < field.rows; ++row) {
      const size_t first = static_cast<size_t>(row * width);
      const auto r = static_cast<size_t>(row);
      const Divisor<Acc> divisor = by == ResultDivision::By::kRowWeightSum ? static_cast<Divisor<Acc>>(weight_sums[r])
                                                                           : static_cast<Divisor<Acc>>(counts[r]);
      // A coordinate nobody touched has mean 0: there is nothing to divide.
      for (int64_t e = 0; e < width; ++e) {
        dst[first + e] = divisor == 0 ? Out{0} : static_cast<Out>(static_cast<Divisor<Acc>>(acc[first + e]) / divisor);
      }
    }
  });
  if (field.report_counts) out.counts.assign(counts.begin(), counts.end());
  return out;
}

absl::StatusOr<ReportedField> ReportWritten(const FieldSpec& field,
                                            absl::FunctionRef<absl::Status(ReportedField&)> write) {
  if (field.intrinsic == Intrinsic::kSparseSumSparse) {
    return absl::InternalError(absl::StrCat("field '", field.path, "': a sparse_sum_sparse result has no fixed size"));
  }
  ReportedField out = EmptyResult(field, field.type.shape, static_cast<size_t>(field.type.num_elements()));
  if (field.report_counts) out.counts.resize(static_cast<size_t>(field.rows));
  if (absl::Status written = write(out); !written.ok()) return written;
  return out;
}

template <typename Acc>
ReportedField ReportUnion(const FieldSpec& field, absl::Span<const UnionPiece<Acc>> pieces) {
  size_t nnz = 0;
  for (const UnionPiece<Acc>& piece : pieces) nnz += piece.indices.size();
  ReportedField out = EmptyResult(field, {static_cast<int64_t>(nnz)}, nnz);
  Acc* values = out.value.mutable_values<Acc>().data();
  out.indices.reserve(nnz);
  if (field.report_counts) out.counts.reserve(nnz);
  for (const UnionPiece<Acc>& piece : pieces) {
    values = std::copy(piece.values.begin(), piece.values.end(), values);
    out.indices.insert(out.indices.end(), piece.indices.begin(), piece.indices.end());
    if (field.report_counts) out.counts.insert(out.counts.end(), piece.counts.begin(), piece.counts.end());
  }
  return out;
}

#define FEDAGG_INSTANTIATE_FIELD_REPORT(Acc)                                                            \
  template ReportedField ReportDense<Acc>(const FieldSpec&, absl::Span<const Acc>, int64_t, double);     \
  template ReportedField ReportScatter<Acc>(const FieldSpec&, absl::Span<const Acc>,                     \
                                            absl::Span<const int64_t>, absl::Span<const double>);        \
  template ReportedField ReportUnion<Acc>(const FieldSpec&, absl::Span<const UnionPiece<Acc>>);
FEDAGG_INSTANTIATE_FIELD_REPORT(float)
FEDAGG_INSTANTIATE_FIELD_REPORT(double)
FEDAGG_INSTANTIATE_FIELD_REPORT(int64_t)
#undef FEDAGG_INSTANTIATE_FIELD_REPORT

uint64_t ReportHostBytes(const ReductionSpec& spec) {
  constexpr uint64_t kIndex = sizeof(int64_t), kCount = sizeof(int64_t);
  uint64_t bytes = 0;
  for (const FieldSpec& field : spec.fields()) {
    const uint64_t elements = static_cast<uint64_t>(field.type.num_elements());
    const uint64_t result = DTypeSize(field.result_dtype), state = DTypeSize(field.accumulation_dtype);
    if (field.intrinsic == Intrinsic::kSparseSumSparse) {
      bytes += elements * (kIndex + result + kCount) + elements * (kIndex + state + kCount);
    } else {
      bytes += elements * result + (field.report_counts ? static_cast<uint64_t>(field.rows) * kCount : 0);
    }
  }
  return bytes;
}

}  // namespace fedagg
