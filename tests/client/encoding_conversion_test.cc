// ToDeclaredEncoding and ConvertedUpdate: every conversion between the dense, sparse COO
// and row-sparse encodings (the values, the order of repeated additions, the dtypes'
// arithmetic), the refusals of malformed input with the server's wording, and that fields
// already in their encoding are sent from the caller's memory.
#include "client_stub/encoding_conversion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "service/core/half_float.h"
#include "service/core/update_clipping.h"
#include "service/core/update_validator.h"

namespace fedagg {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The one field of a spec of type dtype[shape] reduced with `intrinsic`.
FieldSpec Field(DType dtype, std::vector<int64_t> shape, Intrinsic intrinsic) {
  absl::StatusOr<std::shared_ptr<const ReductionSpec>> spec =
      ReductionSpec::Create(ValueType::Tensor(dtype, std::move(shape)), {{intrinsic}});
  EXPECT_TRUE(spec.ok()) << spec.status();
  return (*spec)->fields()[0];
}

template <typename T>
std::vector<T> ValuesOf(const EncodedField& field) {
  std::vector<T> values(field.values.bytes.size() / sizeof(T));
  std::memcpy(values.data(), field.values.bytes.data(), field.values.bytes.size());
  return values;
}

EncodedField Converted(const FieldSpec& field, const FieldValue& input) {
  absl::StatusOr<EncodedField> out = ToDeclaredEncoding(field, input);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  EXPECT_EQ(out->encoding, field.encoding);
  EXPECT_EQ(out->values.dtype, input.dtype);
  EXPECT_TRUE(ValidateField(*ReductionSpec::Create(ValueType::Tensor(field.type.dtype, field.type.shape),
                                                   {{field.intrinsic}}).value(),
                            field, out->view()).ok());
  return *std::move(out);
}

TEST(EncodingConversionTest, DenseForASparseFieldSendsItsNonZeroElements) {
  const std::vector<float> dense = {0.0f, 1.5f, -0.0f, 0.0f, NAN, 2.0f};
  const EncodedField out = Converted(Field(DType::kFloat32, {6}, Intrinsic::kSparseMean),
                                     FieldValue::Dense<float>(dense));
  EXPECT_THAT(out.indices, ElementsAre(1, 4, 5));
  const std::vector<float> values = ValuesOf<float>(out);
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values[0], 1.5f);
  EXPECT_TRUE(std::isnan(values[1]));  // NaN is not zero: it is sent, for validation to judge
  EXPECT_EQ(values[2], 2.0f);
}

TEST(EncodingConversionTest, DenseForARowSparseFieldSendsTheRowsHoldingANonZero) {
  const std::vector<float> dense = {0, 0, 0, 3, 0, 0, 1, 0};
  const EncodedField out = Converted(Field(DType::kFloat32, {4, 2}, Intrinsic::kRowSparseSum),
                                     FieldValue::Dense<float>(dense));
  EXPECT_THAT(out.indices, ElementsAre(1, 3));
  EXPECT_THAT(ValuesOf<float>(out), ElementsAre(0, 3, 1, 0));
}

TEST(EncodingConversionTest, SparseForADenseFieldAddsRepeatsInTheOrderGiven) {
  // In float32, (0 + 1e8 + 1) − 1e8 is 0 and (0 + 1e8 − 1e8) + 1 is 1: the order shows.
  const std::vector<int64_t> indices = {3, 0, 3, 3};
  const std::vector<float> values = {1e8f, 2.0f, 1.0f, -1e8f};
  const EncodedField out = Converted(Field(DType::kFloat32, {2, 2}, Intrinsic::kFederatedSum),
                                     FieldValue::Sparse<float>(indices, values));
  EXPECT_TRUE(out.indices.empty());
  EXPECT_THAT(ValuesOf<float>(out), ElementsAre(2.0f, 0.0f, 0.0f, 0.0f));
}

TEST(EncodingConversionTest, RowSparseForADenseFieldAddsItsRows) {
  const std::vector<int64_t> rows = {2, 0, 2};
  const std::vector<int32_t> values = {1, 2, 3, 4, 10, 20};
  const EncodedField out = Converted(Field(DType::kInt32, {3, 2}, Intrinsic::kFederatedSum),
                                     FieldValue::RowSparse<int32_t>(rows, values));
  EXPECT_THAT(ValuesOf<int32_t>(out), ElementsAre(3, 4, 0, 0, 11, 22));
}

