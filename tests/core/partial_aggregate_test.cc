// Tests of PartialAggregate: Accumulate / AccumulateBatch / MergeWith / Report for every
// intrinsic and dtype against hand-computed values, the documented semantics (duplicate
// indices, untouched coordinates, NaN in extremes, exact integer sums, widening, float64
// accumulation), and every rejection, each leaving the aggregate exactly as it was.
#include "service/core/partial_aggregate.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/core/cpu_kernels.h"
#include "service/core/field_report.h"
#include "service/core/reference_reducer.h"
#include "service/core/thread_pool.h"
#include "service/core/update_validator.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::AsDoubles;
using ::fedagg::testing::FromDouble;
using ::fedagg::testing::IsOk;
using ::fedagg::testing::MakeSpec;
using ::fedagg::testing::T;
using ::fedagg::testing::OneFieldSpec;
using ::fedagg::testing::SameTensor;
using ::fedagg::testing::Snapshot;
using ::fedagg::testing::StatusIs;
using ::fedagg::testing::TakeSnapshot;
using ::fedagg::testing::Unchanged;
using ::fedagg::testing::Update;
using ::fedagg::testing::ValueOrDie;
using ::fedagg::testing::Values;
using ::fedagg::testing::Views;


AggregateResult Reported(const PartialAggregate& partial) { return ValueOrDie(partial.Report()); }

// Dtype of a sum / extreme of `in`, and of a mean of `in` (weighted or not).
DType SumDType(DType in) {
  if (IsInteger(in)) return DType::kInt64;
  return in == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
}
DType MeanDType(DType in) { return IsInteger(in) ? DType::kFloat64 : SumDType(in); }

void ExpectValues(const ReportedField& field, DType dtype, const std::vector<int64_t>& shape,
                  const std::vector<double>& values) {
  EXPECT_EQ(DTypeName(field.value.dtype), DTypeName(dtype));
  EXPECT_EQ(field.value.shape, shape);
  EXPECT_EQ(AsDoubles(field.value), values);
}

// ---- Every intrinsic, every dtype, hand-computed -------------------------------------

struct TypeNames {
  template <typename T>
  static std::string GetName(int) {
    return std::string(DTypeName(DTypeOf<T>::value));
  }
};

template <typename T>
class IntrinsicByDTypeTest : public ::testing::Test {
 protected:
  static constexpr DType kDType = DTypeOf<T>::value;
};
using AllTypes = ::testing::Types<float, double, int32_t, int64_t, Float16, BFloat16>;
TYPED_TEST_SUITE(IntrinsicByDTypeTest, AllTypes, TypeNames);

TYPED_TEST(IntrinsicByDTypeTest, FederatedSum) {
  using V = TypeParam;
  PartialAggregate partial(OneFieldSpec(this->kDType, {2, 2}, Intrinsic::kFederatedSum));
  std::vector<Update> updates(3);
  updates[0].Dense(Values<V>({1, 2, 3, 4}));
  updates[1].Dense(Values<V>({10, -20, 30, -40}));
  updates[2].Dense(Values<V>({-1, 0, 2, 8}));
  ASSERT_TRUE(IsOk(partial.Accumulate(updates[0].view())));
  const std::vector<UpdateView> rest = {updates[1].view(), updates[2].view()};
  ASSERT_TRUE(IsOk(partial.AccumulateBatch(rest)));
  const AggregateResult result = Reported(partial);
  EXPECT_EQ(result.contributions, 3);
  EXPECT_EQ(result.weight_sum, 3.0);  // unweighted updates weigh 1 each
  ASSERT_EQ(result.fields.size(), 1u);
  EXPECT_EQ(result.fields[0].path, "value");
  EXPECT_EQ(result.fields[0].intrinsic, Intrinsic::kFederatedSum);
  EXPECT_TRUE(result.fields[0].indices.empty());
  EXPECT_TRUE(result.fields[0].counts.empty());
  ExpectValues(result.fields[0], SumDType(this->kDType), {2, 2}, {10, -18, 35, -28});
}

// Nine updates in one batch: the kernel's four-at-a-time path and its remainder.
TYPED_TEST(IntrinsicByDTypeTest, FederatedSumLargeBatch) {
  using V = TypeParam;
  PartialAggregate partial(OneFieldSpec(this->kDType, {3}, Intrinsic::kFederatedSum));
  std::vector<Update> updates(9);
  for (int i = 0; i < 9; ++i) updates[i].Dense(Values<V>({1.0 * i, -2.0 * i, 1}));
  ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
  ExpectValues(Reported(partial).fields[0], SumDType(this->kDType), {3}, {36, -72, 9});
}

TYPED_TEST(IntrinsicByDTypeTest, FederatedMean) {
  using V = TypeParam;
  PartialAggregate partial(OneFieldSpec(this->kDType, {4}, Intrinsic::kFederatedMean));
  std::vector<Update> updates(4);
  updates[0].Dense(Values<V>({1, 2, 3, 4}));
  updates[1].Dense(Values<V>({3, -2, 5, 0}));
  updates[2].Dense(Values<V>({-4, 6, 1, 2}));
  updates[3].Dense(Values<V>({8, 2, -1, 11}));
  ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
  EXPECT_EQ(partial.contributions(), 4);
  ExpectValues(Reported(partial).fields[0], MeanDType(this->kDType), {4}, {2, 2, 2, 4.25});
}

TYPED_TEST(IntrinsicByDTypeTest, FederatedWeightedMean) {
  using V = TypeParam;
  PartialAggregate partial(OneFieldSpec(this->kDType, {2}, Intrinsic::kFederatedWeightedMean));
  Update a, b;
  a.Dense(Values<V>({2, 6})).Weight(0.5);
  b.Dense(Values<V>({4, -2})).Weight(1.5);
  ASSERT_TRUE(IsOk(partial.Accumulate(a.view())));
  ASSERT_TRUE(IsOk(partial.Accumulate(b.view())));
  const AggregateResult result = Reported(partial);
  EXPECT_EQ(result.contributions, 2);
  EXPECT_EQ(result.weight_sum, 2.0);
  // (0.5 * 2 + 1.5 * 4) / 2 and (0.5 * 6 - 1.5 * 2) / 2.
  ExpectValues(result.fields[0], MeanDType(this->kDType), {2}, {3.5, 0});
}

TYPED_TEST(IntrinsicByDTypeTest, FederatedMaxAndMin) {
  using V = TypeParam;
  for (Intrinsic intrinsic : {Intrinsic::kFederatedMax, Intrinsic::kFederatedMin}) {
    SCOPED_TRACE(IntrinsicName(intrinsic));
    PartialAggregate partial(OneFieldSpec(this->kDType, {3}, intrinsic));
    std::vector<Update> updates(3);
    updates[0].Dense(Values<V>({1, -5, 7}));
    updates[1].Dense(Values<V>({3, -9, 7}));
    updates[2].Dense(Values<V>({-2, 0, 6}));
    ASSERT_TRUE(IsOk(partial.Accumulate(updates[0].view())));
    // A single update is its own extreme.
    ExpectValues(Reported(partial).fields[0], SumDType(this->kDType), {3}, {1, -5, 7});
    const std::vector<UpdateView> rest = {updates[1].view(), updates[2].view()};
    ASSERT_TRUE(IsOk(partial.AccumulateBatch(rest)));
    ExpectValues(Reported(partial).fields[0], SumDType(this->kDType), {3},
                 intrinsic == Intrinsic::kFederatedMax ? std::vector<double>{3, 0, 7}
                                                       : std::vector<double>{-2, -9, 6});
  }
}

// The sparse family shares these updates of a [6] field:
//   u0: {0: 1, 3: 2}   u1: {3: 4, 5: -1, 3: 2} (index 3 twice)   u2: nothing
std::vector<Update> SparseUpdates(DType dtype) {
  std::vector<Update> updates(3);
  cpu::DispatchDType(dtype, [&](auto tag) {
    using V = typename decltype(tag)::type;
    updates[0].Sparse<V>({0, 3}, Values<V>({1, 2}));
    updates[1].Sparse<V>({3, 5, 3}, Values<V>({4, -1, 2}));
    updates[2].Sparse<V>({}, {});
  });
  return updates;
}

