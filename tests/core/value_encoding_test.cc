// Tests of the wire encodings of values (value_encoding.h, value_encoder.h): spellings
// and sizes; the encoder's bytes against the Python package's (the same golden CRCs in
// tests/python/test_value_encoding.py); each decoded value within one level of the
// original; unbiasedness through an aggregation (the mean of n clients' encoded
// updates has 1/n of one update's error); discretized sums exact in one node and in a
// tree; quantized means in a tree against one node; every spec and every encoded
// section the server must refuse, each refusal leaving the aggregate as it was; the
// rotation undone exactly, and its result the mean of the updates rotated back.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/core/cpu_accumulator_factory.h"
#include "service/core/crc32c.h"
#include "service/core/decoding_field_accumulator.h"
#include "service/core/encoded_values.h"
#include "service/core/partial_aggregate.h"
#include "service/core/reference_reducer.h"
#include "service/core/rotation.h"
#include "service/core/value_encoder.h"
#include "service/core/value_encoding.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::IsOk;
using ::fedagg::testing::MakeSpec;
using ::fedagg::testing::SameTensor;
using ::fedagg::testing::StatusIs;
using ::fedagg::testing::T;
using ::fedagg::testing::TakeSnapshot;
using ::fedagg::testing::Unchanged;
using ::fedagg::testing::ValueOrDie;

// `values` written in `encoding`, rounding with field 0's stream of `seed`.
std::vector<std::byte> Encode(const ValueEncoding& encoding, const std::vector<float>& values, uint64_t seed) {
  std::vector<std::byte> out(encoding.EncodedBytes(static_cast<int64_t>(values.size())));
  EXPECT_TRUE(IsOk(EncodeValues(encoding, DType::kFloat32, AsBytes(absl::MakeConstSpan(values)),
                                RoundingStream(seed, 0), absl::MakeSpan(out))));
  return out;
}

std::vector<double> Decode(const ValueEncoding& encoding, const std::vector<std::byte>& bytes, int64_t n) {
  const EncodedValues encoded(encoding, bytes, n);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = encoded.Decode(i);
  return out;
}

// An update of one dense float32 field holding `bytes` as they would arrive.
testing::Update EncodedUpdate(std::vector<std::byte> bytes) {
  testing::Update update;
  update.Raw(Encoding::kDense, DType::kFloat32, {}, std::move(bytes));
  return update;
}

std::shared_ptr<const ReductionSpec> EncodedSpec(int64_t n, Intrinsic intrinsic, const ValueEncoding& encoding,
                                                 ReductionOptions options = {}) {
  return MakeSpec(T(DType::kFloat32, {n}), {FieldIntrinsic{intrinsic, false, encoding}}, options);
}

// ---- Spellings and sizes -------------------------------------------------------------

TEST(ValueEncodingTest, SpellingsReadBack) {
  for (const char* text : {"plain", "quantized:1", "quantized:2", "quantized:4/64", "quantized:8",
                           "quantized:8/65536", "quantized:8+rotation:4096", "quantized:2/64+rotation:8",
                           "discretized:8@0.5", "discretized:16@0.001",
                           "discretized:32@1e-05", "discretized:16@0.30000000000000004"}) {
    const ValueEncoding encoding = ValueOrDie(ParseValueEncoding(text));
    EXPECT_EQ(encoding.ToString(), text);
  }
  EXPECT_EQ(ValueOrDie(ParseValueEncoding("quantized:8")).block_size, ValueEncoding::kDefaultBlockSize);
  EXPECT_EQ(ValueOrDie(ParseValueEncoding("none")), ValueEncoding{});
}

TEST(ValueEncodingTest, RefusesWhatIsOutOfRange) {
  for (const char* text : {"quantized:3", "quantized:16", "quantized:0", "quantized:8/12", "quantized:8/0",
                           "quantized:8/131072", "discretized:4@1", "discretized:16@0", "discretized:16@-1",
                           "discretized:16@nan", "discretized:16@inf", "discretized:16", "quantized:", "gzip",
                           "quantized:x", "quantized:8+rotation:1000", "quantized:8+rotation:4",
                           "quantized:8+rotation:131072", "quantized:8+rotation:"}) {
    EXPECT_TRUE(StatusIs(ParseValueEncoding(text).status(), absl::StatusCode::kInvalidArgument, "")) << text;
  }
}