TEST(EncodingConversionTest, RowSparseForASparseFieldSendsEveryElementOfItsRows) {
  const std::vector<int64_t> rows = {2, 1};
  const std::vector<float> values = {0, 5, 7, 0};
  const EncodedField out = Converted(Field(DType::kFloat32, {3, 2}, Intrinsic::kSparseMean),
                                     FieldValue::RowSparse<float>(rows, values));
  EXPECT_THAT(out.indices, ElementsAre(4, 5, 2, 3));  // explicit zeros are touched
  EXPECT_THAT(ValuesOf<float>(out), ElementsAre(0, 5, 7, 0));
}

TEST(EncodingConversionTest, SparseForARowSparseFieldSendsItsRowsAscending) {
  const std::vector<int64_t> indices = {5, 0, 4, 5};
  const std::vector<double> values = {1, 2, 3, 4};
  const EncodedField out = Converted(Field(DType::kFloat64, {3, 2}, Intrinsic::kRowSparseMean),
                                     FieldValue::Sparse<double>(indices, values));
  EXPECT_THAT(out.indices, ElementsAre(0, 2));
  EXPECT_THAT(ValuesOf<double>(out), ElementsAre(2, 0, 3, 5));
}

TEST(EncodingConversionTest, AdditionsAreInTheCallersDtype) {
  const std::vector<int64_t> twice = {0, 0};
  const std::vector<int32_t> ints = {std::numeric_limits<int32_t>::max(), 1};
  EXPECT_THAT(ValuesOf<int32_t>(Converted(Field(DType::kInt32, {1}, Intrinsic::kFederatedSum),
                                          FieldValue::Sparse<int32_t>(twice, ints))),
              ElementsAre(std::numeric_limits<int32_t>::min()));  // wraps, as int32 does
  // 2048 + 1 is not a float16: the sum rounds to even, 2048.
  const std::vector<Float16> halves = {ToFloat16(2048.0f), ToFloat16(1.0f)};
  const std::vector<Float16> sum = ValuesOf<Float16>(
      Converted(Field(DType::kFloat16, {1}, Intrinsic::kFederatedSum), FieldValue::Sparse<Float16>(twice, halves)));
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_EQ(ToFloat(sum[0]), 2048.0f);
  // A float16 zero is not sent for a sparse field, −0 included.
  const std::vector<Float16> dense = {ToFloat16(-0.0f), ToFloat16(0.5f)};
  EXPECT_THAT(Converted(Field(DType::kFloat16, {2}, Intrinsic::kSparseSum), FieldValue::Dense<Float16>(dense)).indices,
              ElementsAre(1));
}

TEST(EncodingConversionTest, InputAlreadyInTheFieldsEncodingIsCopiedAsItIs) {
  const std::vector<float> dense = {-0.0f, 1.0f};
  const EncodedField out =
      Converted(Field(DType::kFloat32, {2}, Intrinsic::kFederatedSum), FieldValue::Dense<float>(dense));
  ASSERT_EQ(out.values.bytes.size(), sizeof(float) * 2);
  EXPECT_EQ(std::memcmp(out.values.bytes.data(), dense.data(), out.values.bytes.size()), 0);  // −0 kept
}

