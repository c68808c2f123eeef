// Differential privacy's noise: the keyed streams, the exact discrete Gaussian sampler
// (its probabilities against the exact distribution), and the noise AddPrivacyNoise puts
// on a result (standard deviation as reported, once per key, a mean's divisor, the
// adaptive bound's step). The keys are fixed, so every figure is the same on every run;
// each statistical bound is chosen so that a correct sampler fails it with a chance below
// 1e-6 for a random key (the false-alarm rate stated with each).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "service/core/discrete_gaussian.h"
#include "service/core/keyed_random.h"
#include "service/core/privacy_noise.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using testing::IsOk;

NoiseKey KeyOf(uint8_t seed) {
  NoiseKey key;
  for (size_t i = 0; i < key.bytes.size(); ++i) key.bytes[i] = static_cast<uint8_t>(seed + 7 * i);
  return key;
}

// The bytes of `words` 64-bit draws, in the order the keystream gave them.
std::string KeystreamHex(KeyedRandom& random, int words) {
  std::string hex;
  for (int w = 0; w < words; ++w) {
    const uint64_t word = random.Next64();
    for (int b = 0; b < 8; ++b) hex += absl::StrFormat("%02x", (word >> (8 * b)) & 0xff);
  }
  return hex;
}

TEST(KeyedRandomTest, IsChaCha20AsRfc8439StatesIt) {
  // RFC 8439 appendix A.1, test vectors 1 and 2: key and nonce all zero, blocks 0 and 1.
  KeyedRandom zero(NoiseKey{}, 0, 0);
  EXPECT_EQ(KeystreamHex(zero, 2), "76b8e0ada0f13d90405d6ae55386bd28");
  KeystreamHex(zero, 6);  // the rest of block 0
  EXPECT_EQ(KeystreamHex(zero, 1), "9f07e7be5551387a");
  // Section 2.3.2: key 00..1f, nonce 00:00:00:09:00:00:00:4a:00:00:00:00 (our stream and
  // substream, little-endian), block 1.
  NoiseKey key;
  for (size_t i = 0; i < key.bytes.size(); ++i) key.bytes[i] = static_cast<uint8_t>(i);
  KeyedRandom random(key, 0x09000000u, 0x4a000000u);
  KeystreamHex(random, 8);  // block 0
  EXPECT_EQ(KeystreamHex(random, 8),
            "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
            "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e");
}

TEST(KeyedRandomTest, TheSameKeyAndStreamGiveTheSameBitsAndOthersDiffer) {
  KeyedRandom a(KeyOf(1), 3, 9), b(KeyOf(1), 3, 9), other_block(KeyOf(1), 3, 10), other_key(KeyOf(2), 3, 9);
  int differing_block = 0, differing_key = 0;
  for (int i = 0; i < 1000; ++i) {  // spans refills of the 4 KiB buffer
    const uint64_t x = a.Next64();
    EXPECT_EQ(x, b.Next64());
    differing_block += x != other_block.Next64();
    differing_key += x != other_key.Next64();
  }
  EXPECT_EQ(differing_block, 1000);
  EXPECT_EQ(differing_key, 1000);
}

TEST(KeyedRandomTest, BelowIsUniform) {
  // 60,000 draws below 6: each face's count is binomial (sd 91); 6 sd: false alarm < 1e-8.
  KeyedRandom random(KeyOf(3), 0, 0);
  std::vector<int> counts(6);
  for (int i = 0; i < 60000; ++i) ++counts[static_cast<size_t>(random.Below(6))];
  for (int count : counts) EXPECT_NEAR(count, 10000, 6 * 91.3);
}