TEST(ValueEncodingTest, SectionSizes) {
  // Scales (4 bytes a block) ahead of the packed codes, which round up to whole bytes.
  EXPECT_EQ(ValueEncoding::Quantized(8).EncodedBytes(1000), 4u * 4 + 1000);
  EXPECT_EQ(ValueEncoding::Quantized(4, 64).EncodedBytes(1000), 16u * 4 + 500);
  EXPECT_EQ(ValueEncoding::Quantized(1).EncodedBytes(1000), 4u * 4 + 125);
  EXPECT_EQ(ValueEncoding::Quantized(2).EncodedBytes(3), 4u + 1);
  EXPECT_EQ(ValueEncoding::Quantized(8).EncodedBytes(0), 0u);
  EXPECT_EQ(ValueEncoding::Discretized(16, 0.01).EncodedBytes(1000), 2000u);
  EXPECT_EQ(ValueEncoding::Discretized(32, 0.01).EncodedBytes(7), 28u);
  // At 8 bits the default block's scale costs 0.125 bit a coordinate.
  const int64_t n = 1 << 20;
  EXPECT_EQ(ValueEncoding::Quantized(8).EncodedBytes(n) * 8, static_cast<uint64_t>(n) * 8 + n / 8);
}

// ---- The encoder's bytes -------------------------------------------------------------

// The golden vector tests/python/test_value_encoding.py encodes with NumPy: the same CRCs
// mean the two client libraries write the same bytes for the same seed.
std::vector<float> GoldenValues() {
  std::vector<float> x;
  for (int64_t i = 0; i < 1000; ++i) x.push_back(static_cast<float>(static_cast<double>((i * 7919) % 1000 - 500) / 37.0));
  return x;
}

TEST(ValueEncoderTest, SameBytesAsThePythonPackage) {
  EXPECT_EQ(RoundingStream(42, 0), 0xBDD732262FEB6E95ull);
  const std::vector<float> x = GoldenValues();
  const std::vector<std::pair<const char*, uint32_t>> golden = {{"quantized:8", 0x5416181Eu},
                                                                {"quantized:4/64", 0xA0C81CB2u},
                                                                {"quantized:1", 0xE2D71B83u},
                                                                {"discretized:16@0.01", 0xD5F052E8u}};
  for (const auto& [text, crc] : golden) {
    const std::vector<std::byte> bytes = Encode(ValueOrDie(ParseValueEncoding(text)), x, 42);
    EXPECT_EQ(Crc32cExtend(0, bytes.data(), bytes.size()), crc) << text;
  }
  // Rotated (the signs of rotation seeds 7 and 123456789): the rotation in float64 too.
  const std::vector<std::pair<ValueEncoding, uint32_t>> rotated = {
      {ValueEncoding::Quantized(8, 256, 64, 7), 0x611FBC26u},
      {ValueEncoding::Quantized(4, 64, 256, 123456789), 0x2D438B21u}};
  for (const auto& [encoding, crc] : rotated) {
    const std::vector<std::byte> bytes = Encode(encoding, x, 42);
    EXPECT_EQ(Crc32cExtend(0, bytes.data(), bytes.size()), crc) << encoding.ToString();
  }
}

TEST(ValueEncoderTest, DecodedValuesLieWithinOneLevel) {
  std::mt19937_64 rng(7);
  std::student_t_distribution<double> heavy(4);
  std::vector<float> x(5000);
  for (float& v : x) v = static_cast<float>(heavy(rng));
  x[17] = 0;
  for (int64_t k = 512; k < 768; ++k) x[static_cast<size_t>(k)] = 0;  // a block of zeros
  for (int bits : {1, 2, 4, 8}) {
    const ValueEncoding encoding = ValueEncoding::Quantized(bits);
    const std::vector<std::byte> bytes = Encode(encoding, x, 3);
    const std::vector<double> decoded = Decode(encoding, bytes, static_cast<int64_t>(x.size()));
    const EncodedValues encoded(encoding, bytes, static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const double scale = encoded.scale(static_cast<int64_t>(i) / encoding.block_size);
      const double level = 2 * scale / encoding.MaxCode();
      ASSERT_LE(std::abs(decoded[i] - x[i]), level * (1 + 1e-12)) << "bits " << bits << " at " << i;
    }
    EXPECT_EQ(encoded.scale(2), 0.0f);
  }
  const ValueEncoding discretized = ValueEncoding::Discretized(16, 0.01);
  const std::vector<double> decoded = Decode(discretized, Encode(discretized, x, 3), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::abs(decoded[i] - x[i]), 0.01 * (1 + 1e-9)) << i;
}

