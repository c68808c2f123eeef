// Tests of deterministic aggregations (ReductionOptions::deterministic): every summing
// intrinsic reports the same bits whatever the order of the updates, their batches and
// the partials they went through (serialized, merged in any order); dense results are
// the correctly rounded sum divided once; non-finite values and overflowing weighted
// products are refused; the partial-aggregate format's version 2 and its checks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/core/cpu_kernels.h"
#include "service/core/exact_sums.h"
#include "service/core/partial_aggregate.h"
#include "service/core/update_validator.h"
#include "tests/core/core_test_util.h"
#include "tests/core/correctly_rounded_sum.h"

namespace fedagg {
namespace {

using ::fedagg::testing::FromDouble;
using ::fedagg::testing::IsOk;
using ::fedagg::testing::MakeSpec;
using ::fedagg::testing::T;
using ::fedagg::testing::ReferenceSum;
using ::fedagg::testing::SameTensor;
using ::fedagg::testing::StatusIs;
using ::fedagg::testing::Update;
using ::fedagg::testing::ValueOrDie;
using ::fedagg::testing::Views;


constexpr ReductionOptions kDeterministic{.deterministic = true};

// Every intrinsic that sums, in every accumulation precision, beside a max (exact anyway).
std::shared_ptr<const ReductionSpec> EverySummingField(ReductionOptions options = kDeterministic) {
  return MakeSpec(ValueType::Struct({{"sum", T(DType::kFloat32, {257})},
                                     {"mean", T(DType::kFloat16, {33})},
                                     {"weighted", T(DType::kFloat32, {65})},
                                     {"sum64", T(DType::kFloat64, {40})},
                                     {"int_weighted", T(DType::kInt32, {9})},
                                     {"coo", T(DType::kFloat32, {1000})},
                                     {"coo_mean", T(DType::kFloat64, {500})},
                                     {"coo_weighted", T(DType::kFloat32, {300})},
                                     {"rows", T(DType::kBFloat16, {50, 4})},
                                     {"rows_sum", T(DType::kFloat32, {30, 3})},
                                     {"union", T(DType::kFloat32, {100000})},
                                     {"max", T(DType::kFloat32, {10})},
                                     {"large", T(DType::kFloat32, {20000})},  // split over threads
                                     {"large_coo", T(DType::kFloat32, {50000})},
                                     {"large_rows", T(DType::kFloat64, {9000, 2})}}),
                  {{Intrinsic::kFederatedSum},
                   {Intrinsic::kFederatedMean},
                   {Intrinsic::kFederatedWeightedMean},
                   {Intrinsic::kFederatedSum},
                   {Intrinsic::kFederatedWeightedMean},
                   {Intrinsic::kSparseSum, true},
                   {Intrinsic::kSparseMean},
                   {Intrinsic::kSparseWeightedMean, true},
                   {Intrinsic::kRowSparseMean, true},
                   {Intrinsic::kRowSparseSum},
                   {Intrinsic::kSparseSumSparse, true},
                   {Intrinsic::kFederatedMax},
                   {Intrinsic::kFederatedMean},
                   {Intrinsic::kSparseWeightedMean, true},
                   {Intrinsic::kRowSparseMean, true}},
                  options);
}

// Values whose float sums depend on the order: random signs over 40 binades (20 for
// float16, whose largest value is 65504; 1 for a field named "narrow...", whose batches
// sum exactly in float64).
double RandomValue(const FieldSpec& field, std::mt19937_64& random) {
  std::uniform_real_distribution<double> mantissa(-1, 1);
  const int binades = field.path.starts_with("narrow") ? 1 : field.type.dtype == DType::kFloat16 ? 20 : 40;
  return std::ldexp(mantissa(random), static_cast<int>(random() % binades) - binades / 2);
}

Update RandomUpdate(const ReductionSpec& spec, std::mt19937_64& random) {
  Update update;
  for (const FieldSpec& field : spec.fields()) {
    cpu::DispatchDType(field.type.dtype, [&](auto tag) {
      using V = typename decltype(tag)::type;
      auto values = [&](int64_t n) {
        std::vector<V> out;
        for (int64_t i = 0; i < n; ++i) out.push_back(FromDouble<V>(IsInteger(field.type.dtype) ? static_cast<double>(random() % 2001) - 1000 : RandomValue(field, random)));
        return out;
      };
      auto indices = [&](int64_t n) {  // repeats included; ascending half of the time
        std::vector<int64_t> out;
        for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<int64_t>(random() % static_cast<uint64_t>(field.rows)));
        if (random() % 2 == 0) std::sort(out.begin(), out.end());
        return out;
      };
      const int64_t touched = 1 + static_cast<int64_t>(random() % (field.rows > 5000 ? 400 : 12));
      switch (field.encoding) {
        case Encoding::kDense: update.Dense(values(field.row_width)); break;
        case Encoding::kSparse: update.Sparse(indices(touched), values(touched)); break;
        case Encoding::kRowSparse: update.RowSparse(indices(touched), values(touched * field.row_width)); break;
      }
    });
  }
  if (spec.has_weighted_field()) update.Weight(std::ldexp(1 + static_cast<double>(random() % 1000) / 7, static_cast<int>(random() % 20) - 10));
  return update;
}

// Bit-for-bit equality of two reports (NaN never occurs: the values are finite).
void ExpectSameBits(const AggregateResult& x, const AggregateResult& y) {
  EXPECT_EQ(x.contributions, y.contributions);
  EXPECT_EQ(x.weight_sum, y.weight_sum);
  ASSERT_EQ(x.fields.size(), y.fields.size());
  for (size_t f = 0; f < x.fields.size(); ++f) {
    SCOPED_TRACE(x.fields[f].path);
    EXPECT_TRUE(SameTensor(x.fields[f].value, y.fields[f].value));
    EXPECT_EQ(x.fields[f].value.bytes, y.fields[f].value.bytes);
    EXPECT_EQ(x.fields[f].indices, y.fields[f].indices);
    EXPECT_EQ(x.fields[f].counts, y.fields[f].counts);
  }
}

// The updates reduced by a random tree: shuffled, cut among 1-4 partials, each fed in
// random batches, serialized and read back, then merged in a random order.
AggregateResult ReducedByARandomTree(std::shared_ptr<const ReductionSpec> spec, const std::vector<Update>& updates,
                                     std::mt19937_64& random) {
  std::vector<UpdateView> views = Views(updates);
  std::shuffle(views.begin(), views.end(), random);
  const size_t leaves = 1 + random() % 4;
  std::vector<std::vector<UpdateView>> parts(leaves);
  for (const UpdateView& view : views) parts[random() % leaves].push_back(view);
  std::vector<PartialAggregate> partials;
  for (const auto& part : parts) {
    PartialAggregate leaf(spec);
    for (size_t begin = 0; begin < part.size();) {
      const size_t size = std::min(part.size() - begin, static_cast<size_t>(1 + random() % 6));
      // Marked by validation as the service marks them (indices that ascend), or not.
      std::vector<UpdateView> batch(part.begin() + static_cast<std::ptrdiff_t>(begin),
                                    part.begin() + static_cast<std::ptrdiff_t>(begin + size));
      if (random() % 2 == 0) {
        for (UpdateView& view : batch) EXPECT_TRUE(IsOk(ValidateAndMarkUpdate(*spec, view)));
        EXPECT_TRUE(IsOk(leaf.AccumulateValidatedBatch(batch)));
      } else {
        EXPECT_TRUE(IsOk(leaf.AccumulateBatch(batch)));
      }
      begin += size;
    }
    partials.push_back(ValueOrDie(PartialAggregate::Deserialize(spec, ValueOrDie(leaf.Serialize()))));
  }
  std::shuffle(partials.begin(), partials.end(), random);
  PartialAggregate root(spec);
  for (const PartialAggregate& partial : partials) EXPECT_TRUE(IsOk(root.MergeWith(partial)));
  return ValueOrDie(root.Report());
}

// 40 random updates of `spec`, and their result reduced in order in one batch.
struct InOrder {
  std::vector<Update> updates;
  AggregateResult result;
};
InOrder ReducedInOrder(const std::shared_ptr<const ReductionSpec>& spec, std::mt19937_64& random) {
  InOrder out;
  for (int i = 0; i < 40; ++i) out.updates.push_back(RandomUpdate(*spec, random));
  PartialAggregate partial(spec);
  EXPECT_TRUE(IsOk(partial.AccumulateBatch(Views(out.updates))));
  out.result = ValueOrDie(partial.Report());
  return out;
}

TEST(DeterministicAggregateTest, EverySummingIntrinsicGivesTheSameBitsForAnyOrderAndTree) {
  const auto spec = EverySummingField();
  std::mt19937_64 random(11);
  const InOrder in_order = ReducedInOrder(spec, random);
  for (int trial = 0; trial < 6; ++trial) {
    SCOPED_TRACE(absl::StrCat("trial ", trial));
    ExpectSameBits(ReducedByARandomTree(spec, in_order.updates, random), in_order.result);
  }
}

TEST(DeterministicAggregateTest, WithoutTheOptionTheSameUpdatesGiveOrderDependentBits) {
  // What the test above guards against: float sums of these values differ by order.
  const auto spec = EverySummingField(ReductionOptions{});
  std::mt19937_64 random(11);
  const InOrder in_order = ReducedInOrder(spec, random);
  bool some_differ = false;
  for (int trial = 0; trial < 12 && !some_differ; ++trial) {
    const AggregateResult other = ReducedByARandomTree(spec, in_order.updates, random);
    for (size_t f = 0; f < in_order.result.fields.size(); ++f) {
      some_differ |= other.fields[f].value.bytes != in_order.result.fields[f].value.bytes;
    }
  }
  EXPECT_TRUE(some_differ);
}

TEST(DeterministicAggregateTest, DenseResultsAreTheCorrectlyRoundedSumDividedOnce) {
  const auto spec = MakeSpec(ValueType::Struct({{"sum", T(DType::kFloat32, {64})},
                                                {"mean", T(DType::kFloat32, {64})},
                                                {"weighted", T(DType::kFloat64, {64})},
                                                {"narrow_sum", T(DType::kFloat32, {64})},
                                                {"narrow_weighted", T(DType::kFloat32, {64})}}),
                             {{Intrinsic::kFederatedSum}, {Intrinsic::kFederatedMean}, {Intrinsic::kFederatedWeightedMean},
                              {Intrinsic::kFederatedSum}, {Intrinsic::kFederatedWeightedMean}},
                             kDeterministic);
  std::mt19937_64 random(5);
  std::vector<Update> updates;
  for (int i = 0; i < 25; ++i) updates.push_back(RandomUpdate(*spec, random));
  PartialAggregate partial(spec);
  ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
  const AggregateResult result = ValueOrDie(partial.Report());
  std::vector<double> weights;
  for (const Update& u : updates) weights.push_back(*u.view().weight);
  const double weight_sum = ReferenceSum(weights);
  EXPECT_EQ(result.weight_sum, weight_sum);
  // Fields 0, 1, 3 and 4 are float32 (3 and 4 of one binade: their batches pre-sum exactly
  // in float64), field 2 float64; fields 2 and 4 weighted.
  for (size_t f = 0; f < 5; ++f) {
    for (size_t i = 0; i < 64; ++i) {
      std::vector<double> contributions;
      for (const Update& u : updates) {
        const FieldValue& value = u.view().fields[f];
        const double x = f != 2 ? reinterpret_cast<const float*>(value.values.data())[i]
                                : reinterpret_cast<const double*>(value.values.data())[i];
        contributions.push_back(f == 2 || f == 4 ? *u.view().weight * x : x);
      }
      const double sum = ReferenceSum(contributions);
      const double expected = f == 1 ? static_cast<double>(static_cast<float>(sum / 25))
                            : f == 2 ? sum / weight_sum
                            : f == 4 ? static_cast<double>(static_cast<float>(sum / weight_sum))
                                     : static_cast<double>(static_cast<float>(sum));
      ASSERT_EQ(result.fields[f].value.ValueAsDouble(i), expected) << "field " << f << ", element " << i;
    }
  }
}

TEST(DeterministicAggregateTest, ProductsFinerThanTheFloat32GridRoundTheSameInAnyBatch) {
  // 2^-126 * 2^-24 = 2^-150, half of the float32 grid's step: each such product rounds to
  // 0 (ties to even) wherever it is added, also when two of them share a batch.
  const auto spec = MakeSpec(T(DType::kFloat32, {1}), {{Intrinsic::kFederatedWeightedMean}}, kDeterministic);
  Update a, b;
  a.Dense<float>({0x1p-126f}).Weight(0x1p-24);
  b.Dense<float>({0x1p-126f}).Weight(0x1p-24);
  PartialAggregate together(spec), apart(spec);
  const std::vector<UpdateView> both = {a.view(), b.view()};
  ASSERT_TRUE(IsOk(together.AccumulateBatch(both)));
  ASSERT_TRUE(IsOk(apart.Accumulate(a.view())));
  ASSERT_TRUE(IsOk(apart.Accumulate(b.view())));
  const AggregateResult x = ValueOrDie(together.Report()), y = ValueOrDie(apart.Report());
  ExpectSameBits(x, y);
  EXPECT_EQ(x.fields[0].value.ValueAsDouble(0), 0.0);
}

TEST(DeterministicAggregateTest, RefusesNonFiniteValuesAndOverflowingWeightedProducts) {
  const auto spec = MakeSpec(ValueType::Struct({{"x", T(DType::kFloat32, {2})}, {"m", T(DType::kFloat32, {1})}}),
                             {{Intrinsic::kFederatedSum}, {Intrinsic::kFederatedMax}}, kDeterministic);
  PartialAggregate partial(spec);
  Update nan;
  nan.Dense<float>({1, NAN}).Dense<float>({1});
  EXPECT_TRUE(StatusIs(partial.Accumulate(nan.view()), absl::StatusCode::kInvalidArgument,
                       "field 'x' (float32[2], federated_sum): holds NaN or Inf; a deterministic aggregation sums exactly"));
  Update inf_in_max;  // a max is exact as it is: infinities are allowed there
  inf_in_max.Dense<float>({1, 2}).Dense<float>({INFINITY});
  EXPECT_TRUE(IsOk(partial.Accumulate(inf_in_max.view())));

  const auto weighted = MakeSpec(T(DType::kFloat64, {2}), {{Intrinsic::kFederatedWeightedMean}}, kDeterministic);
  PartialAggregate weighted_partial(weighted);
  Update overflowing;
  overflowing.Dense<double>({1e300, -2}).Weight(1e10);
  EXPECT_TRUE(StatusIs(weighted_partial.Accumulate(overflowing.view()), absl::StatusCode::kInvalidArgument,
                       "times the field's largest value overflows float64"));
  EXPECT_EQ(weighted_partial.contributions(), 0);
}

TEST(DeterministicAggregateTest, PartialsAreFormatVersion2AndTheirWeightSumIsChecked) {
  const auto spec = MakeSpec(T(DType::kFloat32, {3}), {{Intrinsic::kFederatedWeightedMean}}, kDeterministic);
  PartialAggregate partial(spec);
  Update update;
  update.Dense<float>({1, 2, 3}).Weight(0.1);
  ASSERT_TRUE(IsOk(partial.Accumulate(update.view())));
  std::string bytes = ValueOrDie(partial.Serialize());
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 4, sizeof(version));
  EXPECT_EQ(version, PartialAggregate::kExactFormatVersion);
  EXPECT_TRUE(IsOk(PartialAggregate::Deserialize(spec, bytes)));