TEST(KeyedRandomTest, BelowIsUniformForBoundsOfMoreThan64Bits) {
  // The 128-bit path (bounds above 2^64, as the sampler's rationals reach): 60,000 draws
  // below 3 * 2^100, each cell of the top (draw >> 100: 0, 1 or 2) and of the lowest bit
  // binomial (sd 115 and 122); 6 sd: false alarm < 1e-8 per cell.
  KeyedRandom random(KeyOf(9), 0, 0);
  const uint128 bound = static_cast<uint128>(3) << 100;
  std::vector<int> thirds(3), parity(2);
  for (int i = 0; i < 60000; ++i) {
    const uint128 draw = random.Below(bound);
    ASSERT_LT(draw, bound);
    ++thirds[static_cast<size_t>(draw >> 100)];
    ++parity[static_cast<size_t>(draw & 1)];
  }
  for (int count : thirds) EXPECT_NEAR(count, 20000, 6 * 115.5);
  for (int count : parity) EXPECT_NEAR(count, 30000, 6 * 122.5);
}

TEST(DiscreteGaussianTest, BernoulliExpKeepsItsProbabilityWithRationalsOf128Bits) {
  // The same probabilities with numerator and denominator times 2^100 (the acceptance
  // test's rationals are that wide for variances near 2^54): 100,000 trials each, sd at
  // most 0.0016; 6 sd: false alarm < 1e-8.
  KeyedRandom random(KeyOf(10), 0, 0);
  const uint128 wide = static_cast<uint128>(1) << 100;
  for (auto [numerator, denominator] : std::vector<std::pair<int, int>>{{1, 2}, {1, 1}, {5, 2}, {7, 3}}) {
    int heads = 0;
    for (int i = 0; i < 100000; ++i) heads += DiscreteGaussian::BernoulliExp(random, numerator * wide, denominator * wide);
    EXPECT_NEAR(heads / 1e5, std::exp(-static_cast<double>(numerator) / denominator), 6 * 0.0016)
        << numerator << "/" << denominator << " times 2^100";
  }
}

TEST(DiscreteGaussianTest, BernoulliExpHasProbabilityExpMinusGamma) {
  // 100,000 trials each: the frequency's sd is at most 0.0016; 6 sd: false alarm < 1e-8.
  KeyedRandom random(KeyOf(4), 0, 0);
  for (auto [numerator, denominator] : std::vector<std::pair<int, int>>{{0, 1}, {1, 2}, {1, 1}, {5, 2}, {7, 3}}) {
    int heads = 0;
    for (int i = 0; i < 100000; ++i) heads += DiscreteGaussian::BernoulliExp(random, numerator, denominator);
    EXPECT_NEAR(heads / 1e5, std::exp(-static_cast<double>(numerator) / denominator), 6 * 0.0016)
        << numerator << "/" << denominator;
  }
}

TEST(DiscreteGaussianTest, SamplesFollowTheExactDistribution) {
  // variance 9: a chi-square test over |x| <= 12 (the tail pooled) of 200,000 samples;
  // 25 cells, the 1e-6 quantile of chi-square with 24 degrees of freedom is about 72.
  const uint64_t variance = 9;
  DiscreteGaussian gaussian(variance);
  KeyedRandom random(KeyOf(5), 0, 0);
  const int n = 200000;
  std::map<int64_t, int> counts;
  double sum = 0, sum_squares = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t x = gaussian.Sample(random);
    ++counts[std::clamp<int64_t>(x, -12, 12)];
    sum += static_cast<double>(x);
    sum_squares += static_cast<double>(x) * static_cast<double>(x);
  }
  double normalizer = 0;
  for (int64_t x = -200; x <= 200; ++x) normalizer += std::exp(-static_cast<double>(x * x) / (2.0 * variance));
  double chi_square = 0, exact_variance = 0;
  for (int64_t cell = -12; cell <= 12; ++cell) {
    double p = 0;
    for (int64_t x = -200; x <= 200; ++x) {
      if (std::clamp<int64_t>(x, -12, 12) == cell) p += std::exp(-static_cast<double>(x * x) / (2.0 * variance));
    }
    p /= normalizer;
    const double expected = p * n;
    chi_square += (counts[cell] - expected) * (counts[cell] - expected) / expected;
  }
  for (int64_t x = -200; x <= 200; ++x) {
    exact_variance += static_cast<double>(x * x) * std::exp(-static_cast<double>(x * x) / (2.0 * variance)) / normalizer;
  }
  EXPECT_LT(chi_square, 72.0);
  EXPECT_NEAR(sum / n, 0.0, 6 * std::sqrt(exact_variance / n));
  EXPECT_NEAR(sum_squares / n / exact_variance, 1.0, 6 * std::sqrt(2.0 / n));
}

