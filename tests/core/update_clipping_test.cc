// Update clipping (differential privacy): every float dtype, dense, sparse with repeated
// indices and row-sparse, a field's own bound, discretized updates clipped within the
// rounding's slack and refused beyond it; and the specs differential privacy refuses.
#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "service/core/update_buffer.h"
#include "service/core/update_clipping.h"
#include "service/core/value_encoder.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using testing::FromDouble;
using testing::IsOk;
using testing::StatusIs;
using testing::ValueOrDie;

std::shared_ptr<const ReductionSpec> PrivateSpec(ValueType type, std::vector<FieldIntrinsic> intrinsics,
                                                 double clip_norm) {
  ReductionOptions options;
  options.privacy = PrivacySpec{clip_norm, 1.0, 10, std::nullopt};
  return ValueOrDie(ReductionSpec::Create(std::move(type), std::move(intrinsics), options));
}

// An update of one field with `values` (and sparse `indices`), validated.
template <typename T>
UpdateBuffer MakeUpdate(const ReductionSpec& spec, const std::vector<double>& values,
                        const std::vector<int64_t>& indices = {}) {
  const bool dense = spec.fields()[0].encoding == Encoding::kDense;
  UpdateBuffer update = ValueOrDie(UpdateBuffer::Create(
      spec, {dense ? 0 : static_cast<int64_t>(indices.size())}, std::nullopt, 1 << 24));
  absl::Span<std::byte> out = update.section(0, UpdateBuffer::Section::kValues);
  EXPECT_EQ(out.size(), values.size() * sizeof(T));
  for (size_t i = 0; i < values.size(); ++i) {
    const T value = FromDouble<T>(values[i]);
    std::memcpy(out.data() + i * sizeof(T), &value, sizeof(T));
  }
  if (!dense) {
    std::memcpy(update.section(0, UpdateBuffer::Section::kIndices).data(), indices.data(),
                indices.size() * sizeof(int64_t));
  }
  EXPECT_TRUE(IsOk(update.Validate(spec)));
  return update;
}

template <typename T>
void ExpectClippedDense(DType dtype) {
  auto spec = PrivateSpec(ValueType::Tensor(dtype, {4}), {{Intrinsic::kFederatedSum}}, 1.0);
  UpdateBuffer big = MakeUpdate<T>(*spec, {3, 4, 0, 0});  // norm 5
  ASSERT_TRUE(IsOk(big.Clip(*spec)));
  EXPECT_TRUE(big.view().clipped);
  const double norm = UpdateFieldNorm(spec->fields()[0], big.view().fields[0]);
  EXPECT_LE(norm, 1.0) << DTypeName(dtype);
  EXPECT_GT(norm, 1.0 - 1.0 / 64) << DTypeName(dtype);  // bfloat16's rounding, at most

  UpdateBuffer small = MakeUpdate<T>(*spec, {0.25, 0.5, 0, 0});
  ASSERT_TRUE(IsOk(small.Clip(*spec)));
  EXPECT_FALSE(small.view().clipped);
  EXPECT_DOUBLE_EQ(UpdateFieldNorm(spec->fields()[0], small.view().fields[0]), std::sqrt(0.3125));
}

TEST(UpdateClippingTest, DenseUpdatesOfEveryFloatDTypeAreScaledToTheBound) {
  ExpectClippedDense<float>(DType::kFloat32);
  ExpectClippedDense<double>(DType::kFloat64);
  ExpectClippedDense<Float16>(DType::kFloat16);
  ExpectClippedDense<BFloat16>(DType::kBFloat16);
}

TEST(UpdateClippingTest, ASparseUpdatesRepeatedIndicesAreSummedBeforeTheNorm) {
  // Entries (2, 0.6) twice: the update adds 1.2 at index 2, norm 1.2 > 1 (the entries'
  // own norm, 0.85, would not clip it).
  auto spec = PrivateSpec(ValueType::Tensor(DType::kFloat32, {8}), {{Intrinsic::kSparseSum}}, 1.0);
  for (const std::vector<int64_t>& indices : {std::vector<int64_t>{2, 2}, std::vector<int64_t>{2, 5, 2}}) {
    std::vector<double> values(indices.size(), 0.6);
    if (indices.size() == 3) values[1] = 0;  // unsorted indices, the repeat not adjacent
    UpdateBuffer update = MakeUpdate<float>(*spec, values, indices);
    EXPECT_NEAR(UpdateFieldNorm(spec->fields()[0], update.view().fields[0]), 1.2, 1e-6);
    ASSERT_TRUE(IsOk(update.Clip(*spec)));
    EXPECT_TRUE(update.view().clipped);
    const double norm = UpdateFieldNorm(spec->fields()[0], update.view().fields[0]);
    EXPECT_LE(norm, 1.0);
    EXPECT_GT(norm, 1.0 - 1e-6);
  }
}

