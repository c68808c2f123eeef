// The float64 reference reduction used to check fedagg's real reductions.
#include "service/core/reference_reducer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "service/core/cpu_kernels.h"

namespace fedagg {
namespace {

double ElementAt(const FieldValue& value, size_t i) {
  return cpu::DispatchDType(value.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return cpu::Widen<double>(reinterpret_cast<const T*>(value.values.data())[i]);
  });
}

// `multiplicities[u]` (or 1, when empty) copies of updates[u].
ReferenceField ReduceField(const FieldSpec& field, size_t f, absl::Span<const UpdateView> updates,
                           absl::Span<const int64_t> multiplicities) {
  auto copies = [&](size_t u) { return multiplicities.empty() ? int64_t{1} : multiplicities[u]; };
  ReferenceField out;
  const int64_t n = field.type.num_elements();
  const Intrinsic intrinsic = field.intrinsic;
  if (field.encoding == Encoding::kDense) {
    const bool is_max = intrinsic == Intrinsic::kFederatedMax;
    const bool is_min = intrinsic == Intrinsic::kFederatedMin;
    out.values.assign(n, is_max   ? -std::numeric_limits<double>::infinity()
                         : is_min ? std::numeric_limits<double>::infinity()
                                  : 0.0);
    double total_weight = 0;
    for (size_t u = 0; u < updates.size(); ++u) {
      const UpdateView& update = updates[u];
      const double m = static_cast<double>(copies(u));
      if (m == 0) continue;
      const double w = m * (intrinsic == Intrinsic::kFederatedWeightedMean ? *update.weight : 1.0);
      total_weight += w;
      for (int64_t i = 0; i < n; ++i) {
        const double x = ElementAt(update.fields[f], i);
        double& acc = out.values[i];
        if (is_max) acc = (std::isnan(acc) || std::isnan(x)) ? NAN : std::max(acc, x);
        else if (is_min) acc = (std::isnan(acc) || std::isnan(x)) ? NAN : std::min(acc, x);
        else acc += w * x;
      }
    }
    if (intrinsic == Intrinsic::kFederatedMean || intrinsic == Intrinsic::kFederatedWeightedMean) {
      for (double& v : out.values) v /= total_weight;
    }
    return out;
  }
  const int64_t width = field.row_width;
  const bool weighted = intrinsic == Intrinsic::kSparseWeightedMean;
  std::map<int64_t, std::vector<double>> sums;  // row -> row_width sums
  std::map<int64_t, int64_t> counts;
  std::map<int64_t, double> weights;
  for (size_t u = 0; u < updates.size(); ++u) {
    const UpdateView& update = updates[u];
    const int64_t m = copies(u);
    if (m == 0) continue;
    const FieldValue& value = update.fields[f];
    const double w = (weighted ? *update.weight : 1.0) * static_cast<double>(m);
    std::set<int64_t> touched;
    for (size_t k = 0; k < value.indices.size(); ++k) {
      const int64_t row = value.indices[k];
      std::vector<double>& sum = sums[row];
      sum.resize(width, 0.0);
      for (int64_t e = 0; e < width; ++e) sum[e] += w * ElementAt(value, k * width + e);
      touched.insert(row);
    }
    for (int64_t row : touched) {
      counts[row] += m;
      weights[row] += w;
    }
  }
  if (intrinsic == Intrinsic::kSparseSumSparse) {
    for (const auto& [index, sum] : sums) {
      out.indices.push_back(index);
      out.values.push_back(sum[0]);
      out.counts.push_back(counts[index]);
    }
    return out;
  }
  const bool mean = intrinsic == Intrinsic::kSparseMean || intrinsic == Intrinsic::kRowSparseMean || weighted;
  out.values.assign(n, 0.0);
  out.counts.assign(field.rows, 0);
  for (const auto& [row, sum] : sums) {
    const double divisor = weighted ? weights[row] : static_cast<double>(counts[row]);
    for (int64_t e = 0; e < width; ++e) out.values[row * width + e] = mean ? sum[e] / divisor : sum[e];
    out.counts[row] = counts[row];
  }
  return out;
}

}  // namespace

std::vector<ReferenceField> ReferenceReduce(const ReductionSpec& spec,
                                            absl::Span<const UpdateView> updates) {
  return ReferenceReduce(spec, updates, {});
}

std::vector<ReferenceField> ReferenceReduce(const ReductionSpec& spec, absl::Span<const UpdateView> updates,
                                            absl::Span<const int64_t> multiplicities) {
  std::vector<ReferenceField> out;
  for (size_t f = 0; f < spec.fields().size(); ++f) {
    out.push_back(ReduceField(spec.fields()[f], f, updates, multiplicities));
  }
  return out;
}

double MaxRelativeError(const std::vector<ReferenceField>& expected, const AggregateResult& actual) {
  constexpr double kMismatch = std::numeric_limits<double>::infinity();
  if (expected.size() != actual.fields.size()) return kMismatch;
  double worst = 0;
  for (size_t f = 0; f < expected.size(); ++f) {
    const ReferenceField& want = expected[f];
    const ReportedField& got = actual.fields[f];
    const size_t n = got.value.bytes.size() / DTypeSize(got.value.dtype);
    if (n != want.values.size() || got.indices.size() != want.indices.size()) return kMismatch;
    if (got.indices != want.indices) return kMismatch;
    if (!got.counts.empty() && got.counts != want.counts) return kMismatch;
    for (size_t i = 0; i < n; ++i) {
      const double a = got.value.ValueAsDouble(i), e = want.values[i];
      if (std::isnan(e) || std::isnan(a)) {
        if (std::isnan(e) != std::isnan(a)) return kMismatch;
        continue;
      }
      if (std::isinf(e) || std::isinf(a)) {
        if (a != e) return kMismatch;
        continue;
      }
      worst = std::max(worst, std::abs(a - e) / std::max(1.0, std::abs(e)));
    }
  }
  return worst;
}

}  // namespace fedagg