TEST(DiscreteGaussianTest, LargeVariancesKeepTheirStandardDeviation) {
  // sigma 2^26 as the noise grid uses: 20,000 samples, the sample variance's relative sd
  // is 1%; 6 sd.
  const uint64_t variance = uint64_t{1} << 52;
  DiscreteGaussian gaussian(variance);
  KeyedRandom random(KeyOf(6), 0, 0);
  double sum_squares = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double x = static_cast<double>(gaussian.Sample(random));
    sum_squares += x * x;
  }
  EXPECT_NEAR(sum_squares / n / static_cast<double>(variance), 1.0, 6 * std::sqrt(2.0 / n));
}

std::shared_ptr<const ReductionSpec> PrivateSpec(Intrinsic intrinsic, DType dtype, int64_t elements, PrivacySpec privacy) {
  ReductionOptions options;
  options.privacy = privacy;
  return ValueOrDie(ReductionSpec::Create(ValueType::Tensor(dtype, {elements}), {FieldIntrinsic{intrinsic}}, options));
}

AggregateResult ZeroSum(const ReductionSpec& spec, int64_t contributions) {
  AggregateResult result;
  result.contributions = contributions;
  const FieldSpec& field = spec.fields()[0];
  ReportedField reported{field.path, field.intrinsic, Tensor{field.result_dtype, {field.type.num_elements()}, {}}};
  reported.value.bytes.resize(static_cast<size_t>(field.type.num_elements()) * DTypeSize(field.result_dtype));
  result.fields.push_back(std::move(reported));
  return result;
}

TEST(PrivacyNoiseTest, EachCoordinateGetsTheReportedStandardDeviationOnce) {
  // sigma = z C = 1.5 * 2 = 3 on 100,000 coordinates: the sample sd's relative sd is
  // 0.22%; 6 sd. The same key gives the same noise, to the bit; another key other noise.
  auto spec = PrivateSpec(Intrinsic::kFederatedSum, DType::kFloat64, 100000, PrivacySpec{2.0, 1.5, 0, std::nullopt});
  AggregateResult result = ZeroSum(*spec, 10);
  ASSERT_TRUE(IsOk(AddPrivacyNoise(*spec, KeyOf(7), 0, result)));
  ASSERT_TRUE(result.privacy.has_value());
  EXPECT_GE(result.privacy->noise_stddev, 3.0);
  EXPECT_LT(result.privacy->noise_stddev, 3.0 * (1 + 1e-12));
  absl::Span<const double> noise = result.fields[0].value.values<double>();
  double sum = 0, sum_squares = 0;
  for (double x : noise) {
    sum += x;
    sum_squares += x * x;
  }
  const double n = static_cast<double>(noise.size());
  EXPECT_NEAR(sum / n, 0.0, 6 * 3.0 / std::sqrt(n));
  EXPECT_NEAR(std::sqrt(sum_squares / n) / 3.0, 1.0, 6 * std::sqrt(0.5 / n));

  AggregateResult again = ZeroSum(*spec, 10);
  ASSERT_TRUE(IsOk(AddPrivacyNoise(*spec, KeyOf(7), 0, again)));
  EXPECT_EQ(again.fields[0].value.bytes, result.fields[0].value.bytes);
  AggregateResult other = ZeroSum(*spec, 10);
  ASSERT_TRUE(IsOk(AddPrivacyNoise(*spec, KeyOf(8), 0, other)));
  EXPECT_NE(other.fields[0].value.bytes, result.fields[0].value.bytes);
}