TEST(UpdateClippingTest, RowSparseRowsOfOneIdAreSummed) {
  auto spec = PrivateSpec(ValueType::Tensor(DType::kFloat64, {4, 2}), {{Intrinsic::kRowSparseMean}}, 2.0);
  EXPECT_EQ(spec->fields()[0].intrinsic, Intrinsic::kRowSparseSum);
  EXPECT_TRUE(spec->fields()[0].private_mean);
  UpdateBuffer update = MakeUpdate<double>(*spec, {1, 1, 1, 1, 3, 0}, {1, 1, 3});  // row 1 adds (2, 2)
  EXPECT_NEAR(UpdateFieldNorm(spec->fields()[0], update.view().fields[0]), std::sqrt(8.0 + 9.0), 1e-12);
  ASSERT_TRUE(IsOk(update.Clip(*spec)));
  EXPECT_LE(UpdateFieldNorm(spec->fields()[0], update.view().fields[0]), 2.0);
}

TEST(UpdateClippingTest, AFieldsOwnBoundComesFirstAndOnlyTheWholeBoundCounts) {
  // Field a (own bound 0.5) holds norm 1, field b norm 0.6: a is scaled to 0.5, and the
  // whole update's norm, sqrt(0.25 + 0.36) < 1, leaves it counted as not clipped.
  FieldIntrinsic a{Intrinsic::kFederatedSum};
  a.clip_norm = 0.5;
  auto spec = PrivateSpec(ValueType::Struct({{"a", testing::T(DType::kFloat64, {2})}, {"b", testing::T(DType::kFloat64, {1})}}),
                          {a, {Intrinsic::kFederatedSum}}, 1.0);
  UpdateBuffer update = ValueOrDie(UpdateBuffer::Create(*spec, {0, 0}, std::nullopt, 1 << 20));
  const double av[2] = {0.6, 0.8}, bv[1] = {0.6};
  std::memcpy(update.section(0, UpdateBuffer::Section::kValues).data(), av, sizeof(av));
  std::memcpy(update.section(1, UpdateBuffer::Section::kValues).data(), bv, sizeof(bv));
  ASSERT_TRUE(IsOk(update.Validate(*spec)));
  ASSERT_TRUE(IsOk(update.Clip(*spec)));
  EXPECT_FALSE(update.view().clipped);
  EXPECT_NEAR(UpdateFieldNorm(spec->fields()[0], update.view().fields[0]), 0.5, 1e-6);
  EXPECT_DOUBLE_EQ(UpdateFieldNorm(spec->fields()[1], update.view().fields[1]), 0.6);
}

TEST(UpdateClippingTest, DiscretizedUpdatesAreClippedWithinTheSlackAndRefusedBeyond) {
  // Steps of 0.1, 16 bits, 4 coordinates: the slack is 0.1 * sqrt(4) = 0.2 over C = 1.
  FieldIntrinsic field{Intrinsic::kFederatedSum};
  field.value_encoding = ValueEncoding::Discretized(16, 0.1);
  auto spec = PrivateSpec(ValueType::Tensor(DType::kFloat32, {4}), {field}, 1.0);
  const auto update_of = [&](std::vector<int16_t> steps) {
    UpdateBuffer update = ValueOrDie(UpdateBuffer::Create(*spec, {0}, std::nullopt, 1 << 20));
    std::memcpy(update.section(0, UpdateBuffer::Section::kValues).data(), steps.data(), steps.size() * 2);
    EXPECT_TRUE(IsOk(update.Validate(*spec)));
    return update;
  };
  UpdateBuffer within = update_of({6, 8, 5, 0});  // norm sqrt(1.25) = 1.118 <= 1.2
  ASSERT_TRUE(IsOk(within.Clip(*spec)));
  EXPECT_TRUE(within.view().clipped);
  EXPECT_LE(UpdateFieldNorm(spec->fields()[0], within.view().fields[0]), 1.0);
  UpdateBuffer beyond = update_of({9, 8, 0, 0});  // norm 1.204 > 1.2
  EXPECT_TRUE(StatusIs(beyond.Clip(*spec), absl::StatusCode::kInvalidArgument, "before discretizing"));
}