TYPED_TEST(IntrinsicByDTypeTest, SparseSum) {
  for (bool counts : {false, true}) {
    SCOPED_TRACE(counts);
    PartialAggregate partial(OneFieldSpec(this->kDType, {6}, Intrinsic::kSparseSum, counts));
    const std::vector<Update> updates = SparseUpdates(this->kDType);
    ASSERT_TRUE(IsOk(partial.Accumulate(updates[0].view())));
    const std::vector<UpdateView> rest = {updates[1].view(), updates[2].view()};
    ASSERT_TRUE(IsOk(partial.AccumulateBatch(rest)));
    const AggregateResult result = Reported(partial);
    EXPECT_EQ(result.contributions, 3);
    ExpectValues(result.fields[0], SumDType(this->kDType), {6}, {1, 0, 0, 8, 0, -1});
    EXPECT_TRUE(result.fields[0].indices.empty());
    EXPECT_EQ(result.fields[0].counts,
              (counts ? std::vector<int64_t>{1, 0, 0, 2, 0, 1} : std::vector<int64_t>{}));
  }
}

TYPED_TEST(IntrinsicByDTypeTest, SparseSumSparse) {
  for (bool counts : {false, true}) {
    SCOPED_TRACE(counts);
    PartialAggregate partial(OneFieldSpec(this->kDType, {6}, Intrinsic::kSparseSumSparse, counts));
    const std::vector<Update> updates = SparseUpdates(this->kDType);
    ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
    const AggregateResult result = Reported(partial);
    EXPECT_EQ(result.contributions, 3);
    ExpectValues(result.fields[0], SumDType(this->kDType), {3}, {1, 8, -1});
    EXPECT_EQ(result.fields[0].indices, (std::vector<int64_t>{0, 3, 5}));
    EXPECT_EQ(result.fields[0].counts, (counts ? std::vector<int64_t>{1, 2, 1} : std::vector<int64_t>{}));
  }
}

TYPED_TEST(IntrinsicByDTypeTest, SparseSumSparseNothingTouched) {
  PartialAggregate partial(OneFieldSpec(this->kDType, {6}, Intrinsic::kSparseSumSparse, true));
  const std::vector<Update> updates = SparseUpdates(this->kDType);
  ASSERT_TRUE(IsOk(partial.Accumulate(updates[2].view())));
  const AggregateResult result = Reported(partial);
  EXPECT_EQ(result.contributions, 1);
  ExpectValues(result.fields[0], SumDType(this->kDType), {0}, {});
  EXPECT_TRUE(result.fields[0].indices.empty());
  EXPECT_TRUE(result.fields[0].counts.empty());
}

TYPED_TEST(IntrinsicByDTypeTest, SparseMean) {
  for (bool counts : {false, true}) {
    SCOPED_TRACE(counts);
    PartialAggregate partial(OneFieldSpec(this->kDType, {6}, Intrinsic::kSparseMean, counts));
    const std::vector<Update> updates = SparseUpdates(this->kDType);
    for (const Update& u : updates) ASSERT_TRUE(IsOk(partial.Accumulate(u.view())));
    const AggregateResult result = Reported(partial);
    // Divided by the updates that touched each coordinate, not by the 3 contributions;
    // the duplicate index 3 of u1 counts u1 once: (2 + 4 + 2) / 2.
    ExpectValues(result.fields[0], MeanDType(this->kDType), {6}, {1, 0, 0, 4, 0, -1});
    EXPECT_EQ(result.fields[0].counts,
              (counts ? std::vector<int64_t>{1, 0, 0, 2, 0, 1} : std::vector<int64_t>{}));
  }
}

TYPED_TEST(IntrinsicByDTypeTest, SparseWeightedMean) {
  for (bool counts : {false, true}) {
    SCOPED_TRACE(counts);
    PartialAggregate partial(OneFieldSpec(this->kDType, {6}, Intrinsic::kSparseWeightedMean, counts));
    std::vector<Update> updates = SparseUpdates(this->kDType);
    updates[0].Weight(1);
    updates[1].Weight(3);
    updates[2].Weight(0.5);
    ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
    const AggregateResult result = Reported(partial);
    EXPECT_EQ(result.weight_sum, 4.5);
    // index 3: (1 * 2 + 3 * (4 + 2)) / (1 + 3); index 5: 3 * -1 / 3.
    ExpectValues(result.fields[0], MeanDType(this->kDType), {6}, {1, 0, 0, 5, 0, -1});
    EXPECT_EQ(result.fields[0].counts,
              (counts ? std::vector<int64_t>{1, 0, 0, 2, 0, 1} : std::vector<int64_t>{}));
  }
}

// Row-sparse updates of a [4, 2] table:
//   u0: row 1 = (1, 2), row 3 = (3, 4)   u1: row 1 = (5, 6), row 1 = (-1, 0)   u2: nothing
std::vector<Update> RowUpdates(DType dtype) {
  std::vector<Update> updates(3);
  cpu::DispatchDType(dtype, [&](auto tag) {
    using V = typename decltype(tag)::type;
    updates[0].RowSparse<V>({1, 3}, Values<V>({1, 2, 3, 4}));
    updates[1].RowSparse<V>({1, 1}, Values<V>({5, 6, -1, 0}));
    updates[2].RowSparse<V>({}, {});
  });
  return updates;
}

TYPED_TEST(IntrinsicByDTypeTest, RowSparseSum) {
  for (bool counts : {false, true}) {
    SCOPED_TRACE(counts);
    PartialAggregate partial(OneFieldSpec(this->kDType, {4, 2}, Intrinsic::kRowSparseSum, counts));
    const std::vector<Update> updates = RowUpdates(this->kDType);
    ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
    const AggregateResult result = Reported(partial);
    ExpectValues(result.fields[0], SumDType(this->kDType), {4, 2}, {0, 0, 5, 8, 0, 0, 3, 4});
    EXPECT_EQ(result.fields[0].counts, (counts ? std::vector<int64_t>{0, 2, 0, 1} : std::vector<int64_t>{}));
  }
}

TYPED_TEST(IntrinsicByDTypeTest, RowSparseMean) {
  for (bool counts : {false, true}) {
    SCOPED_TRACE(counts);
    PartialAggregate partial(OneFieldSpec(this->kDType, {4, 2}, Intrinsic::kRowSparseMean, counts));
    const std::vector<Update> updates = RowUpdates(this->kDType);
    for (const Update& u : updates) ASSERT_TRUE(IsOk(partial.Accumulate(u.view())));
    const AggregateResult result = Reported(partial);
    ExpectValues(result.fields[0], MeanDType(this->kDType), {4, 2}, {0, 0, 2.5, 4, 0, 0, 3, 4});
    EXPECT_EQ(result.fields[0].counts, (counts ? std::vector<int64_t>{0, 2, 0, 1} : std::vector<int64_t>{}));
  }
}

// ---- A struct of fields with different intrinsics -------------------------------------

std::shared_ptr<const ReductionSpec> MixedSpec() {
  return MakeSpec(ValueType::Struct({{"dense", T(DType::kFloat32, {2})},
                                     {"wm", T(DType::kFloat64, {2})},
                                     {"emb", ValueType::Struct({{"table", T(DType::kBFloat16, {3, 2})}})},
                                     {"ids", T(DType::kInt64, {5})},
                                     {"mx", T(DType::kInt32, {2})},
                                     {"sw", T(DType::kFloat16, {4})}}),
                  {{Intrinsic::kFederatedSum},
                   {Intrinsic::kFederatedWeightedMean},
                   {Intrinsic::kRowSparseMean},
                   {Intrinsic::kSparseSumSparse, true},
                   {Intrinsic::kFederatedMax},
                   {Intrinsic::kSparseWeightedMean, true}});
}

std::vector<Update> MixedUpdates() {
  std::vector<Update> updates(2);
  updates[0]
      .Dense(Values<float>({1, 2}))
      .Dense(Values<double>({2, 4}))
      .RowSparse<BFloat16>({0}, Values<BFloat16>({1, 1}))
      .Sparse<int64_t>({4, 1}, {7, 1})
      .Dense(std::vector<int32_t>{1, -1})
      .Sparse<Float16>({2}, Values<Float16>({4}))
      .Weight(1);
  updates[1]
      .Dense(Values<float>({3, 4}))
      .Dense(Values<double>({6, 0}))
      .RowSparse<BFloat16>({0, 2}, Values<BFloat16>({3, 5, 2, 2}))
      .Sparse<int64_t>({4}, {1})
      .Dense(std::vector<int32_t>{0, 5})
      .Sparse<Float16>({2, 3}, Values<Float16>({8, 1}))
      .Weight(3);
  return updates;
}