TEST(ValueEncoderTest, RefusesWhatItCannotEncode) {
  std::vector<float> x = {1, 2, NAN, 4};
  std::vector<std::byte> out(ValueEncoding::Quantized(8).EncodedBytes(4));
  absl::Status status = EncodeValues(ValueEncoding::Quantized(8), DType::kFloat32, AsBytes(absl::MakeConstSpan(x)), 1,
                                     absl::MakeSpan(out));
  EXPECT_TRUE(StatusIs(status, absl::StatusCode::kInvalidArgument, "position 2"));
  x = {1, 2, 400, 4};  // 400 / 0.01 = 40000 steps: beyond int16
  out.resize(ValueEncoding::Discretized(16, 0.01).EncodedBytes(4));
  status = EncodeValues(ValueEncoding::Discretized(16, 0.01), DType::kFloat32, AsBytes(absl::MakeConstSpan(x)), 1,
                        absl::MakeSpan(out));
  EXPECT_TRUE(StatusIs(status, absl::StatusCode::kInvalidArgument, "larger scale"));
  // A rotated field needs the seed the root drew: a spec not as the server returned it has none.
  out.resize(ValueEncoding::Quantized(8, 256, 8).EncodedBytes(4));
  status = EncodeValues(ValueEncoding::Quantized(8, 256, 8), DType::kFloat32, AsBytes(absl::MakeConstSpan(x)), 1,
                        absl::MakeSpan(out));
  EXPECT_TRUE(StatusIs(status, absl::StatusCode::kInvalidArgument, "rotation seed is not set"));
}

// ---- Unbiased through an aggregation ---------------------------------------------------

// The criterion: for n correlated clients (one shared vector plus a little of
// each client's own), the mean of their encoded updates, as a node reports it, has an
// error whose mean square times n, divided by one update's, lies in [0.9, 1.1]. Biased
// rounding (round to nearest) would not fall with n.
TEST(ValueEncodingTest, TheMeansErrorFallsAsOneOverTheClients) {
  constexpr int64_t d = 16384;
  std::mt19937_64 rng(11);
  std::student_t_distribution<double> heavy(4);
  std::normal_distribution<double> own(0, 0.1);
  std::vector<double> shared(d);
  for (double& v : shared) v = heavy(rng);
  for (const ValueEncoding& encoding : {ValueEncoding::Quantized(8), ValueEncoding::Quantized(2),
                                        ValueEncoding::Discretized(16, 0.05)}) {
    for (int n : {10, 100, 1000}) {
      PartialAggregate partial(EncodedSpec(d, Intrinsic::kFederatedMean, encoding, {.float64_accumulation = true}));
      std::vector<double> exact_mean(d, 0.0);
      double one_update_error = 0;
      for (int c = 0; c < n; ++c) {
        std::vector<float> x(d);
        for (int64_t i = 0; i < d; ++i) x[static_cast<size_t>(i)] = static_cast<float>(shared[static_cast<size_t>(i)] + own(rng));
        const std::vector<std::byte> bytes = Encode(encoding, x, 1000 * static_cast<uint64_t>(n) + static_cast<uint64_t>(c));
        const std::vector<double> decoded = Decode(encoding, bytes, d);
        for (int64_t i = 0; i < d; ++i) {
          const auto j = static_cast<size_t>(i);
          exact_mean[j] += x[j] / static_cast<double>(n);
          one_update_error += (decoded[j] - x[j]) * (decoded[j] - x[j]) / static_cast<double>(d * n);
        }
        ASSERT_TRUE(IsOk(partial.Accumulate(EncodedUpdate(bytes).view())));
      }
      const AggregateResult result = ValueOrDie(partial.Report());
      double mean_error = 0;
      for (int64_t i = 0; i < d; ++i) {
        const double e = result.fields[0].value.ValueAsDouble(static_cast<size_t>(i)) - exact_mean[static_cast<size_t>(i)];
        mean_error += e * e / d;
      }
      const double ratio = mean_error * n / one_update_error;
      EXPECT_GE(ratio, 0.9) << encoding.ToString() << " n=" << n;
      EXPECT_LE(ratio, 1.1) << encoding.ToString() << " n=" << n;
    }
  }
}

