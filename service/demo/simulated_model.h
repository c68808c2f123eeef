// The demo's simulated model: a small network's update — two dense layers reduced with
// federated_weighted_mean, a row-sparse embedding table (row_sparse_mean) and sparse token
// counts (sparse_sum_sparse) — and random client updates for it.
#ifndef FEDAGG_SERVICE_DEMO_SIMULATED_MODEL_H_
#define FEDAGG_SERVICE_DEMO_SIMULATED_MODEL_H_

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "service/core/aggregate_result.h"
#include "service/core/field_value.h"
#include "service/core/reference_reducer.h"
#include "service/core/value_type.h"
#include "service/core/reduction_spec.h"
#include "service/core/value_encoding.h"

namespace fedagg::demo {

inline ValueType SimulatedModelType() {
  return ValueType::Struct({{"dense", ValueType::Tensor(DType::kFloat32, {256, 64})},
                            {"bias", ValueType::Tensor(DType::kFloat32, {64})},
                            {"embedding", ValueType::Tensor(DType::kFloat32, {10000, 32})},
                            {"token_counts", ValueType::Tensor(DType::kInt64, {50000})}});
}

inline std::vector<FieldIntrinsic> SimulatedModelIntrinsics() {
  return {{Intrinsic::kFederatedWeightedMean},
          {Intrinsic::kFederatedWeightedMean},
          {Intrinsic::kRowSparseMean, /*report_counts=*/true},
          {Intrinsic::kSparseSumSparse, /*report_counts=*/true}};
}

// One client's update, owning the memory the UpdateView points into.
struct SimulatedUpdate {
  std::vector<float> dense, bias, embedding_rows;
  std::vector<int64_t> embedding_ids, token_ids, token_counts;
  double weight = 1;

  UpdateView View() const {
    return UpdateView{{FieldValue::Dense<float>(dense), FieldValue::Dense<float>(bias),
                       FieldValue::RowSparse<float>(embedding_ids, embedding_rows),
                       FieldValue::Sparse<int64_t>(token_ids, token_counts)},
                      weight};
  }
};

inline SimulatedUpdate MakeUpdate(std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::uniform_int_distribution<int64_t> row(0, 9999), token(0, 49999), count(1, 5);
  SimulatedUpdate u;
  u.dense.resize(256 * 64);
  for (float& x : u.dense) x = normal(rng);
  u.bias.resize(64);
  for (float& x : u.bias) x = normal(rng);
  for (int i = 0; i < 40; ++i) u.embedding_ids.push_back(row(rng));
  u.embedding_rows.resize(u.embedding_ids.size() * 32);
  for (float& x : u.embedding_rows) x = normal(rng);
  for (int i = 0; i < 200; ++i) {
    u.token_ids.push_back(token(rng));
    u.token_counts.push_back(count(rng));
  }
  u.weight = std::uniform_real_distribution<double>(1, 100)(rng);  // examples seen
  return u;
}

// Prints every field of `result`, checks it against the float64 reference over
// `updates`, and returns the process exit code: 0 when it matches, 2 otherwise.
inline int PrintAndCheck(const ReductionSpec& spec, const std::vector<SimulatedUpdate>& updates,
                         const AggregateResult& result) {
  for (const ReportedField& field : result.fields) {
    const size_t n = field.value.bytes.size() / DTypeSize(field.value.dtype);
    std::printf("  %-13s %-24s %zu values%s, first: %.6g\n", field.path.c_str(),
                std::string(IntrinsicName(field.intrinsic)).c_str(), n,
                field.indices.empty() ? "" : absl::StrCat(" at ", field.indices.size(), " sorted indices").c_str(),
                n ? field.value.ValueAsDouble(0) : 0.0);
  }
  std::vector<UpdateView> views;
  for (const SimulatedUpdate& u : updates) views.push_back(u.View());
  const double error = MaxRelativeError(ReferenceReduce(spec, views), result);
  const double tolerance = 1e-4;  // float32 accumulation against the float64 reference
  std::printf("check against the float64 reference: max relative error %.3g (tolerance %.0e): %s\n",
              error, tolerance, error <= tolerance ? "OK" : "MISMATCH");
  return error <= tolerance ? 0 : 2;
}

// The quantized round's check: each dense layer's weighted mean against the plain float64
// reference over the same updates. Stochastic rounding errs by at most one level a
// coordinate, with variance at most level^2 / 4 (level: 2 s / (2^b - 1), s the block's
// largest |x|), independently across clients, so the mean's root-mean-square error is at
// most sqrt(mean over coordinates of sum_u w_u^2 level_u^2 / 4) / sum_u w_u; the check
// allows twice that. Prints the error beside the bound; returns the exit code.
inline int CheckQuantized(const ReductionSpec& plain_spec, const std::vector<SimulatedUpdate>& updates,
                          const AggregateResult& result, const ValueEncoding& encoding) {
  std::vector<UpdateView> views;
  for (const SimulatedUpdate& u : updates) views.push_back(u.View());
  const std::vector<ReferenceField> reference = ReferenceReduce(plain_spec, views);
  bool ok = true;
  for (size_t f : {size_t{0}, size_t{1}}) {
    const auto values_of = [&](const SimulatedUpdate& u) -> const std::vector<float>& { return f == 0 ? u.dense : u.bias; };
    const size_t n = values_of(updates[0]).size();
    double weight_sum = 0, variance = 0;  // variance: sum over coordinates of sum_u w_u^2 level_u^2 / 4
    for (const SimulatedUpdate& u : updates) {
      weight_sum += u.weight;
      const std::vector<float>& x = values_of(u);
      for (size_t begin = 0; begin < n; begin += static_cast<size_t>(encoding.block_size)) {
        const size_t end = std::min(n, begin + static_cast<size_t>(encoding.block_size));
        double s = 0;
        for (size_t i = begin; i < end; ++i) s = std::max(s, std::abs(static_cast<double>(x[i])));
        const double level = 2 * s / encoding.MaxCode();
        variance += static_cast<double>(end - begin) * u.weight * u.weight * level * level / 4;
      }
    }
    const double bound = std::sqrt(variance / static_cast<double>(n)) / weight_sum;
    double squared = 0;
    for (size_t i = 0; i < n; ++i) {
      const double e = result.fields[f].value.ValueAsDouble(i) - reference[f].values[i];
      squared += e * e;
    }
    const double rms = std::sqrt(squared / static_cast<double>(n));
    std::printf("  %-13s rms error against the plain reference %.3g (bound %.3g, allowed %.3g): %s\n",
                result.fields[f].path.c_str(), rms, bound, 2 * bound, rms <= 2 * bound ? "OK" : "TOO LARGE");
    ok &= rms <= 2 * bound;
  }
  return ok ? 0 : 2;
}

}  // namespace fedagg::demo

#endif  // FEDAGG_SERVICE_DEMO_SIMULATED_MODEL_H_
