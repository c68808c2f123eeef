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

TEST(DTypeCastTest, ExactCastsAreTheWideningOnes) {
  EXPECT_TRUE(IsExactCast(DType::kFloat32, DType::kFloat64));
  EXPECT_TRUE(IsExactCast(DType::kFloat16, DType::kFloat32));
  EXPECT_TRUE(IsExactCast(DType::kBFloat16, DType::kFloat64));
  EXPECT_TRUE(IsExactCast(DType::kInt32, DType::kInt64));
  EXPECT_TRUE(IsExactCast(DType::kInt32, DType::kFloat64));
  EXPECT_FALSE(IsExactCast(DType::kFloat64, DType::kFloat32));
  EXPECT_FALSE(IsExactCast(DType::kInt64, DType::kFloat64));
  EXPECT_FALSE(IsExactCast(DType::kInt32, DType::kFloat32));
  EXPECT_FALSE(IsExactCast(DType::kInt64, DType::kInt32));
  EXPECT_FALSE(IsExactCast(DType::kFloat32, DType::kFloat16));
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
              HasSubstr("field 'w' values is float64 but the field declares float32: casting float64 to float32 can "
                        "lose precision or range"));
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
