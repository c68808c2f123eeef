// The float64 reference reduction used to check fedagg's real reductions.
#include "service/core/reference_reducer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "service/core/cpu_kernels.h"
#include "service/core/encoded_values.h"
#include "service/core/rotation.h"

namespace fedagg {
namespace {

double ElementAt(const FieldValue& value, size_t i) {
  return cpu::DispatchDType(value.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return cpu::Widen<double>(reinterpret_cast<const T*>(value.values.data())[i]);
  });
}

// Every value of `value` (a dense field's elements, a sparse field's values in entry
// order) in float64: decoded, and rotated back per update, when the field is encoded (the
// nodes instead rotate a dense field's sum back, once).
std::vector<double> ValuesOf(const FieldSpec& field, const FieldValue& value) {
  const int64_t n = field.encoding == Encoding::kDense ? field.type.num_elements()
                                                       : static_cast<int64_t>(value.indices.size()) * field.row_width;
  std::vector<double> out(static_cast<size_t>(n));
  if (!field.value_encoding.encoded()) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = ElementAt(value, i);
    return out;
  }
  const EncodedValues encoded(field.value_encoding, value.values, n);
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = encoded.Decode(i);
  Unrotate(field.value_encoding, absl::MakeSpan(out));
  return out;
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
      const std::vector<double> values = ValuesOf(field, update.fields[f]);
      for (int64_t i = 0; i < n; ++i) {
        const double x = values[static_cast<size_t>(i)];
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
  // Every entry of every counted update, ordered by row, then update, then position: each
  // row's sums then add in the updates' order, as a reduction of them one by one would.
  struct Entry {
    int64_t row;
    size_t update;
    size_t k;
    bool operator<(const Entry& other) const {
      return std::tie(row, update, k) < std::tie(other.row, other.update, other.k);
    }
  };
  std::vector<Entry> entries;
  std::vector<std::vector<double>> values(updates.size());  // per counted update
  for (size_t u = 0; u < updates.size(); ++u) {
    if (copies(u) == 0) continue;
    values[u] = ValuesOf(field, updates[u].fields[f]);
    const absl::Span<const int64_t> indices = updates[u].fields[f].indices;
    for (size_t k = 0; k < indices.size(); ++k) entries.push_back(Entry{indices[k], u, k});
  }
  std::sort(entries.begin(), entries.end());
  auto weight_of = [&](size_t u) {
    return (weighted ? *updates[u].weight : 1.0) * static_cast<double>(copies(u));
  };
  std::vector<int64_t> rows;     // the rows any counted update holds, ascending
  std::vector<double> sums;      // row_width sums per row
  std::vector<int64_t> counts;   // per row: the updates holding it, each once
  std::vector<double> weights;   // per row: their weights' sum
  for (size_t i = 0; i < entries.size();) {
    const int64_t row = entries[i].row;
    rows.push_back(row);
    sums.resize(sums.size() + static_cast<size_t>(width), 0.0);
    counts.push_back(0);
    weights.push_back(0);
    double* sum = sums.data() + sums.size() - static_cast<size_t>(width);
    size_t counted_update = updates.size();  // the last update counted for this row: none yet
    for (; i < entries.size() && entries[i].row == row; ++i) {
      const Entry& entry = entries[i];
      const double w = weight_of(entry.update);
      for (int64_t e = 0; e < width; ++e) sum[e] += w * values[entry.update][entry.k * static_cast<size_t>(width) + static_cast<size_t>(e)];
      if (entry.update != counted_update) {  // an update repeating the row counts once
        counts.back() += copies(entry.update);
        weights.back() += w;
        counted_update = entry.update;
      }
    }
  }
  if (intrinsic == Intrinsic::kSparseSumSparse) {  // one element per index
    out.indices = std::move(rows);
    out.values = std::move(sums);
    out.counts = std::move(counts);
    return out;
  }
  const bool mean = intrinsic == Intrinsic::kSparseMean || intrinsic == Intrinsic::kRowSparseMean || weighted;
  out.values.assign(n, 0.0);
  out.counts.assign(field.rows, 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    const double divisor = weighted ? weights[r] : static_cast<double>(counts[r]);
    for (int64_t e = 0; e < width; ++e) {
      const double sum = sums[r * static_cast<size_t>(width) + static_cast<size_t>(e)];
      out.values[rows[r] * width + e] = mean ? sum / divisor : sum;
    }
    out.counts[rows[r]] = counts[r];
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
