// The last step of every intrinsic, from a field's accumulated arrays (field_report.h).
#include "service/core/field_report.h"

#include <algorithm>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_kernels.h"
#include "service/core/dtype.h"

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
  return out;
}

}  // namespace

template <typename Acc>
ReportedField ReportDense(const FieldSpec& field, absl::Span<const Acc> acc, int64_t contributions,
                          double weight_sum) {
  ReportedField out = EmptyResult(field, field.type.shape, acc.size());
  double divisor = 0;  // 0: written as summed
  if (field.intrinsic == Intrinsic::kFederatedMean) divisor = static_cast<double>(contributions);
  if (field.intrinsic == Intrinsic::kFederatedWeightedMean) divisor = weight_sum;
  WithResultValues(out.value, [&](auto dst) {
    using Out = typename decltype(dst)::value_type;
    if (divisor == 0) {
      for (size_t i = 0; i < acc.size(); ++i) dst[i] = static_cast<Out>(acc[i]);
    } else {
      const Divisor<Acc> d = static_cast<Divisor<Acc>>(divisor);
      for (size_t i = 0; i < acc.size(); ++i) dst[i] = static_cast<Out>(static_cast<Divisor<Acc>>(acc[i]) / d);
    }
  });
  return out;
}

template <typename Acc>
ReportedField ReportScatter(const FieldSpec& field, absl::Span<const Acc> acc,
                            absl::Span<const int64_t> counts, absl::Span<const double> weight_sums) {
  ReportedField out = EmptyResult(field, field.type.shape, acc.size());
  const bool weighted = field.keeps_weight_sums;
  const bool mean = weighted || field.intrinsic == Intrinsic::kSparseMean ||
                    field.intrinsic == Intrinsic::kRowSparseMean;
  const int64_t width = field.row_width;
  WithResultValues(out.value, [&](auto dst) {
    using Out = typename decltype(dst)::value_type;
    if (!mean) {
      for (size_t i = 0; i < acc.size(); ++i) dst[i] = static_cast<Out>(acc[i]);
      return;
    }
    for (int64_t row = 0; row < field.rows; ++row) {
      const size_t first = static_cast<size_t>(row * width);
      const auto r = static_cast<size_t>(row);
      const Divisor<Acc> divisor = weighted ? static_cast<Divisor<Acc>>(weight_sums[r])
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

template <typename Acc>
absl::StatusOr<ReportedField> ReportStateValues(const FieldSpec& field,
                                                absl::FunctionRef<absl::Status(absl::Span<Acc>)> fill) {
  if (!field.result_is_state || DTypeSize(field.result_dtype) != sizeof(Acc)) {
    return absl::InternalError(absl::StrCat("field '", field.path, "': its result is not its state as kept"));
  }
  ReportedField out = EmptyResult(field, field.type.shape, static_cast<size_t>(field.type.num_elements()));
  if (absl::Status filled = fill(out.value.mutable_values<Acc>()); !filled.ok()) return filled;
  return out;
}

template <typename Acc>
ReportedField ReportUnion(const FieldSpec& field, absl::Span<const UnionPiece<Acc>> pieces) {
  size_t nnz = 0;
  for (const UnionPiece<Acc>& piece : pieces) nnz += piece.indices.size();
  ReportedField out{field.path, field.intrinsic, Tensor{field.result_dtype, {static_cast<int64_t>(nnz)}, {}}};
  out.value.bytes.resize(nnz * sizeof(Acc));
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
  template absl::StatusOr<ReportedField> ReportStateValues<Acc>(                                        \
      const FieldSpec&, absl::FunctionRef<absl::Status(absl::Span<Acc>)>);                              \
  template ReportedField ReportUnion<Acc>(const FieldSpec&, absl::Span<const UnionPiece<Acc>>);
FEDAGG_INSTANTIATE_FIELD_REPORT(float)
FEDAGG_INSTANTIATE_FIELD_REPORT(double)
FEDAGG_INSTANTIATE_FIELD_REPORT(int64_t)
#undef FEDAGG_INSTANTIATE_FIELD_REPORT

uint64_t ReportHostBytes(const ReductionSpec& spec) {
  constexpr uint64_t kIndex = sizeof(int64_t), kCount = sizeof(int64_t), kWeightSum = sizeof(double);
  uint64_t bytes = 0;
  for (const FieldSpec& field : spec.fields()) {
    const uint64_t elements = static_cast<uint64_t>(field.type.num_elements());
    const uint64_t rows = static_cast<uint64_t>(field.rows);
    const uint64_t result = DTypeSize(field.result_dtype), state = DTypeSize(field.accumulation_dtype);
    if (field.intrinsic == Intrinsic::kSparseSumSparse) {
      bytes += elements * (kIndex + result + kCount) + elements * (kIndex + state + kCount);
    } else if (field.result_is_state) {
      bytes += elements * result;
    } else if (field.encoding == Encoding::kDense) {
      bytes += elements * (result + state);
    } else {
      // The state's per-row counts and weight sums, where the field keeps them, and the
      // counts its result reports.
      const uint64_t kept_per_row = (field.keeps_counts ? kCount : 0) +
                                    (field.keeps_weight_sums ? kWeightSum : 0);
      bytes += elements * (result + state) + rows * kept_per_row + (field.report_counts ? rows * kCount : 0);
    }
  }
  return bytes;
}

}  // namespace fedagg
