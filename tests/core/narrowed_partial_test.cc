// Tests of partials sent up in 16 bits (narrowed_partial.h, format version 3): the dense
// floating sums narrowed to float16 or bfloat16 and widened back within their rounding,
// every other field (integer, sparse, extremes) exactly as in full; a float16 field whose
// sums do not fit float16 sent in full; a deterministic aggregation's exact sums never
// narrowed; about half the bytes; and a malformed dtype byte refused with DATA_LOSS.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/core/half_float.h"
#include "service/core/narrowed_partial.h"
#include "service/core/partial_aggregate.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::IsOk;
using ::fedagg::testing::MakeSpec;
using ::fedagg::testing::SameTensor;
using ::fedagg::testing::StatusIs;
using ::fedagg::testing::T;
using ::fedagg::testing::Update;
using ::fedagg::testing::ValueOrDie;

constexpr int64_t kDense = 5000;

std::shared_ptr<const ReductionSpec> MixedSpec(ReductionOptions options = {}) {
  return MakeSpec(ValueType::Struct({{"mean", T(DType::kFloat32, {kDense})},
                                     {"sum64", T(DType::kFloat64, {300})},
                                     {"ints", T(DType::kInt64, {10})},
                                     {"coo", T(DType::kFloat32, {100})},
                                     {"top", T(DType::kFloat32, {10})}}),
                  {{Intrinsic::kFederatedWeightedMean},
                   {Intrinsic::kFederatedSum},
                   {Intrinsic::kFederatedSum},
                   {Intrinsic::kSparseSum},
                   {Intrinsic::kFederatedMax}},
                  options);
}

PartialAggregate Filled(const std::shared_ptr<const ReductionSpec>& spec, double big = 1) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0, 1);
  PartialAggregate partial(spec);
  for (int u = 0; u < 4; ++u) {
    std::vector<float> mean(kDense), coo = {1.0f / 3, 2.5f}, top(10);
    std::vector<double> sum64(300);
    std::vector<int64_t> ints(10, 7 + u);
    for (float& x : mean) x = static_cast<float>(normal(rng) / 3);
    for (double& x : sum64) x = normal(rng) * big;
    for (float& x : top) x = static_cast<float>(normal(rng));
    Update update;
    update.Dense(mean).Dense(sum64).Dense(ints).Sparse({3, 77}, coo).Dense(top).Weight(1 + u);
    EXPECT_TRUE(IsOk(partial.Accumulate(update.view())));
  }
  return partial;
}

TEST(NarrowedPartialTest, DenseFloatingSumsTravelIn16BitsTheRestInFull) {
  const auto spec = MixedSpec();
  const PartialAggregate partial = Filled(spec);
  const AggregateResult full = ValueOrDie(partial.Report());
  const std::string full_bytes = ValueOrDie(partial.Serialize());
  for (const auto& [precision, relative] : {std::pair{PartialPrecision::kFloat16, 0x1p-11},
                                            std::pair{PartialPrecision::kBFloat16, 0x1p-8}}) {
    const std::string bytes = ValueOrDie(partial.Serialize(precision));
    uint32_t version;
    std::memcpy(&version, bytes.data() + 4, sizeof(version));
    EXPECT_EQ(version, PartialAggregate::kNarrowedFormatVersion);
    EXPECT_LT(bytes.size(), full_bytes.size() * 6 / 10) << "the dense sums are most of the partial";
    const PartialAggregate read = ValueOrDie(PartialAggregate::Deserialize(spec, bytes));
    EXPECT_EQ(read.contributions(), partial.contributions());
    EXPECT_EQ(read.weight_sum(), partial.weight_sum());
    const AggregateResult narrowed = ValueOrDie(read.Report());
    for (size_t f : {size_t{0}, size_t{1}}) {  // the weighted mean's and the float64 sum's
      for (size_t i = 0; i < testing::NumElements(full.fields[f].value); ++i) {
        const double x = full.fields[f].value.ValueAsDouble(i), y = narrowed.fields[f].value.ValueAsDouble(i);
        ASSERT_NEAR(y, x, std::abs(x) * relative * 1.01 + 1e-7) << full.fields[f].path << " " << i;
      }
    }
    for (size_t f : {size_t{2}, size_t{3}, size_t{4}}) {  // integers, the sparse family, a maximum
      EXPECT_TRUE(SameTensor(narrowed.fields[f].value, full.fields[f].value)) << full.fields[f].path;
    }
    // The narrowed partial merges like any other.
    PartialAggregate parent(spec);
    ASSERT_TRUE(IsOk(parent.MergeWith(read)));
    EXPECT_EQ(parent.contributions(), 4);
  }
}

