// Tests of TFF-style value types: construction, equality, validation, printing, parsing
// and flattening into leaf fields.
#include "service/core/value_type.h"

#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::IsOk;
using ::fedagg::testing::StatusIs;
using ::fedagg::testing::ValueOrDie;

TEST(TensorTypeTest, ElementsBytesAndName) {
  const TensorType scalar{DType::kFloat64, {}};
  EXPECT_EQ(scalar.num_elements(), 1);
  EXPECT_EQ(scalar.num_bytes(), 8u);
  EXPECT_EQ(scalar.ToString(), "float64");

  const TensorType matrix{DType::kFloat32, {10, 5}};
  EXPECT_EQ(matrix.num_elements(), 50);
  EXPECT_EQ(matrix.num_bytes(), 200u);
  EXPECT_EQ(matrix.ToString(), "float32[10,5]");

  const TensorType half{DType::kBFloat16, {3, 0, 2}};
  EXPECT_EQ(half.num_elements(), 0);
  EXPECT_EQ(half.num_bytes(), 0u);
  EXPECT_EQ(half.ToString(), "bfloat16[3,0,2]");

  EXPECT_EQ((TensorType{DType::kInt32, {7}}).num_bytes(), 28u);
  EXPECT_EQ((TensorType{DType::kFloat16, {7}}).num_bytes(), 14u);
  EXPECT_EQ((TensorType{DType::kInt64, {7}}).num_bytes(), 56u);
}

TEST(ValueTypeTest, TensorAndStructAccessors) {
  const ValueType tensor = ValueType::Tensor(DType::kInt64, {4});
  ASSERT_TRUE(tensor.is_tensor());
  EXPECT_EQ(tensor.tensor().dtype, DType::kInt64);
  EXPECT_EQ(tensor.tensor().shape, std::vector<int64_t>{4});
  EXPECT_TRUE(tensor.fields().empty());

  const ValueType s = ValueType::Struct(
      {{"w", ValueType::Tensor(DType::kFloat32, {10, 5})}, {"", ValueType::Tensor(DType::kInt32, {})}});
  ASSERT_FALSE(s.is_tensor());
  ASSERT_EQ(s.fields().size(), 2u);
  EXPECT_EQ(s.fields()[0].name, "w");
  EXPECT_EQ(s.fields()[1].name, "");
  EXPECT_EQ(*s.fields()[0].type, ValueType::Tensor(DType::kFloat32, {10, 5}));
}

TEST(ValueTypeTest, ToStringUsesTffNotation) {
  const ValueType model = ValueType::Struct({
      {"encoder", ValueType::Struct({{"w", ValueType::Tensor(DType::kFloat32, {10, 5})},
                                     {"b", ValueType::Tensor(DType::kFloat32, {5})}})},
      {"", ValueType::Tensor(DType::kInt64, {})},
      {"emb", ValueType::Tensor(DType::kBFloat16, {100, 8})},
  });
  EXPECT_EQ(model.ToString(), "<encoder=<w=float32[10,5],b=float32[5]>,int64,emb=bfloat16[100,8]>");
}

TEST(ValueTypeTest, Equality) {
  const ValueType a = ValueType::Struct({{"x", ValueType::Tensor(DType::kFloat32, {2})}});
  EXPECT_EQ(a, ValueType::Struct({{"x", ValueType::Tensor(DType::kFloat32, {2})}}));
  // Name, dtype, shape, nesting and field count all matter.
  EXPECT_FALSE(a == ValueType::Struct({{"y", ValueType::Tensor(DType::kFloat32, {2})}}));
  EXPECT_FALSE(a == ValueType::Struct({{"", ValueType::Tensor(DType::kFloat32, {2})}}));
  EXPECT_FALSE(a == ValueType::Struct({{"x", ValueType::Tensor(DType::kFloat64, {2})}}));
  EXPECT_FALSE(a == ValueType::Struct({{"x", ValueType::Tensor(DType::kFloat32, {3})}}));
  EXPECT_FALSE(a == ValueType::Struct({{"x", ValueType::Tensor(DType::kFloat32, {2, 1})}}));
  EXPECT_FALSE(a == ValueType::Struct(
                        {{"x", ValueType::Struct({{"", ValueType::Tensor(DType::kFloat32, {2})}})}}));
  EXPECT_FALSE(a == ValueType::Struct({{"x", ValueType::Tensor(DType::kFloat32, {2})},
                                       {"z", ValueType::Tensor(DType::kFloat32, {2})}}));
  EXPECT_FALSE(a == ValueType::Tensor(DType::kFloat32, {2}));
  EXPECT_FALSE(ValueType::Tensor(DType::kFloat32, {2}) == a);
  EXPECT_EQ(ValueType::Tensor(DType::kInt32, {}), ValueType::Tensor(DType::kInt32, {}));
}