void ExpectMixedResult(const AggregateResult& result) {
  EXPECT_EQ(result.contributions, 2);
  EXPECT_EQ(result.weight_sum, 4.0);
  ASSERT_EQ(result.fields.size(), 6u);
  EXPECT_EQ(result.fields[0].path, "dense");
  EXPECT_EQ(result.fields[0].intrinsic, Intrinsic::kFederatedSum);
  ExpectValues(result.fields[0], DType::kFloat32, {2}, {4, 6});  // the weight does not apply
  EXPECT_EQ(result.fields[1].path, "wm");
  ExpectValues(result.fields[1], DType::kFloat64, {2}, {5, 1});  // (2 + 3 * 6) / 4, (4 + 0) / 4
  EXPECT_EQ(result.fields[2].path, "emb.table");
  ExpectValues(result.fields[2], DType::kFloat32, {3, 2}, {2, 3, 0, 0, 2, 2});
  EXPECT_TRUE(result.fields[2].counts.empty());
  EXPECT_EQ(result.fields[3].path, "ids");
  ExpectValues(result.fields[3], DType::kInt64, {2}, {1, 8});
  EXPECT_EQ(result.fields[3].indices, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(result.fields[3].counts, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(result.fields[4].path, "mx");
  ExpectValues(result.fields[4], DType::kInt64, {2}, {1, 5});
  EXPECT_EQ(result.fields[5].path, "sw");
  EXPECT_EQ(result.fields[5].intrinsic, Intrinsic::kSparseWeightedMean);
  ExpectValues(result.fields[5], DType::kFloat32, {4}, {0, 0, 7, 1});  // (4 + 3 * 8) / 4, 3 / 3
  EXPECT_EQ(result.fields[5].counts, (std::vector<int64_t>{0, 0, 2, 1}));
}

TEST(PartialAggregateTest, StructOfMixedIntrinsics) {
  const std::vector<Update> updates = MixedUpdates();
  PartialAggregate one_by_one(MixedSpec());
  for (const Update& u : updates) ASSERT_TRUE(IsOk(one_by_one.Accumulate(u.view())));
  ExpectMixedResult(Reported(one_by_one));

  PartialAggregate batched(MixedSpec());
  ASSERT_TRUE(IsOk(batched.AccumulateBatch(Views(updates))));
  ExpectMixedResult(Reported(batched));

  PartialAggregate left(MixedSpec()), right(MixedSpec());
  ASSERT_TRUE(IsOk(left.Accumulate(updates[0].view())));
  ASSERT_TRUE(IsOk(right.Accumulate(updates[1].view())));
  ASSERT_TRUE(IsOk(left.MergeWith(right)));
  ExpectMixedResult(Reported(left));
  EXPECT_EQ(right.contributions(), 1);  // the source of a merge is left alone
}

// Released accumulators: no memory, every use refused with FAILED_PRECONDITION, and the
// counts kept.
TEST(PartialAggregateTest, ReleasedAccumulatorsHoldNothingAndRefuseEveryUse) {
  const std::vector<Update> updates = MixedUpdates();
  PartialAggregate released(MixedSpec()), other(MixedSpec());
  ASSERT_TRUE(IsOk(released.AccumulateBatch(Views(updates))));
  ASSERT_TRUE(IsOk(other.Accumulate(updates[0].view())));
  EXPECT_GT(released.MemoryBytes(), 0u);
  released.ReleaseAccumulators();
  EXPECT_TRUE(released.released());
  EXPECT_EQ(released.MemoryBytes(), 0u);
  EXPECT_EQ(released.contributions(), static_cast<int64_t>(updates.size()));
  const absl::StatusCode refused = absl::StatusCode::kFailedPrecondition;
  EXPECT_TRUE(StatusIs(released.Accumulate(updates[0].view()), refused, "released"));
  EXPECT_TRUE(StatusIs(released.MergeWith(other), refused, "released"));
  EXPECT_TRUE(StatusIs(other.MergeWith(released), refused, "released"));
  EXPECT_TRUE(StatusIs(released.Serialize(), refused, "released"));
  EXPECT_TRUE(StatusIs(released.Report(), refused, "released"));
  EXPECT_EQ(other.contributions(), 1);
}

// In a weighted spec only the weighted intrinsics use the weight: federated_mean still
// divides by the number of contributions, sparse_mean by the per-coordinate count.
TEST(PartialAggregateTest, UnweightedMeansIgnoreTheWeightOfAWeightedSpec) {
  const auto spec = MakeSpec(ValueType::Struct({{"m", T(DType::kFloat32, {1})},
                                                {"s", T(DType::kFloat32, {2})},
                                                {"w", T(DType::kFloat32, {1})}}),
                             {{Intrinsic::kFederatedMean}, {Intrinsic::kSparseMean}, {Intrinsic::kFederatedWeightedMean}});
  std::vector<Update> updates(2);
  updates[0].Dense(Values<float>({2})).Sparse<float>({1}, Values<float>({2})).Dense(Values<float>({2})).Weight(1);
  updates[1].Dense(Values<float>({6})).Sparse<float>({1}, Values<float>({6})).Dense(Values<float>({6})).Weight(3);
  PartialAggregate partial(spec);
  ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
  const AggregateResult result = Reported(partial);
  EXPECT_EQ(AsDoubles(result.fields[0].value), (std::vector<double>{4}));     // (2 + 6) / 2
  EXPECT_EQ(AsDoubles(result.fields[1].value), (std::vector<double>{0, 4}));  // (2 + 6) / 2
  EXPECT_EQ(AsDoubles(result.fields[2].value), (std::vector<double>{5}));     // (2 + 18) / 4
  EXPECT_EQ(result.weight_sum, 4.0);
}

// ---- Documented semantics -----------------------------------------------------------

TEST(PartialAggregateTest, DuplicateIndicesSumAndCountTheUpdateOnce) {
  for (Intrinsic intrinsic : {Intrinsic::kSparseMean, Intrinsic::kSparseSum, Intrinsic::kSparseSumSparse,
                              Intrinsic::kSparseWeightedMean}) {
    for (bool batched : {false, true}) {
      SCOPED_TRACE(absl::StrCat(IntrinsicName(intrinsic), batched ? " batched" : ""));
      const bool weighted = IsWeighted(intrinsic);
      PartialAggregate partial(OneFieldSpec(DType::kFloat32, {4}, intrinsic, /*report_counts=*/true));
      std::vector<Update> updates(2);
      updates[0].Sparse<float>({2, 2, 2}, Values<float>({1, 2, 3}));
      updates[1].Sparse<float>({2, 0}, Values<float>({4, 1}));
      if (weighted) {
        updates[0].Weight(1);
        updates[1].Weight(1);
      }
      if (batched) {
        ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
      } else {
        for (const Update& u : updates) ASSERT_TRUE(IsOk(partial.Accumulate(u.view())));
      }
      const ReportedField field = Reported(partial).fields[0];
      if (intrinsic == Intrinsic::kSparseSumSparse) {
        EXPECT_EQ(field.indices, (std::vector<int64_t>{0, 2}));
        EXPECT_EQ(AsDoubles(field.value), (std::vector<double>{1, 10}));
        EXPECT_EQ(field.counts, (std::vector<int64_t>{1, 2}));
      } else {
        const double at2 = intrinsic == Intrinsic::kSparseSum ? 10 : 5;  // (1+2+3+4) / 2 updates
        EXPECT_EQ(AsDoubles(field.value), (std::vector<double>{1, 0, at2, 0}));
        EXPECT_EQ(field.counts, (std::vector<int64_t>{1, 0, 2, 0}));
      }
    }
  }
}

TEST(PartialAggregateTest, DuplicateRowIdsCountTheUpdateOnce) {
  PartialAggregate partial(OneFieldSpec(DType::kFloat64, {3, 2}, Intrinsic::kRowSparseMean, true));
  Update u;
  u.RowSparse<double>({2, 2, 2, 2}, Values<double>({1, 1, 1, 1, 1, 1, 1, 1}));
  ASSERT_TRUE(IsOk(partial.Accumulate(u.view())));
  const ReportedField field = Reported(partial).fields[0];
  EXPECT_EQ(AsDoubles(field.value), (std::vector<double>{0, 0, 0, 0, 4, 4}));
  EXPECT_EQ(field.counts, (std::vector<int64_t>{0, 0, 1}));
}

TEST(PartialAggregateTest, UntouchedCoordinatesHaveMeanZeroAndCountZero) {
  for (Intrinsic intrinsic : {Intrinsic::kSparseMean, Intrinsic::kSparseWeightedMean, Intrinsic::kRowSparseMean}) {
    SCOPED_TRACE(IntrinsicName(intrinsic));
    PartialAggregate partial(OneFieldSpec(DType::kFloat32, {5}, intrinsic, true));
    Update u;
    if (EncodingOf(intrinsic) == Encoding::kSparse) {
      u.Sparse<float>({1}, Values<float>({-3}));
    } else {
      u.RowSparse<float>({1}, Values<float>({-3}));
    }
    if (IsWeighted(intrinsic)) u.Weight(2);
    Update nothing;
    if (EncodingOf(intrinsic) == Encoding::kSparse) {
      nothing.Sparse<float>({}, {});
    } else {
      nothing.RowSparse<float>({}, {});
    }
    if (IsWeighted(intrinsic)) nothing.Weight(7);
    ASSERT_TRUE(IsOk(partial.Accumulate(u.view())));
    ASSERT_TRUE(IsOk(partial.Accumulate(nothing.view())));
    const ReportedField field = Reported(partial).fields[0];
    const std::vector<double> values = AsDoubles(field.value);
    EXPECT_EQ(values, (std::vector<double>{0, -3, 0, 0, 0}));
    for (double v : values) EXPECT_FALSE(std::isnan(v));
    EXPECT_EQ(field.counts, (std::vector<int64_t>{0, 1, 0, 0, 0}));
  }
}

TEST(PartialAggregateTest, NanPropagatesThroughMaxAndMin) {
  for (DType dtype : ::fedagg::testing::kFloatDTypes) {
    for (Intrinsic intrinsic : {Intrinsic::kFederatedMax, Intrinsic::kFederatedMin}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " ", IntrinsicName(intrinsic)));
      // Coordinate 0: NaN first; 1: NaN last; 2: NaN in the middle; 3: never NaN.
      std::vector<Update> updates(3);
      cpu::DispatchDType(dtype, [&](auto tag) {
        using V = typename decltype(tag)::type;
        updates[0].Dense(Values<V>({NAN, 1, 5, -INFINITY}));
        updates[1].Dense(Values<V>({2, 3, NAN, 4}));
        updates[2].Dense(Values<V>({7, NAN, -1, INFINITY}));
      });
      const auto spec = OneFieldSpec(dtype, {4}, intrinsic);
      const double extreme = intrinsic == Intrinsic::kFederatedMax ? INFINITY : -INFINITY;
      auto check = [&](const PartialAggregate& partial) {
        const std::vector<double> v = AsDoubles(Reported(partial).fields[0].value);
        EXPECT_TRUE(std::isnan(v[0]));
        EXPECT_TRUE(std::isnan(v[1]));
        EXPECT_TRUE(std::isnan(v[2]));
        EXPECT_EQ(v[3], extreme);
      };
      PartialAggregate batched(spec);
      ASSERT_TRUE(IsOk(batched.AccumulateBatch(Views(updates))));
      check(batched);
      PartialAggregate one_by_one(spec);
      for (const Update& u : updates) ASSERT_TRUE(IsOk(one_by_one.Accumulate(u.view())));
      check(one_by_one);
      // And through a merge in either direction.
      PartialAggregate a(spec), b(spec);
      ASSERT_TRUE(IsOk(a.Accumulate(updates[0].view())));
      const std::vector<UpdateView> rest = {updates[1].view(), updates[2].view()};
      ASSERT_TRUE(IsOk(b.AccumulateBatch(rest)));
      PartialAggregate b_copy = ValueOrDie(PartialAggregate::Deserialize(spec, b.Serialize().value()));
      ASSERT_TRUE(IsOk(a.MergeWith(b)));
      check(a);
      PartialAggregate a_only(spec);
      ASSERT_TRUE(IsOk(a_only.Accumulate(updates[0].view())));
      ASSERT_TRUE(IsOk(b_copy.MergeWith(a_only)));
      check(b_copy);
    }
  }
}