TEST(NarrowedPartialTest, SumsBeyondFloat16sRangeTravelInFull) {
  const auto spec = MixedSpec();
  const PartialAggregate partial = Filled(spec, /*big=*/1e6);  // the float64 field's sums
  const PartialAggregate read = ValueOrDie(PartialAggregate::Deserialize(spec, ValueOrDie(partial.Serialize(PartialPrecision::kFloat16))));
  const AggregateResult full = ValueOrDie(partial.Report()), narrowed = ValueOrDie(read.Report());
  EXPECT_TRUE(SameTensor(narrowed.fields[1].value, full.fields[1].value)) << "kept in full, not infinite";
  EXPECT_FALSE(SameTensor(narrowed.fields[0].value, full.fields[0].value)) << "the small field is narrowed";
  // bfloat16 has float32's range: narrowed, and finite.
  const PartialAggregate bf = ValueOrDie(PartialAggregate::Deserialize(spec, ValueOrDie(partial.Serialize(PartialPrecision::kBFloat16))));
  const AggregateResult bf_result = ValueOrDie(bf.Report());
  EXPECT_FALSE(SameTensor(bf_result.fields[1].value, full.fields[1].value));
  for (size_t i = 0; i < 300; ++i) ASSERT_TRUE(std::isfinite(bf_result.fields[1].value.ValueAsDouble(i)));
}

TEST(NarrowedPartialTest, ExactSumsAreNeverNarrowed) {
  const auto spec = MixedSpec({.deterministic = true});
  const PartialAggregate partial = Filled(spec);
  EXPECT_EQ(ValueOrDie(partial.Serialize(PartialPrecision::kFloat16)), ValueOrDie(partial.Serialize()));
}

TEST(NarrowedPartialTest, AVersion3PartialOfADeterministicSpecOrWithABadDtypeIsRefused) {
  const auto spec = MixedSpec();
  std::string bytes = ValueOrDie(Filled(spec).Serialize(PartialPrecision::kFloat16));
  // The first field's dtype byte follows its intrinsic and accumulation dtype bytes.
  const size_t header = 4 + 4 + 8 + spec->canonical().size() + 8 + 8 + 4;
  ASSERT_EQ(static_cast<uint8_t>(bytes[header + 2]), static_cast<uint8_t>(DType::kFloat16));
  bytes[header + 2] = static_cast<char>(DType::kInt32);
  EXPECT_TRUE(StatusIs(PartialAggregate::Deserialize(spec, bytes).status(), absl::StatusCode::kDataLoss,
                       "neither its accumulation dtype float32 nor float16 or bfloat16"));
  const auto exact = MixedSpec({.deterministic = true});
  std::string narrowed = ValueOrDie(Filled(spec).Serialize(PartialPrecision::kFloat16));
  EXPECT_FALSE(PartialAggregate::Deserialize(exact, narrowed).ok());
}

TEST(NarrowedPartialTest, PrecisionsReadFromTheirNames) {
  EXPECT_EQ(ValueOrDie(ParsePartialPrecision("float32")), PartialPrecision::kFull);
  EXPECT_EQ(ValueOrDie(ParsePartialPrecision("float16")), PartialPrecision::kFloat16);
  EXPECT_EQ(ValueOrDie(ParsePartialPrecision("bfloat16")), PartialPrecision::kBFloat16);
  EXPECT_TRUE(StatusIs(ParsePartialPrecision("int8").status(), absl::StatusCode::kInvalidArgument, "int8"));
  for (PartialPrecision p : {PartialPrecision::kFull, PartialPrecision::kFloat16, PartialPrecision::kBFloat16}) {
    EXPECT_EQ(PartialPrecisionOf(PartialPrecisionDType(p)), p);
  }
}

}  // namespace
}  // namespace fedagg