TEST(EncodingConversionTest, MalformedInputIsRefusedAsTheServerWordsIt) {
  auto refusal = [](const FieldSpec& field, const FieldValue& input) {
    absl::StatusOr<EncodedField> out = ToDeclaredEncoding(field, input);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    return std::string(out.status().message());
  };
  const FieldSpec dense = Field(DType::kFloat32, {6}, Intrinsic::kFederatedSum);
  const std::vector<int64_t> indices = {1, 6};
  const std::vector<float> two = {1, 2};
  const std::vector<float> three = {1, 2, 3};
  EXPECT_EQ(refusal(dense, FieldValue::Sparse<float>(indices, two)),
            "field 'value' (float32[6], federated_sum): index 6 at position 1 is out of range [0, 6)");
  EXPECT_THAT(refusal(dense, FieldValue::Sparse<float>(indices, three)),
              HasSubstr("2 indices but 3 values; send one value per index"));
  const FieldSpec sparse = Field(DType::kFloat32, {2, 2}, Intrinsic::kSparseSum);
  EXPECT_THAT(refusal(sparse, FieldValue::Dense<float>(three)), HasSubstr("a dense value of 3 elements; the field has 4"));
  EXPECT_THAT(refusal(sparse, FieldValue::RowSparse<float>(indices, two)),
              HasSubstr("2 row ids need as many rows of 2 elements (4 values), got 2 values"));
  const std::vector<int64_t> row_two = {2};
  EXPECT_THAT(refusal(sparse, FieldValue::RowSparse<float>(row_two, two)),
              HasSubstr("row id 2 at position 0 is out of range [0, 2)"));
  const FieldSpec scalar = Field(DType::kFloat32, {}, Intrinsic::kSparseSum);
  const std::vector<int64_t> row_zero = {0};
  const std::vector<float> one = {1};
  EXPECT_THAT(refusal(scalar, FieldValue::RowSparse<float>(row_zero, one)), HasSubstr("a scalar field has no rows"));
}

TEST(EncodingConversionTest, AnUpdateConvertsOnlyTheFieldsNotInTheirEncoding) {
  const std::shared_ptr<const ReductionSpec> spec =
      ReductionSpec::Create(ValueType::Struct({{"w", ValueType::Tensor(DType::kFloat32, {4})},
                                               {"ids", ValueType::Tensor(DType::kFloat32, {6})},
                                               {"emb", ValueType::Tensor(DType::kFloat32, {3, 2})}}),
                            {{Intrinsic::kFederatedSum}, {Intrinsic::kSparseSum}, {Intrinsic::kRowSparseSum}})
          .value();
  const std::vector<int64_t> w_indices = {2};
  const std::vector<float> w_values = {7};
  const std::vector<float> ids_dense = {0, 0, 0, 4, 0, 0};
  const std::vector<int64_t> emb_rows = {1};
  const std::vector<float> emb_values = {8, 9};
  const UpdateView update{{FieldValue::Sparse<float>(w_indices, w_values), FieldValue::Dense<float>(ids_dense),
                           FieldValue::RowSparse<float>(emb_rows, emb_values)},
                          std::nullopt};
  absl::StatusOr<ConvertedUpdate> converted = ConvertedUpdate::Of(*spec, update);
  ASSERT_TRUE(converted.ok()) << converted.status();
  const ConvertedUpdate moved = *std::move(converted);  // its views survive a move
  const UpdateView& view = moved.view();
  ASSERT_TRUE(ValidateUpdate(*spec, view).ok()) << ValidateUpdate(*spec, view);
  EXPECT_EQ(view.fields[0].encoding, Encoding::kDense);
  EXPECT_EQ(reinterpret_cast<const float*>(view.fields[0].values.data())[2], 7.0f);
  EXPECT_THAT(std::vector<int64_t>(view.fields[1].indices.begin(), view.fields[1].indices.end()), ElementsAre(3));
  // Already row-sparse: sent from the caller's arrays, not copied.
  EXPECT_EQ(view.fields[2].indices.data(), emb_rows.data());
  EXPECT_EQ(view.fields[2].values.data(), reinterpret_cast<const std::byte*>(emb_values.data()));
}

