// CastToDeclared: which casts happen without asking, which need the opt-in, which never
// happen, and that values survive or are refused for overflow.
#include "client_stub/dtype_cast.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace fedagg {
namespace {

using ::testing::HasSubstr;

template <typename T>
Tensor Make(DType dtype, std::vector<T> values) {
  Tensor tensor;
  tensor.dtype = dtype;
  tensor.shape = {static_cast<int64_t>(values.size())};
  tensor.bytes.resize(values.size() * sizeof(T));
  std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
  return tensor;
}

TEST(DTypeCastTest, CastsThatKeepEveryValueHappenWithoutAsking) {
  absl::StatusOr<Tensor> narrowed =
      CastToDeclared(Make<double>(DType::kFloat64, {1.0, 2.5, -0.0, NAN}), DType::kFloat32, CastPolicy::kExactOnly, "w");
  ASSERT_TRUE(narrowed.ok()) << narrowed.status();
  EXPECT_EQ(narrowed->values<float>()[1], 2.5f);
  absl::StatusOr<Tensor> fits =
      CastToDeclared(Make<int64_t>(DType::kInt64, {-5, 1 << 30}), DType::kInt32, CastPolicy::kExactOnly, "w");
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->values<int32_t>()[1], 1 << 30);
  EXPECT_TRUE(CastToDeclared(Make<int64_t>(DType::kInt64, {int64_t{1} << 53}), DType::kFloat64, CastPolicy::kExactOnly, "w")
                  .ok());
  EXPECT_TRUE(CastToDeclared(Make<float>(DType::kFloat32, {1.0f, 0.5f}), DType::kBFloat16, CastPolicy::kExactOnly, "w")
                  .ok());
}

TEST(DTypeCastTest, ACastThatChangesAValueIsRefusedNamingIt) {
  auto refusal = [](const Tensor& tensor, DType declared) {
    return std::string(CastToDeclared(tensor, declared, CastPolicy::kExactOnly, "field 'w' values").status().message());
  };
  EXPECT_THAT(refusal(Make<int64_t>(DType::kInt64, {0, (int64_t{1} << 53) + 1}), DType::kFloat64),
              HasSubstr("element 1 (9007199254740993) would become 9007199254740992 in float64"));
  EXPECT_THAT(refusal(Make<int32_t>(DType::kInt32, {16777217}), DType::kFloat32), HasSubstr("element 0 (16777217) would become 16777216 in float32"));
  EXPECT_THAT(refusal(Make<float>(DType::kFloat32, {1.0f / 3}), DType::kBFloat16), HasSubstr("element 0"));
  EXPECT_THAT(refusal(Make<float>(DType::kFloat32, {1.0f / 3}), DType::kFloat16), HasSubstr("in float16"));
}

TEST(DTypeCastTest, ExactCastKeepsEveryValue) {
  absl::StatusOr<Tensor> cast =
      CastToDeclared(Make<int32_t>(DType::kInt32, {-7, 0, 2147483647}), DType::kInt64, CastPolicy::kExactOnly, "x");
  ASSERT_TRUE(cast.ok()) << cast.status();
  EXPECT_EQ(cast->dtype, DType::kInt64);
  EXPECT_THAT(std::vector<int64_t>(cast->values<int64_t>().begin(), cast->values<int64_t>().end()),
              ::testing::ElementsAre(-7, 0, 2147483647));
}

TEST(DTypeCastTest, LossyCastNeedsTheOptInAndThenRounds) {
  const Tensor wide = Make<double>(DType::kFloat64, {0.1, 2.5});
  absl::StatusOr<Tensor> refused = CastToDeclared(wide, DType::kFloat32, CastPolicy::kExactOnly, "field 'w' values");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("field 'w' values is float64 but the field declares float32: element 0 (0.1) would become "
                        "0.10000000149011612 in float32, so the cast is not done silently"));
  absl::StatusOr<Tensor> cast = CastToDeclared(wide, DType::kFloat32, CastPolicy::kAllowLossy, "w");
  ASSERT_TRUE(cast.ok()) << cast.status();
  EXPECT_EQ(cast->values<float>()[0], 0.1f);
  EXPECT_EQ(cast->values<float>()[1], 2.5f);
}

TEST(DTypeCastTest, OverflowIsRefusedEvenWithTheOptIn) {
  EXPECT_THAT(std::string(CastToDeclared(Make<double>(DType::kFloat64, {1e39}), DType::kFloat32,
                                         CastPolicy::kAllowLossy, "w")
                              .status()
                              .message()),
              HasSubstr("overflows float32"));
  EXPECT_THAT(std::string(CastToDeclared(Make<double>(DType::kFloat64, {70000.0}), DType::kFloat16,
                                         CastPolicy::kAllowLossy, "w")
                              .status()
                              .message()),
              HasSubstr("overflows float16"));
  EXPECT_THAT(std::string(CastToDeclared(Make<int64_t>(DType::kInt64, {int64_t{1} << 40}), DType::kInt32,
                                         CastPolicy::kAllowLossy, "w")
                              .status()
                              .message()),
              HasSubstr("does not fit in int32"));
  // Infinity is a value, not an overflow (require_finite is the server's business).
  EXPECT_TRUE(CastToDeclared(Make<double>(DType::kFloat64, {INFINITY}), DType::kFloat32, CastPolicy::kAllowLossy, "w")
                  .ok());
}

TEST(DTypeCastTest, FloatsAreNeverCastToIntegers) {
  absl::StatusOr<Tensor> refused =
      CastToDeclared(Make<float>(DType::kFloat32, {1.0f}), DType::kInt64, CastPolicy::kAllowLossy, "w");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("a float array is never cast to integers"));
}

}  // namespace
}  // namespace fedagg