TEST(ValueTypeTest, FieldNamesMustBeIdentifiers) {
  for (const char* name : {"a.b", "x=y", "a,b", "1st", "with space"}) {
    const absl::Status status =
        ValueType::Struct({{name, ValueType::Tensor(DType::kFloat32, {1})}}).Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(status.message().find("is not an identifier"), std::string::npos) << status;
  }
  EXPECT_TRUE(ValueType::Struct({{"_layer2_w", ValueType::Tensor(DType::kFloat32, {1})}}).Validate().ok());
}

TEST(ValueTypeTest, ValidateAcceptsOrdinaryTypes) {
  EXPECT_TRUE(IsOk(ValueType::Tensor(DType::kFloat32, {}).Validate()));
  EXPECT_TRUE(IsOk(ValueType::Tensor(DType::kFloat32, {0}).Validate()));
  EXPECT_TRUE(IsOk(ValueType::Tensor(DType::kFloat32, {1 << 20, 1 << 10}).Validate()));
  // Unnamed fields may repeat; named ones must not.
  EXPECT_TRUE(IsOk(ValueType::Struct({{"", ValueType::Tensor(DType::kInt32, {})},
                                      {"", ValueType::Tensor(DType::kInt32, {})}})
                       .Validate()));
  // The same name in different structs is fine.
  EXPECT_TRUE(IsOk(ValueType::Struct({{"a", ValueType::Struct({{"w", ValueType::Tensor(DType::kInt32, {})}})},
                                      {"b", ValueType::Struct({{"w", ValueType::Tensor(DType::kInt32, {})}})}})
                       .Validate()));
}

TEST(ValueTypeTest, ValidateRejectsNegativeDimension) {
  const ValueType type =
      ValueType::Struct({{"enc", ValueType::Struct({{"w", ValueType::Tensor(DType::kFloat32, {3, -1})}})}});
  EXPECT_TRUE(StatusIs(type.Validate(), absl::StatusCode::kInvalidArgument,
                       "field 'enc.w' of type float32[3,-1] has a negative dimension"));
}

TEST(ValueTypeTest, ValidateRejectsTooLargeTensor) {
  const int64_t big = int64_t{1} << 31;
  EXPECT_TRUE(StatusIs(ValueType::Tensor(DType::kFloat32, {big, big}).Validate(),
                       absl::StatusCode::kInvalidArgument, "is too large"));
  EXPECT_TRUE(StatusIs(
      ValueType::Tensor(DType::kFloat32, {std::numeric_limits<int64_t>::max()}).Validate(),
      absl::StatusCode::kInvalidArgument, "is too large"));
  // Just below the limit of 2^63 bytes for 8-byte elements: 2^59 elements fit.
  EXPECT_TRUE(IsOk(ValueType::Tensor(DType::kInt64, {int64_t{1} << 29, int64_t{1} << 30}).Validate()));
}

TEST(ValueTypeTest, ValidateRejectsDuplicateNames) {
  const ValueType type = ValueType::Struct({{"w", ValueType::Tensor(DType::kFloat32, {2})},
                                            {"w", ValueType::Tensor(DType::kFloat32, {3})}});
  EXPECT_TRUE(StatusIs(type.Validate(), absl::StatusCode::kInvalidArgument,
                       "has two fields named 'w'"));
}

TEST(ValueTypeTest, ValidateRejectsEmptyStructs) {
  EXPECT_TRUE(StatusIs(ValueType::Struct({}).Validate(), absl::StatusCode::kInvalidArgument,
                       "struct '<root>' has no fields"));
  const ValueType nested = ValueType::Struct({{"a", ValueType::Tensor(DType::kInt32, {})},
                                              {"opt", ValueType::Struct({})}});
  EXPECT_TRUE(StatusIs(nested.Validate(), absl::StatusCode::kInvalidArgument,
                       "struct 'opt' has no fields"));
}

TEST(FlattenLeavesTest, PathsInDepthFirstOrder) {
  const ValueType type = ValueType::Struct({
      {"enc", ValueType::Struct({{"w", ValueType::Tensor(DType::kFloat32, {4, 2})},
                                 {"b", ValueType::Tensor(DType::kFloat16, {2})}})},
      {"", ValueType::Struct({{"", ValueType::Tensor(DType::kInt32, {})},
                              {"x", ValueType::Tensor(DType::kInt64, {3})}})},
      {"head", ValueType::Tensor(DType::kFloat64, {1})},
  });
  const std::vector<LeafField> leaves = FlattenLeaves(type);
  ASSERT_EQ(leaves.size(), 5u);
  EXPECT_EQ(leaves[0].path, "enc.w");
  EXPECT_EQ(leaves[0].type, (TensorType{DType::kFloat32, {4, 2}}));
  EXPECT_EQ(leaves[1].path, "enc.b");
  EXPECT_EQ(leaves[1].type, (TensorType{DType::kFloat16, {2}}));
  EXPECT_EQ(leaves[2].path, "[1][0]");
  EXPECT_EQ(leaves[2].type, (TensorType{DType::kInt32, {}}));
  EXPECT_EQ(leaves[3].path, "[1].x");
  EXPECT_EQ(leaves[4].path, "head");
  EXPECT_EQ(leaves[4].type, (TensorType{DType::kFloat64, {1}}));
}

