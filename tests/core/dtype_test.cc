// Tests of dtype names, sizes and the float16 / bfloat16 conversions.
#include "service/core/dtype.h"

#include <cmath>

#include "gtest/gtest.h"
#include "service/core/half_float.h"

namespace fedagg {
namespace {

TEST(DTypeTest, NamesRoundTrip) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64,
                      DType::kFloat16, DType::kBFloat16}) {
    absl::StatusOr<DType> parsed = ParseDType(DTypeName(dtype));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, dtype);
  }
  EXPECT_EQ(ParseDType("float8").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DTypeTest, Sizes) {
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFloat64), 8u);
  EXPECT_TRUE(IsInteger(DType::kInt32));
  EXPECT_FALSE(IsInteger(DType::kBFloat16));
}

TEST(HalfFloatTest, Float16KnownValues) {
  EXPECT_EQ(ToFloat(Float16{0x3c00}), 1.0f);
  EXPECT_EQ(ToFloat(Float16{0xc000}), -2.0f);
  EXPECT_EQ(ToFloat(Float16{0x7bff}), 65504.0f);
  EXPECT_EQ(ToFloat(Float16{0x0001}), 0x1p-24f);  // smallest subnormal
  EXPECT_TRUE(std::isinf(ToFloat(Float16{0x7c00})));
  EXPECT_TRUE(std::isnan(ToFloat(Float16{0x7e00})));
  EXPECT_FALSE(IsFinite(Float16{0x7c00}));
  EXPECT_TRUE(IsFinite(Float16{0x7bff}));
}

TEST(HalfFloatTest, Float16RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const Float16 h{static_cast<uint16_t>(bits)};
    if (!IsFinite(h)) continue;
    ASSERT_EQ(ToFloat16(ToFloat(h)).bits, h.bits) << "bits " << bits;
  }
}

TEST(HalfFloatTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(ToFloat(ToBFloat16(1.0f)), 1.0f);
  EXPECT_EQ(ToBFloat16(1.0f + 0x1p-8f).bits, ToBFloat16(1.0f).bits);  // tie -> even
  EXPECT_EQ(ToFloat(ToBFloat16(3.0f)), 3.0f);
  EXPECT_FALSE(IsFinite(ToBFloat16(INFINITY)));
}

}  // namespace
}  // namespace fedagg