TEST(PartialAggregateTest, NonFiniteValuesAcceptedWhenNotRequiredFinite) {
  PartialAggregate partial(OneFieldSpec(DType::kFloat32, {3}, Intrinsic::kFederatedSum));
  Update u;
  u.Dense(Values<float>({NAN, INFINITY, 1}));
  ASSERT_TRUE(IsOk(partial.Accumulate(u.view())));
  const std::vector<double> v = AsDoubles(Reported(partial).fields[0].value);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], INFINITY);
  EXPECT_EQ(v[2], 1);
}

TEST(PartialAggregateTest, IntegerSumsAreExactInInt64) {
  {
    // 2^60 + 2 has no float64 representation.
    PartialAggregate partial(OneFieldSpec(DType::kInt64, {2}, Intrinsic::kFederatedSum));
    Update a, b;
    a.Dense(std::vector<int64_t>{(int64_t{1} << 60) + 1, -(int64_t{1} << 62)});
    b.Dense(std::vector<int64_t>{1, -3});
    ASSERT_TRUE(IsOk(partial.Accumulate(a.view())));
    ASSERT_TRUE(IsOk(partial.Accumulate(b.view())));
    const Tensor value = Reported(partial).fields[0].value;
    ASSERT_EQ(value.dtype, DType::kInt64);
    EXPECT_EQ(value.values<int64_t>()[0], (int64_t{1} << 60) + 2);
    EXPECT_EQ(value.values<int64_t>()[1], -(int64_t{1} << 62) - 3);
  }
  {
    // int32 inputs whose sum overflows int32.
    PartialAggregate partial(OneFieldSpec(DType::kInt32, {2}, Intrinsic::kSparseSum));
    std::vector<Update> updates(3);
    for (Update& u : updates) {
      u.Sparse<int32_t>({0, 1}, {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()});
    }
    ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
    const Tensor value = Reported(partial).fields[0].value;
    ASSERT_EQ(value.dtype, DType::kInt64);
    EXPECT_EQ(value.values<int64_t>()[0], 3 * int64_t{std::numeric_limits<int32_t>::max()});
    EXPECT_EQ(value.values<int64_t>()[1], 3 * int64_t{std::numeric_limits<int32_t>::min()});
  }
  {
    // sparse_sum_sparse and row_sparse_sum of int64 stay exact too.
    PartialAggregate sparse(OneFieldSpec(DType::kInt64, {4}, Intrinsic::kSparseSumSparse));
    PartialAggregate rows(OneFieldSpec(DType::kInt64, {2, 1}, Intrinsic::kRowSparseSum));
    Update a, b, c, d;
    a.Sparse<int64_t>({3}, {(int64_t{1} << 60) + 1});
    b.Sparse<int64_t>({3}, {1});
    c.RowSparse<int64_t>({1}, {(int64_t{1} << 60) + 1});
    d.RowSparse<int64_t>({1}, {1});
    ASSERT_TRUE(IsOk(sparse.Accumulate(a.view())));
    ASSERT_TRUE(IsOk(sparse.Accumulate(b.view())));
    ASSERT_TRUE(IsOk(rows.Accumulate(c.view())));
    ASSERT_TRUE(IsOk(rows.Accumulate(d.view())));
    EXPECT_EQ(Reported(sparse).fields[0].value.values<int64_t>()[0], (int64_t{1} << 60) + 2);
    EXPECT_EQ(Reported(rows).fields[0].value.values<int64_t>()[1], (int64_t{1} << 60) + 2);
  }
}

TEST(PartialAggregateTest, Int64SumsWrapModulo2To64) {
  // Documented in cpu_kernels.h: defined wrap-around rather than undefined overflow.
  PartialAggregate partial(OneFieldSpec(DType::kInt64, {1}, Intrinsic::kFederatedSum));
  Update a, b;
  a.Dense(std::vector<int64_t>{std::numeric_limits<int64_t>::max()});
  b.Dense(std::vector<int64_t>{1});
  ASSERT_TRUE(IsOk(partial.Accumulate(a.view())));
  ASSERT_TRUE(IsOk(partial.Accumulate(b.view())));
  EXPECT_EQ(Reported(partial).fields[0].value.values<int64_t>()[0], std::numeric_limits<int64_t>::min());
}