TEST(PrivacyNoiseTest, TheNoisedValueIsOnTheGridAndAMeanDividesByTheExpectedClients) {
  // A mean runs as its sum; the noised sum (a multiple of the grid step) is divided by 40.
  auto spec = PrivateSpec(Intrinsic::kFederatedMean, DType::kFloat64, 4, PrivacySpec{1.0, 1.0, 40, std::nullopt});
  EXPECT_EQ(spec->fields()[0].intrinsic, Intrinsic::kFederatedSum);
  AggregateResult result = ZeroSum(*spec, 40);
  result.fields[0].value.mutable_values<double>()[0] = 12.345;
  ASSERT_TRUE(IsOk(AddPrivacyNoise(*spec, KeyOf(9), 0, result)));
  EXPECT_EQ(result.fields[0].intrinsic, Intrinsic::kFederatedMean);
  const double step = std::ldexp(1.0, -26);  // sigma 1: the grid step is 2^-26
  for (double mean : result.fields[0].value.values<double>()) {
    const double sum = mean * 40;
    EXPECT_EQ(std::nearbyint(sum / step) * step, sum);
    EXPECT_LT(std::fabs(sum), 8.0 + 12.345);  // within 8 sigma
  }
}

TEST(PrivacyNoiseTest, ClippingWithoutNoiseOnlyDividesTheMean) {
  auto spec = PrivateSpec(Intrinsic::kFederatedMean, DType::kFloat32, 2, PrivacySpec{1.0, 0.0, 4, std::nullopt});
  AggregateResult result = ZeroSum(*spec, 3);
  result.fields[0].value.mutable_values<float>()[0] = 2.0f;
  ASSERT_TRUE(IsOk(AddPrivacyNoise(*spec, KeyOf(1), 0, result)));
  EXPECT_EQ(result.fields[0].value.values<float>()[0], 0.5f);
  EXPECT_EQ(result.privacy->noise_stddev, 0.0);
}

TEST(PrivacyNoiseTest, AdaptiveClippingFollowsTheQuantileRule) {
  // 100 clients, 30 clipped: the centred unclipped count is 70 - 50 = 20, noised with sd
  // 5; the next bound is C exp(-lr (clamp(noised / 100 + 1/2) - q)). The noised count is
  // recovered from the reported fraction, and the step checked against the rule.
  PrivacySpec privacy{0.5, 1.0, 100, AdaptiveClipping{0.5, 0.2, 5.0}};
  auto spec = PrivateSpec(Intrinsic::kFederatedSum, DType::kFloat64, 3, privacy);
  AggregateResult result = ZeroSum(*spec, 100);
  ASSERT_TRUE(IsOk(AddPrivacyNoise(*spec, KeyOf(10), 30, result)));
  const PrivacyReport& report = *result.privacy;
  EXPECT_EQ(report.clipped_updates, 30);
  EXPECT_NEAR(report.unclipped_fraction, 0.7, 6 * 5.0 / 100);
  EXPECT_NEAR(report.next_clip_norm, 0.5 * std::exp(-0.2 * (report.unclipped_fraction - 0.5)), 1e-15);
  // The values' share of z: (1 - (2 * 5)^-2)^-1/2.
  EXPECT_NEAR(report.noise_stddev, 0.5 / std::sqrt(1 - 0.01), 1e-9);
}

TEST(PrivacyNoiseTest, NextClipNormMatchesTheQuantileEstimatorOnAReplayedTrace) {
  // The estimator's geometric update, written out here as TensorFlow Federated states it,
  // replayed over a trace of noised centred counts (from 20 rounds of 50 clients).
  PrivacySpec privacy{0.1, 1.0, 50, AdaptiveClipping{0.5, 0.2, 2.5}};
  const double trace[] = {-25, -24.2, -20.5, -13.1, -3.7, 2.2, 6.9, 4.1, 1.3, -0.8,
                          0.4, 30.0, -31.5, 2.6, -1.9, 0.0, 3.3, -2.2, 1.1, -0.5};
  double expected = 0.1;
  for (double centred : trace) {
    const double below = std::min(1.0, std::max(0.0, centred / 50 + 0.5));
    const AdaptiveStep step = NextClipNorm(privacy, centred);
    expected = expected * std::exp(-0.2 * (below - 0.5));
    EXPECT_NEAR(step.next_clip_norm / expected, 1.0, 1e-12);
    privacy.clip_norm = step.next_clip_norm;
  }
}

}  // namespace
}  // namespace fedagg