// ---- Sums, means and trees -------------------------------------------------------------

std::vector<std::vector<float>> RandomUpdates(int count, int64_t d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::vector<std::vector<float>> updates(static_cast<size_t>(count), std::vector<float>(static_cast<size_t>(d)));
  for (auto& u : updates) {
    for (float& v : u) v = static_cast<float>(normal(rng));
  }
  return updates;
}

TEST(ValueEncodingTest, DiscretizedSumsAreExactInANodeAndInATree) {
  constexpr int64_t d = 3000;
  const ValueEncoding encoding = ValueEncoding::Discretized(16, 0.001);
  for (Intrinsic intrinsic : {Intrinsic::kFederatedSum, Intrinsic::kFederatedMean}) {
    const auto spec = EncodedSpec(d, intrinsic, encoding);
    PartialAggregate node(spec), left(spec), right(spec);
    std::vector<int64_t> integers(d, 0);
    const std::vector<std::vector<float>> updates = RandomUpdates(7, d, 5);
    for (size_t c = 0; c < updates.size(); ++c) {
      const std::vector<std::byte> bytes = Encode(encoding, updates[c], c);
      const EncodedValues encoded(encoding, bytes, d);
      for (int64_t i = 0; i < d; ++i) integers[static_cast<size_t>(i)] += encoded.integer(i);
      ASSERT_TRUE(IsOk(node.Accumulate(EncodedUpdate(bytes).view())));
      ASSERT_TRUE(IsOk((c % 2 == 0 ? left : right).Accumulate(EncodedUpdate(bytes).view())));
    }
    // The tree: one child's partial serialized, sent up and merged.
    PartialAggregate root = ValueOrDie(PartialAggregate::Deserialize(spec, ValueOrDie(left.Serialize())));
    ASSERT_TRUE(IsOk(root.MergeWith(right)));
    const AggregateResult one = ValueOrDie(node.Report()), tree = ValueOrDie(root.Report());
    EXPECT_TRUE(SameTensor(one.fields[0].value, tree.fields[0].value));
    ASSERT_EQ(one.fields[0].value.dtype, DType::kFloat32);
    const double divisor = intrinsic == Intrinsic::kFederatedMean ? 7.0 : 1.0;
    for (int64_t i = 0; i < d; ++i) {
      const auto j = static_cast<size_t>(i);
      ASSERT_EQ(one.fields[0].value.values<float>()[j],
                static_cast<float>(static_cast<double>(integers[j]) * 0.001 / divisor)) << i;
    }
  }
}

TEST(ValueEncodingTest, QuantizedFieldsAgreeWithTheReferenceAndAcrossATree) {
  constexpr int64_t d = 2500;  // not a whole number of blocks
  for (int bits : {1, 2, 4, 8}) {
    for (Intrinsic intrinsic :
         {Intrinsic::kFederatedSum, Intrinsic::kFederatedMean, Intrinsic::kFederatedWeightedMean}) {
      const ValueEncoding encoding = ValueEncoding::Quantized(bits, 64);
      const auto spec = EncodedSpec(d, intrinsic, encoding);
      PartialAggregate node(spec), left(spec), right(spec);
      std::vector<testing::Update> updates;
      const std::vector<std::vector<float>> plain = RandomUpdates(9, d, 17 + static_cast<uint64_t>(bits));
      for (size_t c = 0; c < plain.size(); ++c) {
        updates.push_back(EncodedUpdate(Encode(encoding, plain[c], 100 + c)));
        if (intrinsic == Intrinsic::kFederatedWeightedMean) updates.back().Weight(0.5 + static_cast<double>(c));
        ASSERT_TRUE(IsOk(node.Accumulate(updates.back().view())));
        ASSERT_TRUE(IsOk((c < 4 ? left : right).Accumulate(updates.back().view())));
      }
      const std::vector<ReferenceField> reference = ReferenceReduce(*spec, testing::Views(updates));
      PartialAggregate root = ValueOrDie(PartialAggregate::Deserialize(spec, ValueOrDie(left.Serialize())));
      ASSERT_TRUE(IsOk(root.MergeWith(right)));
      const AggregateResult one = ValueOrDie(node.Report()), tree = ValueOrDie(root.Report());
      for (int64_t i = 0; i < d; ++i) {
        const auto j = static_cast<size_t>(i);
        const double expected = reference[0].values[j];
        const double tolerance = 1e-5 * (1 + std::abs(expected)) * 9;
        ASSERT_NEAR(one.fields[0].value.ValueAsDouble(j), expected, tolerance) << bits << " bits at " << i;
        ASSERT_NEAR(tree.fields[0].value.ValueAsDouble(j), expected, tolerance) << bits << " bits at " << i;
      }
    }
  }
}

