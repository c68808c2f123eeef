// The demo's simulated model: a small network's update — two dense layers reduced with
// federated_weighted_mean, a row-sparse embedding table (row_sparse_mean) and sparse token
// counts (sparse_sum_sparse) — and random client updates for it.
#ifndef FEDAGG_SERVICE_DEMO_SIMULATED_MODEL_H_
#define FEDAGG_SERVICE_DEMO_SIMULATED_MODEL_H_

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

}  // namespace fedagg::demo

#endif  // FEDAGG_SERVICE_DEMO_SIMULATED_MODEL_H_