TEST(PartialAggregateTest, IntegerMeansReportFloat64) {
  for (Intrinsic intrinsic : {Intrinsic::kFederatedMean, Intrinsic::kFederatedWeightedMean}) {
    SCOPED_TRACE(IntrinsicName(intrinsic));
    PartialAggregate partial(OneFieldSpec(DType::kInt32, {1}, intrinsic));
    Update a, b;
    a.Dense(std::vector<int32_t>{1});
    b.Dense(std::vector<int32_t>{2});
    if (IsWeighted(intrinsic)) {
      a.Weight(1);
      b.Weight(1);
    }
    ASSERT_TRUE(IsOk(partial.Accumulate(a.view())));
    ASSERT_TRUE(IsOk(partial.Accumulate(b.view())));
    const Tensor value = Reported(partial).fields[0].value;
    ASSERT_EQ(value.dtype, DType::kFloat64);
    EXPECT_EQ(value.values<double>()[0], 1.5);
  }
  // A mean of huge int64 values: the sum 2^63 - 2 still fits, and is divided once in float64.
  PartialAggregate partial(OneFieldSpec(DType::kInt64, {1}, Intrinsic::kFederatedMean));
  Update a, b;
  a.Dense(std::vector<int64_t>{(int64_t{1} << 62) - 2});
  b.Dense(std::vector<int64_t>{int64_t{1} << 62});
  ASSERT_TRUE(IsOk(partial.Accumulate(a.view())));
  ASSERT_TRUE(IsOk(partial.Accumulate(b.view())));
  EXPECT_EQ(Reported(partial).fields[0].value.values<double>()[0], std::ldexp(1.0, 62));
}

TEST(PartialAggregateTest, HalfFloatsAreWidenedToFloat32) {
  {
    // 65504 + 65504 overflows float16 but not float32.
    PartialAggregate partial(OneFieldSpec(DType::kFloat16, {2}, Intrinsic::kFederatedSum));
    Update a, b;
    a.Dense(std::vector<Float16>{Float16{0x7bff}, FromDouble<Float16>(2048)});
    b.Dense(std::vector<Float16>{Float16{0x7bff}, FromDouble<Float16>(1)});
    ASSERT_TRUE(IsOk(partial.Accumulate(a.view())));
    ASSERT_TRUE(IsOk(partial.Accumulate(b.view())));
    const Tensor value = Reported(partial).fields[0].value;
    ASSERT_EQ(value.dtype, DType::kFloat32);
    EXPECT_EQ(value.values<float>()[0], 131008.0f);
    EXPECT_EQ(value.values<float>()[1], 2049.0f);  // not representable in float16
  }
  {
    // 256 + 1 = 257 is not representable in bfloat16.
    PartialAggregate partial(OneFieldSpec(DType::kBFloat16, {1}, Intrinsic::kSparseSumSparse));
    Update a, b;
    a.Sparse<BFloat16>({0}, Values<BFloat16>({256}));
    b.Sparse<BFloat16>({0}, Values<BFloat16>({1}));
    ASSERT_TRUE(IsOk(partial.Accumulate(a.view())));
    ASSERT_TRUE(IsOk(partial.Accumulate(b.view())));
    const Tensor value = Reported(partial).fields[0].value;
    ASSERT_EQ(value.dtype, DType::kFloat32);
    EXPECT_EQ(value.values<float>()[0], 257.0f);
  }
  {
    // Subnormal float16 inputs widen exactly: 3 * 2^-24.
    PartialAggregate partial(OneFieldSpec(DType::kFloat16, {1}, Intrinsic::kFederatedSum));
    Update a, b;
    a.Dense(std::vector<Float16>{Float16{0x0001}});
    b.Dense(std::vector<Float16>{Float16{0x0002}});
    ASSERT_TRUE(IsOk(partial.Accumulate(a.view())));
    ASSERT_TRUE(IsOk(partial.Accumulate(b.view())));
    EXPECT_EQ(Reported(partial).fields[0].value.values<float>()[0], 3 * 0x1p-24f);
  }
}

TEST(PartialAggregateTest, Float64AccumulationGivesFloat64Results) {
  // 2^24 + 1 is lost in float32 and kept in float64.
  for (Intrinsic intrinsic : {Intrinsic::kFederatedSum, Intrinsic::kSparseSum, Intrinsic::kSparseSumSparse,
                              Intrinsic::kRowSparseSum}) {
    for (bool f64 : {false, true}) {
      SCOPED_TRACE(absl::StrCat(IntrinsicName(intrinsic), " f64=", f64));
      ReductionOptions options;
      options.float64_accumulation = f64;
      PartialAggregate partial(OneFieldSpec(DType::kFloat32, {1}, intrinsic, false, options));
      Update a, b;
      if (EncodingOf(intrinsic) == Encoding::kDense) {
        a.Dense(Values<float>({16777216}));
        b.Dense(Values<float>({1}));
      } else if (EncodingOf(intrinsic) == Encoding::kSparse) {
        a.Sparse<float>({0}, Values<float>({16777216}));
        b.Sparse<float>({0}, Values<float>({1}));
      } else {
        a.RowSparse<float>({0}, Values<float>({16777216}));
        b.RowSparse<float>({0}, Values<float>({1}));
      }
      ASSERT_TRUE(IsOk(partial.Accumulate(a.view())));
      ASSERT_TRUE(IsOk(partial.Accumulate(b.view())));
      const Tensor value = Reported(partial).fields[0].value;
      EXPECT_EQ(value.dtype, f64 ? DType::kFloat64 : DType::kFloat32);
      EXPECT_EQ(value.ValueAsDouble(0), f64 ? 16777217.0 : 16777216.0);
    }
  }
  // Transport dtypes follow the option too.
  ReductionOptions options;
  options.float64_accumulation = true;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    PartialAggregate partial(OneFieldSpec(dtype, {1}, Intrinsic::kFederatedMean, false, options));
    Update a;
    cpu::DispatchDType(dtype, [&](auto tag) {
      using V = typename decltype(tag)::type;
      a.Dense(Values<V>({0.5}));
    });
    ASSERT_TRUE(IsOk(partial.Accumulate(a.view())));
    const Tensor value = Reported(partial).fields[0].value;
    EXPECT_EQ(value.dtype, DType::kFloat64);
    EXPECT_EQ(value.values<double>()[0], 0.5);
  }
}

// Weighted means are right over the whole weight range the validator accepts: any finite
// weight > 0 for float64-accumulated fields, [kMinFloat32Weight, kMaxFloat32Weight] for
// float32-accumulated ones, which refuse weights outside it and stay unchanged.
TEST(PartialAggregateTest, WeightedMeansOverTheAcceptedWeightRange) {
  ReductionOptions f64;
  f64.float64_accumulation = true;
  struct Case {
    DType dtype;
    ReductionOptions options;
    bool float32_accumulation;
  };
  for (const Case& c : {Case{DType::kFloat64, {}, false}, Case{DType::kInt32, {}, false},
                        Case{DType::kFloat32, f64, false}, Case{DType::kBFloat16, f64, false},
                        Case{DType::kFloat32, {}, true}, Case{DType::kBFloat16, {}, true},
                        Case{DType::kFloat16, {}, true}}) {
    for (Intrinsic intrinsic : {Intrinsic::kFederatedWeightedMean, Intrinsic::kSparseWeightedMean}) {
      for (double w : {1e39, 1e-50, kMinFloat32Weight, kMaxFloat32Weight}) {
        SCOPED_TRACE(absl::StrCat(DTypeName(c.dtype), c.options.float64_accumulation ? " f64" : "", " ",
                                  IntrinsicName(intrinsic), " weight ", w));
        PartialAggregate partial(OneFieldSpec(c.dtype, {1}, intrinsic, false, c.options));
        std::vector<Update> updates(2);
        cpu::DispatchDType(c.dtype, [&](auto tag) {
          using V = typename decltype(tag)::type;
          if (intrinsic == Intrinsic::kFederatedWeightedMean) {
            updates[0].Dense(Values<V>({1}));
            updates[1].Dense(Values<V>({7}));
          } else {
            updates[0].Sparse<V>({0}, Values<V>({1}));
            updates[1].Sparse<V>({0}, Values<V>({7}));
          }
        });
        updates[0].Weight(w);
        updates[1].Weight(w);
        const bool accepted = !c.float32_accumulation || (w >= kMinFloat32Weight && w <= kMaxFloat32Weight);
        const Snapshot before = TakeSnapshot(partial);
        const absl::Status status = partial.AccumulateBatch(Views(updates));
        if (!accepted) {
          EXPECT_TRUE(StatusIs(status, absl::StatusCode::kInvalidArgument,
                               "the range a float32-accumulated weighted field supports"));
          EXPECT_TRUE(Unchanged(partial, before));
          continue;
        }
        ASSERT_TRUE(IsOk(status));
        EXPECT_EQ(partial.weight_sum(), 2 * w);
        // (w * 1 + w * 7) / 2w = 4
        EXPECT_NEAR(Reported(partial).fields[0].value.ValueAsDouble(0), 4.0, 1e-6);
      }
    }
  }
}

