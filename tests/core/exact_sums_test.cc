// Tests of ExactSums: exact sums whatever the order, rounding to nearest (ties to even)
// checked by hand and against an independent exact summation (Shewchuk's expansions,
// correctly rounded), subnormals, the float32 grid's rounding of finer values, merging,
// and the serialized words.
#include "service/core/exact_sums.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/core/correctly_rounded_sum.h"

namespace fedagg {
namespace {

using ::fedagg::testing::ReferenceSum;

using Grid = ExactSums::Grid;

double SumOf(std::initializer_list<double> values, Grid grid = Grid::kFloat64) {
  ExactSums sums(grid, 1);
  for (double v : values) sums.Add(0, v);
  return sums.Rounded(0);
}

TEST(ExactSumsTest, SumsWithoutLosingAnything) {
  EXPECT_EQ(SumOf({1e16, 1, -1e16}), 1.0);  // float64 addition in this order gives 0
  EXPECT_EQ(SumOf({0.1, 0.2, -0.3}), ReferenceSum({0.1, 0.2, -0.3}));
  EXPECT_EQ(SumOf({}), 0.0);
  EXPECT_EQ(SumOf({5, -5}), 0.0);
  EXPECT_FALSE(std::signbit(SumOf({-2, 2})));
  EXPECT_EQ(SumOf({-3.5}), -3.5);
}

TEST(ExactSumsTest, RoundsToNearestTiesToEven) {
  const double two53 = 0x1p53;
  EXPECT_EQ(SumOf({two53, 1}), two53);              // tie: down to even
  EXPECT_EQ(SumOf({two53, 3}), two53 + 4);          // tie: up to even
  EXPECT_EQ(SumOf({two53, 1, 0x1p-100}), two53 + 2);  // past the tie: up
  EXPECT_EQ(SumOf({-two53, -1}), -two53);
  EXPECT_EQ(SumOf({-two53, -3}), -two53 - 4);
  EXPECT_EQ(SumOf({two53, 1, -0x1p-100}), two53);
}

TEST(ExactSumsTest, SubnormalsAndTheEdgesOfTheRange) {
  const double tiny = std::numeric_limits<double>::denorm_min();
  const double largest = std::numeric_limits<double>::max();
  EXPECT_EQ(SumOf({tiny, tiny, tiny}), 3 * tiny);
  EXPECT_EQ(SumOf({tiny, -tiny}), 0.0);
  EXPECT_EQ(SumOf({largest, 1, -largest}), 1.0);
  EXPECT_EQ(SumOf({largest, largest, -largest}), largest);
  EXPECT_EQ(SumOf({largest, largest}), std::numeric_limits<double>::infinity());
  EXPECT_EQ(SumOf({-largest, -largest}), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(SumOf({largest, tiny}), largest);
}

TEST(ExactSumsTest, TheFloat32GridRoundsFinerValuesToItsStep) {
  const double step = 0x1p-149;  // float32's smallest subnormal
  EXPECT_EQ(SumOf({step}, Grid::kFloat32), step);
  EXPECT_EQ(SumOf({step / 2}, Grid::kFloat32), 0.0);             // tie: to even, 0
  EXPECT_EQ(SumOf({1.5 * step}, Grid::kFloat32), 2 * step);      // tie: to even, 2 steps
  EXPECT_EQ(SumOf({step / 2 + 0x1p-160}, Grid::kFloat32), step);  // past the tie
  EXPECT_EQ(SumOf({-1.5 * step}, Grid::kFloat32), -2 * step);
  // Each value is rounded as it is added, the same wherever it is added.
  EXPECT_EQ(SumOf({step / 2, step / 2}, Grid::kFloat32), 0.0);
  // The grid's range: float32's largest value times the largest float32 weight, many times.
  const double big = static_cast<double>(std::numeric_limits<float>::max()) * 0x1p40;
  EXPECT_EQ(SumOf({big, big, -big, 1}, Grid::kFloat32), big + 1);
}

TEST(ExactSumsTest, MatchesACorrectlyRoundedSumInAnyOrderAndAnySplit) {
  std::mt19937_64 random(20261128);
  std::uniform_real_distribution<double> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-1060, 900);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> values(1 + trial % 37);
    const int spread = 1 + trial * 10;  // from values of one size to 2,000 binades
    const int center = exponent(random);
    for (double& v : values) {
      v = std::ldexp(mantissa(random), std::clamp(center + static_cast<int>(random() % spread) - spread / 2, -1070, 1000));
    }
    const double expected = ReferenceSum(values);
    ExactSums in_order(Grid::kFloat64, 1);
    for (double v : values) in_order.Add(0, v);
    ASSERT_EQ(in_order.Rounded(0), expected) << "trial " << trial;
    // Shuffled, and split into two sums that are then merged.
    std::shuffle(values.begin(), values.end(), random);
    ExactSums halves(Grid::kFloat64, 2);
    for (size_t i = 0; i < values.size(); ++i) halves.Add(static_cast<int64_t>(i % 2), values[i]);
    ExactSums merged(Grid::kFloat64, 1);
    merged.AddSum(0, halves, 1);
    merged.AddSum(0, halves, 0);
    ASSERT_EQ(merged.Rounded(0), expected) << "trial " << trial;
  }
}

TEST(ExactSumsTest, Float32ValuesSumExactlyOnTheirGrid) {
  std::mt19937 random(7);
  std::uniform_real_distribution<float> value(-1e3f, 1e3f);
  std::vector<double> values;
  for (int i = 0; i < 1000; ++i) values.push_back(static_cast<double>(value(random) * std::ldexp(1.0f, static_cast<int>(random() % 60) - 30)));
  ExactSums sums(Grid::kFloat32, 1);
  for (double v : values) sums.Add(0, v);
  EXPECT_EQ(sums.Rounded(0), ReferenceSum(values));
}

TEST(ExactSumsTest, SerializedWordsReadBackTheSameSums) {
  ExactSums sums(Grid::kFloat32, 3);
  sums.Add(0, 1.25);
  sums.Add(1, -7e20);
  sums.Add(2, 0x1p-149);
  ByteWriter out;
  sums.SerializeTo(out);
  const std::string bytes = out.Take();
  EXPECT_EQ(bytes.size(), sizeof(uint64_t) * (1 + 3 * ExactSums::WordsOf(Grid::kFloat32)));
  ExactSums read(Grid::kFloat32, 3);
  ByteReader in(bytes);
  ASSERT_TRUE(read.DeserializeFrom(in, "test").ok());
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(read.Rounded(i), sums.Rounded(i));
  ExactSums too_many(Grid::kFloat32, 4);
  ByteReader again(bytes);
  EXPECT_EQ(too_many.DeserializeFrom(again, "test").code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace fedagg