// ---- Rotation -------------------------------------------------------------------------------

TEST(RotationTest, UnrotateUndoesRotateAndLeavesTheShortLastRun) {
  const ValueEncoding encoding = ValueEncoding::Quantized(8, 256, 64, 99);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> x(64 * 5 + 17);
  for (double& v : x) v = normal(rng);
  std::vector<double> y = x;
  Rotate(encoding, absl::MakeSpan(y));
  double before = 0, after = 0;
  for (size_t i = 0; i < 320; ++i) before += x[i] * x[i], after += y[i] * y[i];
  EXPECT_NEAR(after, before, 1e-9 * before);  // orthonormal: the norm is kept
  EXPECT_NE(y[0], x[0]);
  for (size_t i = 320; i < x.size(); ++i) EXPECT_EQ(y[i], x[i]) << "the short last run is not rotated";
  Unrotate(encoding, absl::MakeSpan(y));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], x[i], 1e-12) << i;
  // Another seed draws other signs.
  std::vector<double> other = x;
  Rotate(ValueEncoding::Quantized(8, 256, 64, 100), absl::MakeSpan(other));
  Rotate(encoding, absl::MakeSpan(x));
  EXPECT_NE(other, x);
}

TEST(RotationTest, ARotatedFieldsResultIsTheMeanOfItsUpdatesRotatedBack) {
  // The nodes add rotated values and rotate the result back once; the reference rotates
  // each decoded update back. Linear, so the two agree, in one node and across a tree.
  constexpr int64_t d = 4096 + 100;
  for (Intrinsic intrinsic : {Intrinsic::kFederatedSum, Intrinsic::kFederatedWeightedMean}) {
    const ValueEncoding encoding = ValueEncoding::Quantized(4, 256, 1024, 12345);
    const auto spec = EncodedSpec(d, intrinsic, encoding, {.float64_accumulation = true});
    PartialAggregate node(spec), left(spec), right(spec);
    std::vector<testing::Update> updates;
    const std::vector<std::vector<float>> plain = RandomUpdates(6, d, 8);
    for (size_t c = 0; c < plain.size(); ++c) {
      updates.push_back(EncodedUpdate(Encode(encoding, plain[c], 200 + c)));
      if (IsWeighted(intrinsic)) updates.back().Weight(1.0 + static_cast<double>(c));
      ASSERT_TRUE(IsOk(node.Accumulate(updates.back().view())));
      ASSERT_TRUE(IsOk((c % 2 == 0 ? left : right).Accumulate(updates.back().view())));
    }
    const std::vector<ReferenceField> reference = ReferenceReduce(*spec, testing::Views(updates));
    PartialAggregate root = ValueOrDie(PartialAggregate::Deserialize(spec, ValueOrDie(left.Serialize())));
    ASSERT_TRUE(IsOk(root.MergeWith(right)));
    const AggregateResult one = ValueOrDie(node.Report()), tree = ValueOrDie(root.Report());
    double error = 0, norm = 0;
    for (int64_t i = 0; i < d; ++i) {
      const auto j = static_cast<size_t>(i);
      ASSERT_NEAR(one.fields[0].value.ValueAsDouble(j), reference[0].values[j], 1e-9 * (1 + std::abs(reference[0].values[j])));
      ASSERT_NEAR(tree.fields[0].value.ValueAsDouble(j), reference[0].values[j], 1e-9 * (1 + std::abs(reference[0].values[j])));
      // Against the plain values: the quantization's error, no more.
      double exact = 0, weights = 0;
      for (size_t c = 0; c < plain.size(); ++c) {
        const double w = IsWeighted(intrinsic) ? 1.0 + static_cast<double>(c) : 1.0;
        exact += w * plain[c][j];
        weights += w;
      }
      if (IsWeighted(intrinsic)) exact /= weights;
      error += (one.fields[0].value.ValueAsDouble(j) - exact) * (one.fields[0].value.ValueAsDouble(j) - exact);
      norm += exact * exact;
    }
    EXPECT_LT(error / norm, 0.05) << IntrinsicName(intrinsic);
  }
}

