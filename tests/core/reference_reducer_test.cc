// The float64 reference: the sparse family against sums worked out by hand (an update
// repeating an index adds both values and counts once); and with multiplicities, counting
// an update m times must give what repeating it m times gives, for every intrinsic (the
// load generator's check relies on it).
#include "service/core/reference_reducer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using testing::MakeSpec;
using testing::Update;
using testing::Values;

// Two distinct updates of a struct with a dense field (intrinsic `dense`) and a sparse
// field of shape [4, 2] (intrinsic `sparse`, COO or row-sparse by its encoding).
std::vector<Update> TwoUpdates(Encoding sparse_encoding) {
  std::vector<Update> updates;
  for (int u = 0; u < 2; ++u) {
    Update update;
    update.Dense(Values<float>({1.0 + u, -2.5, 0.25 * u}));
    if (sparse_encoding == Encoding::kRowSparse) {
      update.RowSparse<float>({u, 3}, Values<float>({1, 2, 3.5 + u, 4}));
    } else {
      update.Sparse<float>({u, 5, 7}, Values<float>({1.5, -1.0 * u, 2}));
    }
    update.Weight(1.5 + u);
    updates.push_back(std::move(update));
  }
  return updates;
}

void ExpectSameReference(const std::vector<ReferenceField>& a, const std::vector<ReferenceField>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t f = 0; f < a.size(); ++f) {
    EXPECT_EQ(a[f].indices, b[f].indices);
    EXPECT_EQ(a[f].counts, b[f].counts);
    ASSERT_EQ(a[f].values.size(), b[f].values.size());
    for (size_t i = 0; i < a[f].values.size(); ++i) EXPECT_DOUBLE_EQ(a[f].values[i], b[f].values[i]) << "field " << f;
  }
}

// Update 0 (weight 1) holds index 2 twice and comes unsorted; update 1 (weight 3).
std::vector<Update> RepeatingUpdates() {
  std::vector<Update> updates(2);
  updates[0].Sparse<float>({2, 0, 2}, Values<float>({1, 2, 4})).Weight(1);
  updates[1].Sparse<float>({2, 3}, Values<float>({8, 16})).Weight(3);
  return updates;
}

ReferenceField ReduceOne(Intrinsic intrinsic, const std::vector<Update>& updates) {
  auto spec = testing::OneFieldSpec(DType::kFloat32, {4}, intrinsic, /*report_counts=*/true);
  return ReferenceReduce(*spec, testing::Views(updates)).at(0);
}

TEST(ReferenceReduceTest, SparseFamilyAgainstSumsWorkedOutByHand) {
  const std::vector<Update> updates = RepeatingUpdates();
  const ReferenceField sum = ReduceOne(Intrinsic::kSparseSum, updates);
  EXPECT_EQ(sum.values, (std::vector<double>{2, 0, 13, 16}));
  EXPECT_EQ(sum.counts, (std::vector<int64_t>{1, 0, 2, 1}));
  const ReferenceField union_sum = ReduceOne(Intrinsic::kSparseSumSparse, updates);
  EXPECT_EQ(union_sum.indices, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(union_sum.values, (std::vector<double>{2, 13, 16}));
  EXPECT_EQ(union_sum.counts, (std::vector<int64_t>{1, 2, 1}));
  EXPECT_EQ(ReduceOne(Intrinsic::kSparseMean, updates).values, (std::vector<double>{2, 0, 6.5, 16}));
  // Weighted: index 2 is (1 + 4) * 1 + 8 * 3 over weights 1 + 3.
  EXPECT_EQ(ReduceOne(Intrinsic::kSparseWeightedMean, updates).values, (std::vector<double>{2, 0, 7.25, 16}));
}

TEST(ReferenceReduceTest, MultiplicitiesEqualRepetitionForEveryIntrinsic) {
  const Intrinsic dense[] = {Intrinsic::kFederatedSum, Intrinsic::kFederatedMean, Intrinsic::kFederatedWeightedMean,
                             Intrinsic::kFederatedMax, Intrinsic::kFederatedMin};
  const Intrinsic sparse[] = {Intrinsic::kSparseSum,    Intrinsic::kSparseSumSparse, Intrinsic::kSparseMean,
                              Intrinsic::kSparseWeightedMean, Intrinsic::kRowSparseSum, Intrinsic::kRowSparseMean};
  for (Intrinsic d : dense) {
    for (Intrinsic s : sparse) {
      SCOPED_TRACE(std::string(IntrinsicName(d)) + " + " + std::string(IntrinsicName(s)));
      auto spec = MakeSpec(ValueType::Struct({{"d", ValueType::Tensor(DType::kFloat32, {3})},
                                              {"s", ValueType::Tensor(DType::kFloat32, {4, 2})}}),
                           {{d}, {s, /*report_counts=*/true}});
      const std::vector<Update> updates = TwoUpdates(spec->fields()[1].encoding);
      const std::vector<UpdateView> distinct = testing::Views(updates);
      const std::vector<int64_t> multiplicities = {3, 2};
      std::vector<UpdateView> repeated;
      for (size_t u = 0; u < distinct.size(); ++u) repeated.insert(repeated.end(), multiplicities[u], distinct[u]);
      ExpectSameReference(ReferenceReduce(*spec, repeated), ReferenceReduce(*spec, distinct, multiplicities));
      // A multiplicity of 0 leaves the update out.
      ExpectSameReference(ReferenceReduce(*spec, {distinct[1]}), ReferenceReduce(*spec, distinct, {0, 1}));
    }
  }
}

}  // namespace
}  // namespace fedagg
