// The load generator's result check.
#include "client_stub/loadgen/result_check.h"

#include <cmath>
#include <numeric>
#include <optional>
#include <vector>

#include "service/core/reference_reducer.h"
#include "service/core/update_clipping.h"

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

// The pool's updates clipped as the server clips them (update_clipping.h), with the
// memory their views read; `clipped[u]`: whether the whole-update bound scaled update u.
struct ClippedPool {
  std::vector<std::vector<std::vector<std::byte>>> values;
  std::vector<UpdateView> views;
  std::vector<bool> clipped;
  absl::Status status;
};
ClippedPool ClipPool(const ReductionSpec& spec, absl::Span<const GeneratedUpdate> pool) {
  ClippedPool out;
  out.values.resize(pool.size());
  for (size_t u = 0; u < pool.size() && out.status.ok(); ++u) {
    UpdateView view = pool[u].view();
    std::vector<absl::Span<std::byte>> writable;
    for (FieldValue& field : view.fields) {
      out.values[u].emplace_back(field.values.begin(), field.values.end());
      field.values = absl::MakeConstSpan(out.values[u].back());
      writable.push_back(absl::MakeSpan(out.values[u].back()));
    }
    absl::StatusOr<bool> clipped = ClipUpdate(spec, view, writable);
    out.status = clipped.status();
    out.clipped.push_back(clipped.ok() && *clipped);
    view.clipped = out.clipped.back();
    out.views.push_back(std::move(view));
  }
  return out;
}

void CheckNoise(const ReferenceField& expected, const ReportedField& actual, double divisor, double sigma,
                FieldCheck& check) {
  const size_t n = expected.values.size();
  double sum = 0, squares = 0;
  const size_t elements = actual.value.bytes.size() / DTypeSize(actual.value.dtype);
  for (size_t i = 0; i < n && i < elements; ++i) {
    const double noise = actual.value.ValueAsDouble(i) * divisor - expected.values[i];
    sum += noise;
    squares += noise * noise;
  }
  const double count = static_cast<double>(std::max<size_t>(n, 1));
  check.measured_noise_stddev = std::sqrt(squares / count);
  check.reported_noise_stddev = sigma;
  check.max_relative_error = std::fabs(check.measured_noise_stddev / sigma - 1);
  check.tolerance = 6 * std::sqrt(0.5 / count);
  check.passed = n == elements && std::fabs(sum / count) <= 6 * sigma / std::sqrt(count) &&
                 check.max_relative_error <= check.tolerance;
}

}  // namespace

CheckReport CheckResult(const ReductionSpec& spec, absl::Span<const GeneratedUpdate> pool,
                        absl::Span<const int64_t> counted_per_update, const AggregateResult& result) {
  CheckReport report;
  report.expected_contributions = std::accumulate(counted_per_update.begin(), counted_per_update.end(), int64_t{0});
  report.contributions = result.contributions;
  const std::optional<PrivacySpec>& privacy = spec.options().privacy;
  ClippedPool clipped;
  std::vector<UpdateView> views;
  if (privacy.has_value()) {
    clipped = ClipPool(spec, pool);
    views = clipped.views;
  } else {
    for (const GeneratedUpdate& update : pool) views.push_back(update.view());
  }
  std::vector<ReferenceField> expected = ReferenceReduce(spec, views, counted_per_update);
  report.passed = report.contributions == report.expected_contributions && result.fields.size() == expected.size();
  if (privacy.has_value()) {
    int64_t expected_clipped = 0;
    for (size_t u = 0; u < clipped.clipped.size(); ++u) expected_clipped += clipped.clipped[u] ? counted_per_update[u] : 0;
    report.passed = report.passed && clipped.status.ok() && result.privacy.has_value() &&
                    result.privacy->clipped_updates == expected_clipped;
  }
  for (size_t f = 0; f < spec.fields().size() && f < result.fields.size(); ++f) {
    const FieldSpec& field = spec.fields()[f];
    FieldCheck check;
    check.path = field.path;
    const double divisor = field.private_mean ? privacy->expected_clients : 1.0;
    if (privacy.has_value() && result.privacy.has_value() && result.privacy->noise_stddev > 0) {
      CheckNoise(expected[f], result.fields[f], divisor, result.privacy->noise_stddev, check);
    } else {
      AggregateResult one;
      one.fields.push_back(result.fields[f]);
      if (divisor != 1.0) {  // a private mean without noise: its sum divided by the expected clients
        for (double& value : expected[f].values) value /= divisor;
      }
      check.max_relative_error = MaxRelativeError({expected[f]}, one);
      check.tolerance = Tolerance(field, report.expected_contributions);
    }
    check.passed = check.passed || (check.measured_noise_stddev < 0 && check.max_relative_error <= check.tolerance);
    report.passed = report.passed && check.passed;
    report.fields.push_back(std::move(check));
  }
  return report;
}

}  // namespace fedagg::loadgen
