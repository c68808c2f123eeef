// The load generator's result check.
#include "client_stub/loadgen/result_check.h"

#include <cmath>
#include <numeric>

#include "service/core/reference_reducer.h"

namespace fedagg::loadgen {
namespace {

// Unit roundoff of a floating dtype (2^-p for p significand bits).
double Roundoff(DType dtype) {
  switch (dtype) {
    case DType::kFloat64: return std::ldexp(1.0, -53);
    case DType::kFloat16: return std::ldexp(1.0, -11);
    case DType::kBFloat16: return std::ldexp(1.0, -8);
    default: return std::ldexp(1.0, -24);
  }
}

double Tolerance(const FieldSpec& field, int64_t n) {
  if (IsInteger(field.result_dtype)) return 0;
  const bool weighted =
      field.intrinsic == Intrinsic::kFederatedWeightedMean || field.intrinsic == Intrinsic::kSparseWeightedMean;
  // max and min pick a value without arithmetic: only the result's own rounding remains.
  const bool picks = field.intrinsic == Intrinsic::kFederatedMax || field.intrinsic == Intrinsic::kFederatedMin;
  const double accumulation = IsInteger(field.accumulation_dtype) || picks ? 0 : Roundoff(field.accumulation_dtype);
  // A quantized value is decoded in the accumulation dtype, s (q step - 1) times the
  // weight: a few roundings relative to its block's scale, which is at most 3 times a
  // generated value ([0.5, 1.5)). Rotated, a block's scale is up to sqrt(R) times the
  // values and its roundings share a sign (step = 2 / (2^b - 1) is rounded once), so the
  // rotation back adds a block's worth of them together: 4 ulps a coordinate of a block.
  const ValueEncoding& encoding = field.value_encoding;
  const double decode = !encoding.quantized() ? 0
                        : encoding.rotated()  ? 4.0 * static_cast<double>(encoding.block_size) * accumulation
                                              : 16 * accumulation;
  return (weighted ? 2 : 1) * static_cast<double>(n) * accumulation + decode + 2 * Roundoff(field.result_dtype);
}

}  // namespace

CheckReport CheckResult(const ReductionSpec& spec, absl::Span<const GeneratedUpdate> pool,
                        absl::Span<const int64_t> counted_per_update, const AggregateResult& result) {
  CheckReport report;
  report.expected_contributions = std::accumulate(counted_per_update.begin(), counted_per_update.end(), int64_t{0});
  report.contributions = result.contributions;
  std::vector<UpdateView> views;
  for (const GeneratedUpdate& update : pool) views.push_back(update.view());
  std::vector<ReferenceField> expected = ReferenceReduce(spec, views, counted_per_update);
  report.passed = report.contributions == report.expected_contributions && result.fields.size() == expected.size();
  for (size_t f = 0; f < spec.fields().size() && f < result.fields.size(); ++f) {
    FieldCheck check;
    check.path = spec.fields()[f].path;
    AggregateResult one;
    one.fields.push_back(result.fields[f]);
    check.max_relative_error = MaxRelativeError({expected[f]}, one);
    check.tolerance = Tolerance(spec.fields()[f], report.expected_contributions);
    check.passed = check.max_relative_error <= check.tolerance;
    report.passed = report.passed && check.passed;
    report.fields.push_back(std::move(check));
  }
  return report;
}

}  // namespace fedagg::loadgen