TEST(PartialAggregateTest, WeightSumCountsOnePerUnweightedUpdate) {
  PartialAggregate partial(OneFieldSpec(DType::kFloat32, {1}, Intrinsic::kFederatedMean));
  std::vector<Update> updates(5);
  for (Update& u : updates) u.Dense(Values<float>({1}));
  ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
  EXPECT_EQ(partial.contributions(), 5);
  EXPECT_EQ(partial.weight_sum(), 5.0);
}

TEST(PartialAggregateTest, EmptyBatchIsANoOp) {
  PartialAggregate partial(OneFieldSpec(DType::kFloat32, {2}, Intrinsic::kFederatedSum));
  const Snapshot before = TakeSnapshot(partial);
  EXPECT_TRUE(IsOk(partial.AccumulateBatch({})));
  EXPECT_TRUE(Unchanged(partial, before));
  EXPECT_TRUE(StatusIs(partial.Report(), absl::StatusCode::kFailedPrecondition, "no contributions yet"));
}

TEST(PartialAggregateTest, ZeroSizedFields) {
  const auto spec = MakeSpec(ValueType::Struct({{"e", T(DType::kFloat32, {0})},
                                                {"r", T(DType::kFloat32, {3, 0})},
                                                {"m", T(DType::kFloat32, {0, 4})}}),
                             {{Intrinsic::kFederatedMean}, {Intrinsic::kRowSparseMean, true}, {Intrinsic::kSparseMean}});
  PartialAggregate partial(spec);
  Update u;
  u.Dense<float>({}).RowSparse<float>({0, 2}, {}).Sparse<float>({}, {});
  ASSERT_TRUE(IsOk(partial.Accumulate(u.view())));
  const AggregateResult result = Reported(partial);
  ASSERT_EQ(result.fields.size(), 3u);
  EXPECT_EQ(result.fields[0].value.shape, (std::vector<int64_t>{0}));
  EXPECT_TRUE(result.fields[0].value.bytes.empty());
  EXPECT_EQ(result.fields[1].value.shape, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(result.fields[1].counts, (std::vector<int64_t>{1, 0, 1}));
  EXPECT_TRUE(result.fields[2].value.bytes.empty());
}

// ---- Merging --------------------------------------------------------------------------

TEST(PartialAggregateTest, MergeEqualsFlatAggregation) {
  const auto spec = MixedSpec();
  const std::vector<Update> updates = MixedUpdates();
  PartialAggregate flat(spec);
  ASSERT_TRUE(IsOk(flat.AccumulateBatch(Views(updates))));
  // Merging into an empty aggregate, and merging an empty one in, change nothing.
  PartialAggregate empty(spec);
  PartialAggregate target(spec);
  ASSERT_TRUE(IsOk(target.MergeWith(flat)));
  ASSERT_TRUE(IsOk(target.MergeWith(empty)));
  EXPECT_EQ(target.Serialize().value(), flat.Serialize().value());
  ExpectMixedResult(Reported(target));
}

TEST(PartialAggregateTest, MergeAcceptsAnEqualSpecBuiltSeparately) {
  const auto spec_a = OneFieldSpec(DType::kInt32, {2}, Intrinsic::kFederatedMax);
  const auto spec_b = OneFieldSpec(DType::kInt32, {2}, Intrinsic::kFederatedMax);
  PartialAggregate a(spec_a), b(spec_b);
  Update x, y;
  x.Dense(std::vector<int32_t>{1, 9});
  y.Dense(std::vector<int32_t>{4, 2});
  ASSERT_TRUE(IsOk(a.Accumulate(x.view())));
  ASSERT_TRUE(IsOk(b.Accumulate(y.view())));
  ASSERT_TRUE(IsOk(a.MergeWith(b)));
  EXPECT_EQ(AsDoubles(Reported(a).fields[0].value), (std::vector<double>{4, 9}));
  EXPECT_EQ(a.contributions(), 2);
}

TEST(PartialAggregateTest, MergeRejectsDifferentSpecsAndChangesNothing) {
  const ValueType type = ValueType::Struct({{"w", T(DType::kFloat32, {4})}});
  const auto base = MakeSpec(type, {{Intrinsic::kSparseSum}});
  ReductionOptions finite;
  finite.require_finite = true;
  ReductionOptions f64;
  f64.float64_accumulation = true;
  const std::vector<std::shared_ptr<const ReductionSpec>> others = {
      MakeSpec(type, {{Intrinsic::kSparseMean}}),
      MakeSpec(type, {{Intrinsic::kSparseSum, true}}),
      MakeSpec(type, {{Intrinsic::kSparseSum}}, finite),
      MakeSpec(type, {{Intrinsic::kSparseSum}}, f64),
      MakeSpec(ValueType::Struct({{"w", T(DType::kFloat32, {5})}}), {{Intrinsic::kSparseSum}}),
      MakeSpec(ValueType::Struct({{"v", T(DType::kFloat32, {4})}}), {{Intrinsic::kSparseSum}}),
      MakeSpec(ValueType::Struct({{"w", T(DType::kFloat16, {4})}}), {{Intrinsic::kSparseSum}}),
  };
  PartialAggregate mine(base);
  Update u;
  u.Sparse<float>({1}, Values<float>({2}));
  ASSERT_TRUE(IsOk(mine.Accumulate(u.view())));
  for (size_t i = 0; i < others.size(); ++i) {
    SCOPED_TRACE(others[i]->canonical());
    PartialAggregate theirs(others[i]);
    const Snapshot mine_before = TakeSnapshot(mine);
    const Snapshot theirs_before = TakeSnapshot(theirs);
    EXPECT_TRUE(StatusIs(mine.MergeWith(theirs), absl::StatusCode::kFailedPrecondition,
                         "cannot merge partial aggregates of different specs"));
    EXPECT_TRUE(StatusIs(theirs.MergeWith(mine), absl::StatusCode::kFailedPrecondition,
                         others[i]->canonical()));
    EXPECT_TRUE(Unchanged(mine, mine_before));
    EXPECT_TRUE(Unchanged(theirs, theirs_before));
  }
}

// ---- Report ---------------------------------------------------------------------------

TEST(PartialAggregateTest, ReportWithZeroContributionsFails) {
  for (Intrinsic intrinsic : ::fedagg::testing::kAllIntrinsics) {
    SCOPED_TRACE(IntrinsicName(intrinsic));
    PartialAggregate partial(OneFieldSpec(DType::kFloat32, {3}, intrinsic));
    EXPECT_TRUE(StatusIs(partial.Report(), absl::StatusCode::kFailedPrecondition,
                         "no contributions yet: there is nothing to report"));
  }
}

TEST(PartialAggregateTest, ReportDoesNotChangeState) {
  PartialAggregate partial(MixedSpec());
  const std::vector<Update> updates = MixedUpdates();
  ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
  const Snapshot before = TakeSnapshot(partial);
  ExpectMixedResult(Reported(partial));
  ExpectMixedResult(Reported(partial));
  EXPECT_TRUE(Unchanged(partial, before));
}

TEST(PartialAggregateTest, MovedAggregateKeepsWorking) {
  PartialAggregate original(MixedSpec());
  const std::vector<Update> updates = MixedUpdates();
  ASSERT_TRUE(IsOk(original.Accumulate(updates[0].view())));
  PartialAggregate moved(std::move(original));
  ASSERT_TRUE(IsOk(moved.Accumulate(updates[1].view())));
  ExpectMixedResult(Reported(moved));
  PartialAggregate assigned(OneFieldSpec(DType::kFloat32, {1}, Intrinsic::kFederatedSum));
  assigned = std::move(moved);
  ExpectMixedResult(Reported(assigned));
}

// ---- Rejections change nothing --------------------------------------------------------

// <w=float32[2,2] federated_sum, ids=float32[6] sparse_mean (counts), emb=float32[4,2]
// row_sparse_mean>, optionally with weighted intrinsics instead and require_finite.
std::shared_ptr<const ReductionSpec> ErrorSpec(bool weighted, bool require_finite) {
  ReductionOptions options;
  options.require_finite = require_finite;
  return MakeSpec(ValueType::Struct({{"w", T(DType::kFloat32, {2, 2})},
                                     {"ids", T(DType::kFloat32, {6})},
                                     {"emb", T(DType::kFloat32, {4, 2})}}),
                  {{weighted ? Intrinsic::kFederatedWeightedMean : Intrinsic::kFederatedSum},
                   {weighted ? Intrinsic::kSparseWeightedMean : Intrinsic::kSparseMean, true},
                   {Intrinsic::kRowSparseMean, true}},
                  options);
}

Update GoodUpdate(bool weighted, float scale = 1) {
  Update u;
  u.Dense(Values<float>({1 * scale, 2, 3, 4}))
      .Sparse<float>({0, 5, 5}, Values<float>({1, 2 * scale, 3}))
      .RowSparse<float>({3, 0}, Values<float>({1, 2, 3 * scale, 4}));
  if (weighted) u.Weight(2 * scale);
  return u;
}

struct BadCase {
  std::string name;
  bool weighted;
  bool require_finite;
  std::function<Update()> make;
  std::string message;
};

std::vector<BadCase> BadCases() {
  const auto dense = [] { return Values<float>({1, 2, 3, 4}); };
  std::vector<BadCase> cases;
  cases.push_back({"wrong field count", false, false, [=] {
                     Update u;
                     u.Dense(dense()).Sparse<float>({}, {});
                     return u;
                   },
                   "update has 2 fields but type"});
  cases.push_back({"wrong encoding", false, false, [=] {
                     Update u;
                     u.Dense(dense()).Dense(std::vector<float>(6, 1.0f)).RowSparse<float>({}, {});
                     return u;
                   },
                   "field 'ids' (float32[6], sparse_mean): sent dense but sparse_mean takes sparse values"});
  cases.push_back({"wrong dtype", false, false, [=] {
                     Update u;
                     u.Dense(dense()).Sparse<float>({}, {}).RowSparse<double>({1}, Values<double>({1, 2}));
                     return u;
                   },
                   "field 'emb' (float32[4,2], row_sparse_mean): sent dtype float64, declared float32"});
  cases.push_back({"wrong size", false, false, [=] {
                     Update u;
                     u.Dense(Values<float>({1, 2, 3})).Sparse<float>({}, {}).RowSparse<float>({}, {});
                     return u;
                   },
                   "field 'w' (float32[2,2], federated_sum): expected 4 elements (16 bytes), got 12 bytes"});
  cases.push_back({"sparse index out of range", false, false, [=] {
                     Update u;
                     u.Dense(dense()).Sparse<float>({1, 6}, Values<float>({1, 2})).RowSparse<float>({}, {});
                     return u;
                   },
                   "field 'ids' (float32[6], sparse_mean): index 6 at position 1 is out of range [0, 6)"});
  cases.push_back({"negative sparse index", false, false, [=] {
                     Update u;
                     u.Dense(dense()).Sparse<float>({-1}, Values<float>({1})).RowSparse<float>({}, {});
                     return u;
                   },
                   "field 'ids' (float32[6], sparse_mean): index -1 at position 0 is out of range [0, 6)"});
  cases.push_back({"row id out of range", false, false, [=] {
                     Update u;
                     u.Dense(dense()).Sparse<float>({}, {}).RowSparse<float>({0, 4}, Values<float>({1, 2, 3, 4}));
                     return u;
                   },
                   "field 'emb' (float32[4,2], row_sparse_mean): row id 4 at position 1 is out of range [0, 4)"});
  cases.push_back({"negative row id", false, false, [=] {
                     Update u;
                     u.Dense(dense()).Sparse<float>({}, {}).RowSparse<float>({-2}, Values<float>({1, 2}));
                     return u;
                   },
                   "field 'emb' (float32[4,2], row_sparse_mean): row id -2 at position 0 is out of range [0, 4)"});
  cases.push_back({"sparse nnz mismatch", false, false, [=] {
                     Update u;
                     u.Dense(dense()).Sparse<float>({1, 2, 3}, Values<float>({1, 2})).RowSparse<float>({}, {});
                     return u;
                   },
                   "field 'ids' (float32[6], sparse_mean): 3 ind"});
  cases.push_back({"row nnz mismatch", false, false, [=] {
                     Update u;
                     u.Dense(dense()).Sparse<float>({}, {}).RowSparse<float>({1, 2}, Values<float>({1, 2}));
                     return u;
                   },
                   "field 'emb' (float32[4,2], row_sparse_mean): 2 row ids but 1 rows (8 bytes); send one row per row id"});
  cases.push_back({"NaN dense with require_finite", false, true, [=] {
                     Update u;
                     u.Dense(Values<float>({1, NAN, 3, 4})).Sparse<float>({}, {}).RowSparse<float>({}, {});
                     return u;
                   },
                   "field 'w' (float32[2,2], federated_sum): holds NaN or Inf"});
  cases.push_back({"Inf sparse with require_finite", false, true, [=] {
                     Update u;
                     u.Dense(dense()).Sparse<float>({2}, Values<float>({INFINITY})).RowSparse<float>({}, {});
                     return u;
                   },
                   "field 'ids' (float32[6], sparse_mean): holds NaN or Inf"});
  cases.push_back({"-Inf row with require_finite", false, true, [=] {
                     Update u;
                     u.Dense(dense()).Sparse<float>({}, {}).RowSparse<float>({1}, Values<float>({0, -INFINITY}));
                     return u;
                   },
                   "field 'emb' (float32[4,2], row_sparse_mean): holds NaN or Inf, and this aggregation "
                   "requires finite values"});
  cases.push_back({"missing weight", true, false, [=] {
                     Update u = GoodUpdate(false);
                     return u;
                   },
                   "this aggregation has a weighted field; send a weight with the update"});
  cases.push_back({"weight on unweighted spec", false, false, [=] {
                     Update u = GoodUpdate(false);
                     u.Weight(1);
                     return u;
                   },
                   "this aggregation has no weighted field; send the update without a weight"});
  for (double w : std::initializer_list<double>{-1.0, 0.0, std::nan(""), INFINITY, -INFINITY}) {
    cases.push_back({absl::StrCat("weight ", w), true, false, [=] {
                       Update u = GoodUpdate(false);
                       u.Weight(w);
                       return u;
                     },
                     absl::StrCat("weight ", w, " is invalid: it must be finite and greater than 0")});
  }
  return cases;
}

TEST(PartialAggregateTest, RejectedUpdateChangesNothing) {
  for (const BadCase& c : BadCases()) {
    SCOPED_TRACE(c.name);
    PartialAggregate partial(ErrorSpec(c.weighted, c.require_finite));
    // Some state first, so that a partial write would show.
    const Update good = GoodUpdate(c.weighted);
    ASSERT_TRUE(IsOk(partial.Accumulate(good.view())));
    const Snapshot before = TakeSnapshot(partial);
    const AggregateResult result_before = Reported(partial);
    const Update bad = c.make();
    EXPECT_TRUE(StatusIs(partial.Accumulate(bad.view()), absl::StatusCode::kInvalidArgument, c.message));
    EXPECT_TRUE(Unchanged(partial, before));
    const AggregateResult result_after = Reported(partial);
    for (size_t f = 0; f < result_before.fields.size(); ++f) {
      EXPECT_TRUE(SameTensor(result_before.fields[f].value, result_after.fields[f].value));
      EXPECT_EQ(result_before.fields[f].counts, result_after.fields[f].counts);
    }
  }
}

TEST(PartialAggregateTest, RejectedBatchAppliesNothing) {
  for (const BadCase& c : BadCases()) {
    SCOPED_TRACE(c.name);
    PartialAggregate partial(ErrorSpec(c.weighted, c.require_finite));
    const Update first = GoodUpdate(c.weighted);
    ASSERT_TRUE(IsOk(partial.Accumulate(first.view())));
    const Snapshot before = TakeSnapshot(partial);
    // Only the last of the batch is bad.
    std::vector<Update> batch;
    batch.push_back(GoodUpdate(c.weighted, 2));
    batch.push_back(GoodUpdate(c.weighted, 3));
    batch.push_back(GoodUpdate(c.weighted, 4));
    batch.push_back(c.make());
    EXPECT_TRUE(StatusIs(partial.AccumulateBatch(Views(batch)), absl::StatusCode::kInvalidArgument,
                         absl::StrCat("update 3 of the batch: ", c.message)));
    EXPECT_TRUE(Unchanged(partial, before));
    // And when the first is bad.
    std::vector<Update> bad_first;
    bad_first.push_back(c.make());
    bad_first.push_back(GoodUpdate(c.weighted, 2));
    EXPECT_TRUE(StatusIs(partial.AccumulateBatch(Views(bad_first)), absl::StatusCode::kInvalidArgument,
                         "update 0 of the batch: "));
    EXPECT_TRUE(Unchanged(partial, before));
  }
}

TEST(PartialAggregateTest, RejectionOnAFreshAggregateLeavesItEmpty) {
  PartialAggregate partial(ErrorSpec(false, true));
  Update bad;
  bad.Dense(Values<float>({NAN, 0, 0, 0})).Sparse<float>({}, {}).RowSparse<float>({}, {});
  EXPECT_TRUE(StatusIs(partial.Accumulate(bad.view()), absl::StatusCode::kInvalidArgument, "NaN"));
  EXPECT_EQ(partial.contributions(), 0);
  EXPECT_EQ(partial.weight_sum(), 0.0);
  EXPECT_TRUE(StatusIs(partial.Report(), absl::StatusCode::kFailedPrecondition, "no contributions yet"));
  EXPECT_EQ(partial.Serialize().value(), PartialAggregate(ErrorSpec(false, true)).Serialize().value());
}

TEST(PartialAggregateTest, SpecErrorsSurfaceAtCreation) {
  // report_counts on a dense intrinsic, and row-sparse on a scalar, never get as far as an aggregate.
  EXPECT_TRUE(StatusIs(ReductionSpec::Create(T(DType::kFloat32, {3}), {{Intrinsic::kFederatedMean, true}}),
                       absl::StatusCode::kInvalidArgument, "a dense intrinsic"));
  EXPECT_TRUE(StatusIs(ReductionSpec::Create(T(DType::kFloat32, {}), {{Intrinsic::kRowSparseSum}}),
                       absl::StatusCode::kInvalidArgument, "is a scalar"));
}

// ---- Threads ----------------------------------------------------------------------------

// The dense kernels split columns across threads; the result must not depend on it.
TEST(PartialAggregateTest, ResultIndependentOfThreadCount) {
  constexpr int64_t kElements = 200'003;  // several chunks of kMinElementsPerThread, uneven
  ReductionOptions options;
  const auto spec = MakeSpec(ValueType::Struct({{"s", T(DType::kFloat32, {kElements})},
                                                {"w", T(DType::kBFloat16, {kElements})},
                                                {"m", T(DType::kInt32, {kElements})}}),
                             {{Intrinsic::kFederatedSum}, {Intrinsic::kFederatedWeightedMean}, {Intrinsic::kFederatedMax}},
                             options);
  std::vector<Update> updates(7);
  for (int i = 0; i < 7; ++i) {
    std::vector<float> s(kElements);
    std::vector<BFloat16> w(kElements);
    std::vector<int32_t> m(kElements);
    for (int64_t j = 0; j < kElements; ++j) {
      s[j] = static_cast<float>(std::sin(0.001 * j * (i + 1)));
      w[j] = ToBFloat16(static_cast<float>(std::cos(0.003 * j + i)));
      m[j] = static_cast<int32_t>((j * 7919 + i * 104729) % 2001) - 1000;
    }
    updates[i].Dense(s).Dense(w).Dense(m).Weight(0.5 + i);
  }
  ThreadPool one_thread(1), four_threads(4);
  const CpuAccumulatorFactory one(one_thread), four(four_threads);
  PartialAggregate serial(spec, one), parallel(spec, four), parallel_default(spec);
  ASSERT_TRUE(IsOk(serial.AccumulateBatch(Views(updates))));
  ASSERT_TRUE(IsOk(parallel.AccumulateBatch(Views(updates))));
  ASSERT_TRUE(IsOk(parallel_default.AccumulateBatch(Views(updates))));
  EXPECT_EQ(serial.Serialize().value(), parallel.Serialize().value());
  EXPECT_EQ(serial.Serialize().value(), parallel_default.Serialize().value());
  // Merging uses the pool too.
  PartialAggregate merged_serial(spec, one), merged_parallel(spec, four);
  ASSERT_TRUE(IsOk(merged_serial.MergeWith(serial)));
  ASSERT_TRUE(IsOk(merged_serial.MergeWith(parallel)));
  ASSERT_TRUE(IsOk(merged_parallel.MergeWith(serial)));
  ASSERT_TRUE(IsOk(merged_parallel.MergeWith(parallel)));
  EXPECT_EQ(merged_serial.Serialize().value(), merged_parallel.Serialize().value());
  // And both are right.
  const std::vector<UpdateView> views = Views(updates);
  const std::vector<ReferenceField> expected = ReferenceReduce(*spec, views);
  EXPECT_LT(MaxRelativeError(expected, Reported(parallel)), 1e-5);
  const std::vector<double> maxima = AsDoubles(Reported(parallel).fields[2].value);
  EXPECT_EQ(maxima, expected[2].values);
}

// ReportHostBytes (what an aggregation makes room for before it reports) is at least what
// a report's result holds, for every kind of field, counts included.
TEST(PartialAggregateTest, ReportHostBytesBoundsTheResult) {
  auto spec = MakeSpec(ValueType::Struct({{"d", T(DType::kFloat32, {300})},
                                          {"s", T(DType::kInt32, {5000})},
                                          {"r", T(DType::kFloat16, {40, 8})},
                                          {"u", T(DType::kFloat64, {6000})}}),
                       {{Intrinsic::kFederatedMean},
                        {Intrinsic::kSparseSum, /*report_counts=*/true},
                        {Intrinsic::kRowSparseMean, /*report_counts=*/true},
                        {Intrinsic::kSparseSumSparse, /*report_counts=*/true}});
  auto filled = [](size_t n, auto x) { return std::vector<decltype(x)>(n, x); };
  std::vector<Update> updates(2);
  for (int u = 0; u < 2; ++u) {
    std::vector<int64_t> ids;
    for (int64_t i = u; i < 5000; i += 3) ids.push_back(i);
    updates[u].Dense(filled(300, 0.5f + static_cast<float>(u)));
    updates[u].Sparse(ids, filled(ids.size(), int32_t{2}));
    updates[u].RowSparse<Float16>({u, 7, 39}, filled(24, FromDouble<Float16>(1.5)));
    updates[u].Sparse(ids, filled(ids.size(), 0.25));
  }
  PartialAggregate partial(spec);
  ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
  const AggregateResult result = Reported(partial);
  uint64_t held = 0;
  for (const ReportedField& field : result.fields) {
    held += field.value.bytes.size() + (field.indices.size() + field.counts.size()) * sizeof(int64_t);
  }
  EXPECT_GT(held, 0u);
  EXPECT_LE(held, ReportHostBytes(*spec));
}

// ReportHostBytes counts a field's result, and the counts it reports: every backend makes
// dense and scatter results from its state without a host copy of it (each byte over
// makes a finalizing aggregation unmap, and with a device backend unpin, a cached update
// mapping the next round maps again); sparse_sum_sparse's device state is copied out.
TEST(PartialAggregateTest, ReportHostBytesCountsTheResult) {
  constexpr uint64_t kRows = 1000;
  const auto one = [](DType dtype, Intrinsic intrinsic, bool counts = false) {
    return ReportHostBytes(*MakeSpec(ValueType::Struct({{"f", T(dtype, {kRows})}}), {{intrinsic, counts}}));
  };
  EXPECT_EQ(one(DType::kFloat32, Intrinsic::kSparseSum), kRows * 4);
  EXPECT_EQ(one(DType::kFloat32, Intrinsic::kSparseMean), kRows * 4);
  EXPECT_EQ(one(DType::kFloat32, Intrinsic::kSparseWeightedMean), kRows * 4);
  EXPECT_EQ(one(DType::kFloat32, Intrinsic::kSparseSum, /*counts=*/true), kRows * (4 + 8));
  EXPECT_EQ(one(DType::kInt32, Intrinsic::kFederatedSum), kRows * 8);   // int64 sums
  EXPECT_EQ(one(DType::kInt32, Intrinsic::kFederatedMean), kRows * 8);  // float64 means
  EXPECT_EQ(one(DType::kFloat32, Intrinsic::kSparseSumSparse), kRows * (8 + 4 + 8) * 2);
}

}  // namespace
}  // namespace fedagg