TEST(UpdateClippingTest, QuantizedUpdatesAreClippedThroughTheirBlockScales) {
  // 8 bits in blocks of 64, plain and rotated (runs of 256: the rotation keeps the norm):
  // the decoded update's norm is the bound once clipped.
  for (const ValueEncoding& encoding : {ValueEncoding::Quantized(8, 64), ValueEncoding::Quantized(8, 64, 256, 99)}) {
    FieldIntrinsic field{Intrinsic::kFederatedMean};
    field.value_encoding = encoding;
    auto spec = PrivateSpec(ValueType::Tensor(DType::kFloat32, {1000}), {field}, 2.0);
    std::vector<float> values(1000);
    for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i));  // norm about 22
    UpdateBuffer update = ValueOrDie(UpdateBuffer::Create(*spec, {0}, std::nullopt, 1 << 20));
    ASSERT_TRUE(IsOk(EncodeValues(encoding, DType::kFloat32, AsBytes(absl::MakeConstSpan(values)), 5,
                                  update.section(0, UpdateBuffer::Section::kValues))));
    ASSERT_TRUE(IsOk(update.Validate(*spec)));
    EXPECT_GT(UpdateFieldNorm(spec->fields()[0], update.view().fields[0]), 20.0);
    ASSERT_TRUE(IsOk(update.Clip(*spec)));
    EXPECT_TRUE(update.view().clipped);
    const double norm = UpdateFieldNorm(spec->fields()[0], update.view().fields[0]);
    EXPECT_LE(norm, 2.0) << encoding.ToString();
    EXPECT_GT(norm, 2.0 * (1 - 1e-6)) << encoding.ToString();
  }
}

TEST(UpdateClippingTest, ANonFiniteUpdateIsRefused) {
  auto spec = PrivateSpec(ValueType::Tensor(DType::kFloat32, {2}), {{Intrinsic::kFederatedSum}}, 1.0);
  UpdateBuffer update = MakeUpdate<float>(*spec, {INFINITY, 0});
  EXPECT_TRUE(StatusIs(update.Clip(*spec), absl::StatusCode::kInvalidArgument, "not finite"));
}

TEST(UpdateClippingTest, SpecsDifferentialPrivacyCannotTakeAreRefused) {
  const auto refused = [](PrivacySpec privacy, FieldIntrinsic intrinsic, DType dtype, absl::string_view words) {
    ReductionOptions options;
    options.privacy = privacy;
    return StatusIs(ReductionSpec::Create(ValueType::Tensor(dtype, {4}), {intrinsic}, options).status(),
                    absl::StatusCode::kInvalidArgument, words);
  };
  const PrivacySpec good{1.0, 1.0, 10, std::nullopt};
  EXPECT_TRUE(refused({0.0, 1.0, 10, std::nullopt}, {Intrinsic::kFederatedSum}, DType::kFloat32, "clip_norm"));
  EXPECT_TRUE(refused({1.0, -1.0, 10, std::nullopt}, {Intrinsic::kFederatedSum}, DType::kFloat32, "noise_multiplier"));
  EXPECT_TRUE(refused({1.0, 1.0, 10, AdaptiveClipping{1.0, 0.2, 1.0}}, {Intrinsic::kFederatedSum}, DType::kFloat32,
                      "target_quantile"));
  EXPECT_TRUE(refused({1.0, 1.0, 10, AdaptiveClipping{0.0, 0.2, 1.0}}, {Intrinsic::kFederatedSum}, DType::kFloat32,
                      "target_quantile"));
  EXPECT_TRUE(refused({1.0, 1.0, 10, AdaptiveClipping{0.5, 0.2, 0.4}}, {Intrinsic::kFederatedSum}, DType::kFloat32,
                      "count_stddev"));
  EXPECT_TRUE(refused({1.0, 1.0, 0, std::nullopt}, {Intrinsic::kFederatedMean}, DType::kFloat32, "expected_clients"));
  EXPECT_TRUE(refused(good, {Intrinsic::kFederatedSum}, DType::kInt32, "floating-point"));
  EXPECT_TRUE(refused(good, {Intrinsic::kFederatedWeightedMean}, DType::kFloat32, "weighted mean"));
  EXPECT_TRUE(refused(good, {Intrinsic::kFederatedMax}, DType::kFloat32, "maximum"));
  EXPECT_TRUE(refused(good, {Intrinsic::kSparseSumSparse}, DType::kFloat32, "sparse_sum"));
  EXPECT_TRUE(refused(good, {Intrinsic::kSparseSum, true}, DType::kFloat32, "counts"));
}

}  // namespace
}  // namespace fedagg