TEST(FlattenLeavesTest, BareTensorIsOneLeafNamedValue) {
  const std::vector<LeafField> leaves = FlattenLeaves(ValueType::Tensor(DType::kInt64, {3}));
  ASSERT_EQ(leaves.size(), 1u);
  EXPECT_EQ(leaves[0].path, "value");
  EXPECT_EQ(leaves[0].type, (TensorType{DType::kInt64, {3}}));
}

TEST(ParseValueTypeTest, ParsesTensorsAndStructs) {
  EXPECT_EQ(ValueOrDie(ParseValueType("float32")), ValueType::Tensor(DType::kFloat32, {}));
  EXPECT_EQ(ValueOrDie(ParseValueType("int64[3]")), ValueType::Tensor(DType::kInt64, {3}));
  EXPECT_EQ(ValueOrDie(ParseValueType("bfloat16[0,7]")), ValueType::Tensor(DType::kBFloat16, {0, 7}));
  EXPECT_EQ(ValueOrDie(ParseValueType("<a=int64,b=<float32[2,2]>>")),
            ValueType::Struct({{"a", ValueType::Tensor(DType::kInt64, {})},
                               {"b", ValueType::Struct({{"", ValueType::Tensor(DType::kFloat32, {2, 2})}})}}));
  // Whitespace is allowed between tokens.
  EXPECT_EQ(ValueOrDie(ParseValueType("  < w = float16 [ 3 , 4 ] , int32 >  ")),
            ValueType::Struct({{"w", ValueType::Tensor(DType::kFloat16, {3, 4})},
                               {"", ValueType::Tensor(DType::kInt32, {})}}));
}

TEST(ParseValueTypeTest, RoundTripsToString) {
  for (const char* text :
       {"float32", "float64[1]", "int32[2,3,4]", "<x=int64[5]>", "<float32,float32>",
        "<enc=<w=float32[10,5],b=float32[5]>,int64,emb=bfloat16[100,8],h=float16[0]>",
        "<<<int32>>>"}) {
    SCOPED_TRACE(text);
    const ValueType type = ValueOrDie(ParseValueType(text));
    EXPECT_EQ(type.ToString(), text);
    EXPECT_EQ(ValueOrDie(ParseValueType(type.ToString())), type);
  }
}

TEST(ParseValueTypeTest, RejectsMalformedText) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c : {
           Case{"", "expected a dtype or '<'"},
           Case{"float8[2]", "unknown dtype 'float8'"},
           Case{"float32[", "expected a dimension"},
           Case{"float32[]", "expected a dimension"},
           Case{"float32[2,]", "expected a dimension"},
           Case{"float32[2", "expected ',' or ']'"},
           Case{"float32[-1]", "expected a dimension"},
           Case{"float32[2] x", "unexpected trailing text"},
           Case{"<a=float32", "expected ',' or '>'"},
           Case{"<a=float32;b=int32>", "expected ',' or '>'"},
           Case{"<a=>", "expected a dtype or '<'"},
           Case{"float32[99999999999999999999]", "dimension too large"},
       }) {
    SCOPED_TRACE(c.text);
    EXPECT_TRUE(StatusIs(ParseValueType(c.text), absl::StatusCode::kInvalidArgument, c.message));
  }
}

TEST(ParseValueTypeTest, ValidatesWhatItParsed) {
  EXPECT_TRUE(StatusIs(ParseValueType("<>"), absl::StatusCode::kInvalidArgument, "has no fields"));
  EXPECT_TRUE(StatusIs(ParseValueType("<a=int32,a=int64>"), absl::StatusCode::kInvalidArgument,
                       "two fields named 'a'"));
  EXPECT_TRUE(StatusIs(ParseValueType("float64[4294967296,4294967296]"),
                       absl::StatusCode::kInvalidArgument, "too large"));
}

TEST(ParseValueTypeTest, ErrorNamesOffset) {
  EXPECT_TRUE(StatusIs(ParseValueType("<a=int32,b=int32]"), absl::StatusCode::kInvalidArgument,
                       "cannot parse type '<a=int32,b=int32]' at offset 16"));
}

}  // namespace
}  // namespace fedagg