  std::string wrong_sum = bytes;
  const double other = 0.2;
  std::memcpy(wrong_sum.data() + 24 + spec->canonical().size(), &other, sizeof(other));
  EXPECT_TRUE(StatusIs(PartialAggregate::Deserialize(spec, wrong_sum), absl::StatusCode::kDataLoss,
                       "is not its exact weight sum, rounded"));
  std::string version1 = bytes;
  const uint32_t one = PartialAggregate::kFormatVersion;
  std::memcpy(version1.data() + 4, &one, sizeof(one));
  EXPECT_TRUE(StatusIs(PartialAggregate::Deserialize(spec, version1), absl::StatusCode::kDataLoss,
                       "has format version 1, but its spec's partials are version 2"));
  // A deterministic partial is another spec's for a plain aggregation of the same type.
  const auto plain = MakeSpec(T(DType::kFloat32, {3}), {{Intrinsic::kFederatedWeightedMean}});
  EXPECT_TRUE(StatusIs(PartialAggregate::Deserialize(plain, bytes), absl::StatusCode::kFailedPrecondition,
                       "deterministic=1"));
}

TEST(DeterministicAggregateTest, TheFixedStateCountsTheExactSums) {
  const auto spec = MakeSpec(ValueType::Struct({{"a", T(DType::kFloat32, {10})},
                                                {"b", T(DType::kFloat64, {10})},
                                                {"c", T(DType::kFloat32, {10})},
                                                {"d", T(DType::kInt64, {10})}}),
                             {{Intrinsic::kFederatedSum}, {Intrinsic::kFederatedMean},
                              {Intrinsic::kSparseWeightedMean}, {Intrinsic::kFederatedSum}},
                             kDeterministic);
  const uint64_t f32 = ExactSums::BytesPerSum(ExactSums::Grid::kFloat32);
  const uint64_t f64 = ExactSums::BytesPerSum(ExactSums::Grid::kFloat64);
  EXPECT_EQ(f32, 48u);
  EXPECT_EQ(f64, 272u);
  EXPECT_EQ(FixedStateBytes(*spec), 10 * f32 + 10 * f64 + (10 * f32 + 10 * sizeof(int64_t) + 10 * f64) + 10 * sizeof(int64_t));
  PartialAggregate partial(spec);
  EXPECT_EQ(partial.MemoryBytes(), FixedStateBytes(*spec));
}

}  // namespace
}  // namespace fedagg