// Heavy-tailed values lose less to quantization once rotated: the rotated run's entries
// are near Gaussian, so a block's largest |value| is a few times its typical one.
TEST(RotationTest, RotationLowersTheErrorOfHeavyTailedUpdates) {
  constexpr int64_t d = 1 << 16;
  std::mt19937_64 rng(21);
  std::student_t_distribution<double> heavy(4);
  std::lognormal_distribution<double> chunk_scale(0, 1);
  std::vector<float> x(d);
  for (int64_t chunk = 0; chunk < d; chunk += 4096) {
    const double s = chunk_scale(rng);
    for (int64_t i = chunk; i < chunk + 4096; ++i) x[static_cast<size_t>(i)] = static_cast<float>(s * heavy(rng));
  }
  const auto nmse = [&](const ValueEncoding& encoding) {
    std::vector<double> decoded = Decode(encoding, Encode(encoding, x, 5), d);
    Unrotate(encoding, absl::MakeSpan(decoded));
    double error = 0, norm = 0;
    for (int64_t i = 0; i < d; ++i) {
      const double e = decoded[static_cast<size_t>(i)] - x[static_cast<size_t>(i)];
      error += e * e;
      norm += static_cast<double>(x[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
    }
    return error / norm;
  };
  for (int bits : {8, 4}) {
    const double plain = nmse(ValueEncoding::Quantized(bits)), rotated = nmse(ValueEncoding::Quantized(bits, 256, 4096, 7));
    EXPECT_LT(rotated, plain / 2) << bits << " bits: " << rotated << " rotated against " << plain;
  }
}

// ---- Refusals ---------------------------------------------------------------------------

TEST(ValueEncodingTest, SpecsThatCannotTakeAnEncodingAreRefused) {
  const auto create = [](DType dtype, Intrinsic intrinsic, const ValueEncoding& encoding,
                         ReductionOptions options = {}) {
    return ReductionSpec::Create(T(dtype, {16}), {FieldIntrinsic{intrinsic, false, encoding}}, options).status();
  };
  const ValueEncoding q8 = ValueEncoding::Quantized(8), d16 = ValueEncoding::Discretized(16, 0.01);
  EXPECT_TRUE(StatusIs(create(DType::kFloat32, Intrinsic::kFederatedMax, q8), absl::StatusCode::kInvalidArgument,
                       "maximum or minimum"));
  EXPECT_TRUE(StatusIs(create(DType::kFloat32, Intrinsic::kFederatedMin, d16), absl::StatusCode::kInvalidArgument, ""));
  EXPECT_TRUE(StatusIs(create(DType::kInt32, Intrinsic::kFederatedSum, q8), absl::StatusCode::kInvalidArgument,
                       "floating-point"));
  EXPECT_TRUE(StatusIs(create(DType::kFloat32, Intrinsic::kFederatedWeightedMean, d16),
                       absl::StatusCode::kInvalidArgument, "weight"));
  EXPECT_TRUE(StatusIs(create(DType::kFloat32, Intrinsic::kFederatedSum, q8, {.deterministic = true}),
                       absl::StatusCode::kInvalidArgument, "deterministic"));
  EXPECT_TRUE(StatusIs(create(DType::kFloat32, Intrinsic::kSparseWeightedMean, d16),
                       absl::StatusCode::kInvalidArgument, "weight"));
  EXPECT_TRUE(StatusIs(create(DType::kFloat32, Intrinsic::kFederatedSum, ValueEncoding::Quantized(3)),
                       absl::StatusCode::kInvalidArgument, ""));
  // What may: the linear intrinsics, dense and sparse; a discretized field in a deterministic aggregation.
  EXPECT_TRUE(IsOk(create(DType::kFloat64, Intrinsic::kFederatedWeightedMean, q8)));
  for (Intrinsic sparse : {Intrinsic::kSparseSum, Intrinsic::kSparseSumSparse, Intrinsic::kSparseMean,
                           Intrinsic::kSparseWeightedMean, Intrinsic::kRowSparseSum, Intrinsic::kRowSparseMean}) {
    EXPECT_TRUE(IsOk(create(DType::kFloat32, sparse, q8))) << IntrinsicName(sparse);
    if (!IsWeighted(sparse)) {
      EXPECT_TRUE(IsOk(create(DType::kFloat16, sparse, d16))) << IntrinsicName(sparse);
    }
  }
  EXPECT_TRUE(IsOk(create(DType::kFloat32, Intrinsic::kSparseSum, d16, {.deterministic = true})));
  EXPECT_TRUE(IsOk(create(DType::kBFloat16, Intrinsic::kFederatedMean, q8)));
  EXPECT_TRUE(IsOk(create(DType::kFloat32, Intrinsic::kFederatedSum, d16, {.deterministic = true})));
  // Two specs that differ only in their encoding cannot merge.
  EXPECT_NE(EncodedSpec(16, Intrinsic::kFederatedSum, q8)->canonical(),
            EncodedSpec(16, Intrinsic::kFederatedSum, ValueEncoding::Quantized(4))->canonical());
}

TEST(ValueEncodingTest, BadSectionsAreRefusedAndChangeNothing) {
  constexpr int64_t d = 600;
  const ValueEncoding encoding = ValueEncoding::Quantized(4);
  const auto spec = EncodedSpec(d, Intrinsic::kFederatedMean, encoding, {.require_finite = true});
  PartialAggregate partial(spec);
  const std::vector<std::byte> good = Encode(encoding, RandomUpdates(1, d, 1)[0], 9);
  ASSERT_TRUE(IsOk(partial.Accumulate(EncodedUpdate(good).view())));
  const auto before = TakeSnapshot(partial);
  const auto with_scale = [&](int64_t block, float scale) {
    std::vector<std::byte> bytes = good;
    std::memcpy(bytes.data() + block * 4, &scale, 4);
    return bytes;
  };
  const std::vector<std::pair<std::string, std::vector<std::byte>>> bad = {
      {"truncated", std::vector<std::byte>(good.begin(), good.end() - 1)},
      {"too long", [&] { auto b = good; b.push_back(std::byte{0}); return b; }()},
      {"plain float32 values", std::vector<std::byte>(d * 4)},
      {"a NaN scale", with_scale(1, NAN)},
      {"an infinite scale", with_scale(2, INFINITY)},
      {"a negative scale", with_scale(0, -1.0f)},
  };
  for (const auto& [what, bytes] : bad) {
    EXPECT_TRUE(StatusIs(partial.Accumulate(EncodedUpdate(bytes).view()), absl::StatusCode::kInvalidArgument, "")) << what;
    EXPECT_TRUE(Unchanged(partial, before)) << what;
  }
  EXPECT_TRUE(StatusIs(partial.Accumulate(EncodedUpdate(with_scale(1, NAN)).view()),
                       absl::StatusCode::kInvalidArgument, "block 1 has scale nan"));
  EXPECT_TRUE(StatusIs(partial.Accumulate(EncodedUpdate(std::vector<std::byte>(d * 4)).view()),
                       absl::StatusCode::kInvalidArgument, "quantized:4 takes 312 bytes"));
  // A section whose scales would be read misaligned (a library caller's buffer; a server's
  // are aligned) is refused, not read.
  std::vector<std::byte> shifted(good.size() + 2);
  std::copy(good.begin(), good.end(), shifted.begin() + 2);
  UpdateView misaligned{{FieldValue{Encoding::kDense, DType::kFloat32, {}, absl::MakeConstSpan(shifted).subspan(2)}},
                        std::nullopt};
  EXPECT_TRUE(StatusIs(partial.Accumulate(misaligned), absl::StatusCode::kInvalidArgument, "not aligned to 4 bytes"));
  EXPECT_TRUE(Unchanged(partial, before));
}

// A sparse field's encoded section holds its entries' values (one per index; a row's per
// row id): sized by the indices, refused with the values' count when it is not, with an
// index out of range, or with a bad scale; nothing counted.
TEST(ValueEncodingTest, BadSparseSectionsAreRefusedAndChangeNothing) {
  const ValueEncoding encoding = ValueEncoding::Quantized(8, 8);
  const auto spec = MakeSpec(T(DType::kFloat32, {50, 2}), {FieldIntrinsic{Intrinsic::kRowSparseMean, true, encoding}});
  PartialAggregate partial(spec);
  const auto update = [&](std::vector<int64_t> rows, std::vector<std::byte> bytes) {
    testing::Update u;
    u.Raw(Encoding::kRowSparse, DType::kFloat32, std::move(rows), std::move(bytes));
    return u;
  };
  const std::vector<std::byte> three_rows = Encode(encoding, {1, -2, 3, 0.5f, 0, 7}, 4);  // a scale, 6 codes
  ASSERT_EQ(three_rows.size(), 10u);
  ASSERT_TRUE(IsOk(partial.Accumulate(update({4, 9, 4}, three_rows).view())));
  const auto before = TakeSnapshot(partial);
  EXPECT_TRUE(StatusIs(partial.Accumulate(update({4, 9}, three_rows).view()), absl::StatusCode::kInvalidArgument,
                       "its encoding quantized:8/8 takes 8 bytes for 4 values"));
  EXPECT_TRUE(StatusIs(partial.Accumulate(update({4, 9, 50}, three_rows).view()), absl::StatusCode::kInvalidArgument,
                       "row id 50 at position 2 is out of range [0, 50)"));
  std::vector<std::byte> negative = three_rows;
  const float minus_one = -1;
  std::memcpy(negative.data(), &minus_one, 4);
  EXPECT_TRUE(StatusIs(partial.Accumulate(update({4, 9, 4}, negative).view()), absl::StatusCode::kInvalidArgument,
                       "block 0 has scale -1"));
  EXPECT_TRUE(Unchanged(partial, before));
}

// A batch whose decoded values exceed the decoding accumulator's bound goes to the backend
// in runs (a single update larger than the bound alone), and adds up as one batch would.
TEST(ValueEncodingTest, SparseValuesAreDecodedInBoundedRuns) {
  const ValueEncoding encoding = ValueEncoding::Discretized(8, 0.5);
  const auto spec = MakeSpec(T(DType::kFloat32, {1000}), {FieldIntrinsic{Intrinsic::kSparseMean, true, encoding}});
  const FieldSpec& field = spec->fields()[0];
  std::mt19937_64 random(7);
  std::vector<testing::Update> updates(7);
  for (size_t u = 0; u < updates.size(); ++u) {
    const size_t entries = 20 + 30 * u;  // 160 to 1,440 bytes decoded (int64 steps)
    std::vector<int64_t> indices(entries);
    std::vector<std::byte> steps(entries);
    for (size_t k = 0; k < entries; ++k) {
      indices[k] = static_cast<int64_t>(random() % 1000);
      steps[k] = static_cast<std::byte>(random());
    }
    updates[u].Raw(Encoding::kSparse, DType::kFloat32, std::move(indices), std::move(steps));
  }
  const std::vector<UpdateView> views = testing::Views(updates);
  std::vector<const FieldValue*> values;
  for (const UpdateView& view : views) values.push_back(&view.fields[0]);
  const std::vector<double> weights(values.size(), 1.0);
  DecodingFieldAccumulator whole(field, CpuAccumulatorFactory::Default());
  DecodingFieldAccumulator in_runs(field, CpuAccumulatorFactory::Default(), /*max_decoded_bytes=*/1000);
  ASSERT_TRUE(IsOk(whole.AccumulateBatch(values, weights)));
  ASSERT_TRUE(IsOk(in_runs.AccumulateBatch(values, weights)));
  const ReportedField a = ValueOrDie(whole.Report(7, 7)), b = ValueOrDie(in_runs.Report(7, 7));
  EXPECT_TRUE(SameTensor(a.value, b.value));
  EXPECT_EQ(a.counts, b.counts);
  // Exact integer sums; the float32 result rounds once.
  EXPECT_LE(MaxRelativeError(ReferenceReduce(*spec, views), AggregateResult{.fields = {a}}), 1.2e-7);
}

}  // namespace
}  // namespace fedagg