// A sparse field with a value encoding: a dense input is made COO first, then its values
// (only they) written in the encoding; the indices stay exact; the same seed gives the
// same bytes, and the server's validator takes them.
TEST(EncodingConversionTest, SparseFieldsSendTheirValuesEncodedAndTheirIndicesExact) {
  const std::shared_ptr<const ReductionSpec> spec =
      ReductionSpec::Create(ValueType::Struct({{"ids", ValueType::Tensor(DType::kFloat32, {6})},
                                               {"emb", ValueType::Tensor(DType::kFloat64, {3, 2})}}),
                            {FieldIntrinsic{Intrinsic::kSparseSum, false, ValueEncoding::Quantized(8, 8)},
                             FieldIntrinsic{Intrinsic::kRowSparseMean, false, ValueEncoding::Discretized(16, 0.5)}})
          .value();
  const std::vector<float> ids_dense = {0, 1.5f, 0, -4, 0, 0};
  const std::vector<int64_t> emb_rows = {2, 0};
  const std::vector<double> emb_values = {1, 2.5, -3, 0};
  const UpdateView update{{FieldValue::Dense<float>(ids_dense), FieldValue::RowSparse<double>(emb_rows, emb_values)},
                          std::nullopt};
  const ConvertedUpdate converted = ConvertedUpdate::Of(*spec, update, 42).value();
  const UpdateView& view = converted.view();
  ASSERT_TRUE(ValidateUpdate(*spec, view).ok()) << ValidateUpdate(*spec, view);
  EXPECT_THAT(std::vector<int64_t>(view.fields[0].indices.begin(), view.fields[0].indices.end()), ElementsAre(1, 3));
  EXPECT_EQ(view.fields[0].values.size(), 4u + 2u);  // one scale, two 8-bit codes
  EXPECT_THAT(std::vector<int64_t>(view.fields[1].indices.begin(), view.fields[1].indices.end()), ElementsAre(2, 0));
  ASSERT_EQ(view.fields[1].values.size(), 4u * 2u);  // four 16-bit steps: whole steps round to themselves
  std::vector<int16_t> steps(4);
  std::memcpy(steps.data(), view.fields[1].values.data(), 8);
  EXPECT_THAT(steps, ElementsAre(2, 5, -6, 0));
  const ConvertedUpdate again = ConvertedUpdate::Of(*spec, update, 42).value();
  EXPECT_TRUE(std::equal(view.fields[0].values.begin(), view.fields[0].values.end(),
                         again.view().fields[0].values.begin()));
  // Integer values cannot be encoded: refused, saying what the field takes.
  const std::vector<int32_t> ints = {1, 2, 3, 4};
  const UpdateView integers{{FieldValue::Dense<float>(ids_dense), FieldValue::RowSparse<int32_t>(emb_rows, ints)},
                            std::nullopt};
  const absl::Status refused = ConvertedUpdate::Of(*spec, integers, 42).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("from floating-point values in the field's own form (row-sparse)"));
}

TEST(EncodingConversionTest, APrivateUpdateWithDiscretizedFieldsIsClippedBeforeItIsDiscretized) {
  // Steps of 0.001 over 2000 coordinates and a plain float64 field, clip norm 1: the update
  // (norm about 45) is scaled below the bound by the rounding's margin before the steps are
  // drawn, so the node accepts it and finds it within the bound (or clips it by a hair).
  FieldIntrinsic steps{Intrinsic::kFederatedSum};
  steps.value_encoding = ValueEncoding::Discretized(16, 0.001);
  ReductionOptions options;
  options.privacy = PrivacySpec{1.0, 1.0, 10, std::nullopt};
  std::shared_ptr<const ReductionSpec> spec =
      ReductionSpec::Create(ValueType::Struct({{"w", ValueType::Tensor(DType::kFloat32, {2000})},
                                               {"b", ValueType::Tensor(DType::kFloat64, {10})}}),
                            {steps, {Intrinsic::kFederatedMean}}, options)
          .value();
  std::vector<float> w(2000);
  std::vector<double> b(10);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(static_cast<double>(i));
  UpdateView update;
  update.fields = {FieldValue::Dense(absl::MakeConstSpan(w)), FieldValue::Dense(absl::MakeConstSpan(b))};
  const ConvertedUpdate converted = ConvertedUpdate::Of(*spec, update, 7).value();
  const double w_norm = UpdateFieldNorm(spec->fields()[0], converted.view().fields[0]);
  const double b_norm = UpdateFieldNorm(spec->fields()[1], converted.view().fields[1]);
  const double norm = std::sqrt(w_norm * w_norm + b_norm * b_norm);
  EXPECT_LE(norm, 1.0 + 0.001 * std::sqrt(2000.0));  // what the node accepts
  EXPECT_GT(norm, 0.98);
  // The caller's values are left as they were.
  EXPECT_EQ(w[1], std::sin(1.0f));
  EXPECT_EQ(b[1], std::cos(1.0));
}

}  // namespace
}  // namespace fedagg
