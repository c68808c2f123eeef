// Tests of ReductionSpec: per-field derivation (encoding, rows, widths, accumulation and
// result dtypes, counts), the canonical string that decides mergeability, and every
// rejection of an inconsistent spec.
#include "service/core/reduction_spec.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::kAllDTypes;
using ::fedagg::testing::kAllIntrinsics;
using ::fedagg::testing::MakeSpec;
using ::fedagg::testing::T;
using ::fedagg::testing::OneFieldSpec;
using ::fedagg::testing::StatusIs;


TEST(ReductionSpecTest, DerivesFieldSpecsForAStruct) {
  const auto spec = MakeSpec(
      ValueType::Struct({{"dense", T(DType::kFloat32, {10, 5})},
                         {"tokens", T(DType::kInt64, {1000})},
                         {"emb", ValueType::Struct({{"table", T(DType::kBFloat16, {100, 4, 2})}})},
                         {"", T(DType::kInt32, {3})}}),
      {{Intrinsic::kFederatedWeightedMean},
       {Intrinsic::kSparseSumSparse, true},
       {Intrinsic::kRowSparseMean, false},
       {Intrinsic::kFederatedMax}});
  ASSERT_EQ(spec->fields().size(), 4u);
  EXPECT_TRUE(spec->has_weighted_field());

  const FieldSpec& dense = spec->fields()[0];
  EXPECT_EQ(dense.path, "dense");
  EXPECT_EQ(dense.type, (TensorType{DType::kFloat32, {10, 5}}));
  EXPECT_EQ(dense.intrinsic, Intrinsic::kFederatedWeightedMean);
  EXPECT_EQ(dense.encoding, Encoding::kDense);
  EXPECT_FALSE(dense.report_counts);
  EXPECT_FALSE(dense.keeps_counts);
  EXPECT_EQ(dense.rows, 1);
  EXPECT_EQ(dense.row_width, 50);
  EXPECT_EQ(dense.accumulation_dtype, DType::kFloat32);
  EXPECT_EQ(dense.result_dtype, DType::kFloat32);

  const FieldSpec& tokens = spec->fields()[1];
  EXPECT_EQ(tokens.path, "tokens");
  EXPECT_EQ(tokens.encoding, Encoding::kSparse);
  EXPECT_TRUE(tokens.report_counts);
  EXPECT_TRUE(tokens.keeps_counts);
  EXPECT_EQ(tokens.rows, 1000);
  EXPECT_EQ(tokens.row_width, 1);
  EXPECT_EQ(tokens.accumulation_dtype, DType::kInt64);
  EXPECT_EQ(tokens.result_dtype, DType::kInt64);

  const FieldSpec& emb = spec->fields()[2];
  EXPECT_EQ(emb.path, "emb.table");
  EXPECT_EQ(emb.encoding, Encoding::kRowSparse);
  EXPECT_FALSE(emb.report_counts);
  EXPECT_TRUE(emb.keeps_counts);  // a mean needs them even when not reported
  EXPECT_EQ(emb.rows, 100);
  EXPECT_EQ(emb.row_width, 8);
  EXPECT_EQ(emb.accumulation_dtype, DType::kFloat32);  // bfloat16 is widened
  EXPECT_EQ(emb.result_dtype, DType::kFloat32);

  const FieldSpec& extreme = spec->fields()[3];
  EXPECT_EQ(extreme.path, "[3]");
  EXPECT_EQ(extreme.rows, 1);
  EXPECT_EQ(extreme.row_width, 3);
  EXPECT_EQ(extreme.accumulation_dtype, DType::kInt64);
  EXPECT_EQ(extreme.result_dtype, DType::kInt64);
}

TEST(ReductionSpecTest, HasWeightedFieldOnlyWithAWeightedIntrinsic) {
  for (Intrinsic intrinsic : kAllIntrinsics) {
    SCOPED_TRACE(IntrinsicName(intrinsic));
    const auto spec = OneFieldSpec(DType::kFloat32, {4}, intrinsic);
    EXPECT_EQ(spec->has_weighted_field(), IsWeighted(intrinsic));
  }
  const auto mixed = MakeSpec(ValueType::Struct({{"a", T(DType::kFloat32, {2})}, {"b", T(DType::kFloat32, {2})}}),
                              {{Intrinsic::kFederatedSum}, {Intrinsic::kSparseWeightedMean}});
  EXPECT_TRUE(mixed->has_weighted_field());
}

// The table of accumulation / result dtypes, written out case by case.
TEST(ReductionSpecTest, AccumulationAndResultDTypes) {
  struct Case {
    DType input;
    Intrinsic intrinsic;
    bool f64;
    DType accumulation;
    DType result;
  };
  using D = DType;
  using I = Intrinsic;
  for (const Case& c : {
           // Integers sum exactly in int64; means of integers report float64.
           Case{D::kInt32, I::kFederatedSum, false, D::kInt64, D::kInt64},
           Case{D::kInt64, I::kFederatedSum, false, D::kInt64, D::kInt64},
           Case{D::kInt32, I::kFederatedMean, false, D::kInt64, D::kFloat64},
           Case{D::kInt64, I::kSparseMean, false, D::kInt64, D::kFloat64},
           Case{D::kInt32, I::kRowSparseMean, false, D::kInt64, D::kFloat64},
           Case{D::kInt32, I::kFederatedMax, false, D::kInt64, D::kInt64},
           Case{D::kInt64, I::kFederatedMin, false, D::kInt64, D::kInt64},
           Case{D::kInt32, I::kSparseSumSparse, false, D::kInt64, D::kInt64},
           Case{D::kInt32, I::kRowSparseSum, false, D::kInt64, D::kInt64},
           // Weighted integer means go through float64.
           Case{D::kInt32, I::kFederatedWeightedMean, false, D::kFloat64, D::kFloat64},
           Case{D::kInt64, I::kSparseWeightedMean, false, D::kFloat64, D::kFloat64},
           // float64_accumulation does not touch integers.
           Case{D::kInt32, I::kFederatedSum, true, D::kInt64, D::kInt64},
           Case{D::kInt64, I::kFederatedMean, true, D::kInt64, D::kFloat64},
           // Floats: float32 unless float64 input or asked.
           Case{D::kFloat32, I::kFederatedSum, false, D::kFloat32, D::kFloat32},
           Case{D::kFloat16, I::kFederatedMean, false, D::kFloat32, D::kFloat32},
           Case{D::kBFloat16, I::kSparseSum, false, D::kFloat32, D::kFloat32},
           Case{D::kFloat16, I::kFederatedMax, false, D::kFloat32, D::kFloat32},
           Case{D::kBFloat16, I::kSparseSumSparse, false, D::kFloat32, D::kFloat32},
           Case{D::kFloat64, I::kFederatedSum, false, D::kFloat64, D::kFloat64},
           Case{D::kFloat64, I::kRowSparseMean, false, D::kFloat64, D::kFloat64},
           Case{D::kFloat32, I::kFederatedSum, true, D::kFloat64, D::kFloat64},
           Case{D::kFloat16, I::kFederatedWeightedMean, true, D::kFloat64, D::kFloat64},
           Case{D::kBFloat16, I::kRowSparseSum, true, D::kFloat64, D::kFloat64},
           Case{D::kFloat32, I::kFederatedMin, true, D::kFloat64, D::kFloat64},
       }) {
    SCOPED_TRACE(absl::StrCat(DTypeName(c.input), " ", IntrinsicName(c.intrinsic), " f64=", c.f64));
    ReductionOptions options;
    options.float64_accumulation = c.f64;
    const auto spec = OneFieldSpec(c.input, {4, 2}, c.intrinsic, false, options);
    EXPECT_EQ(spec->fields()[0].accumulation_dtype, c.accumulation);
    EXPECT_EQ(spec->fields()[0].result_dtype, c.result);
    EXPECT_EQ(spec->fields()[0].type.dtype, c.input);  // the declared transport dtype stays
  }
}

// Every (dtype, intrinsic, option) combination is accepted and has a sane derivation.
TEST(ReductionSpecTest, EveryCombinationIsAccepted) {
  for (DType dtype : kAllDTypes) {
    for (Intrinsic intrinsic : kAllIntrinsics) {
      for (bool f64 : {false, true}) {
        for (bool counts : {false, true}) {
          if (counts && !IsSparseFamily(intrinsic)) continue;
          SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " ", IntrinsicName(intrinsic)));
          ReductionOptions options;
          options.float64_accumulation = f64;
          auto spec = ReductionSpec::Create(T(dtype, {6, 3}), {{intrinsic, counts}}, options);
          ASSERT_TRUE(spec.ok()) << spec.status();
          const FieldSpec& field = (*spec)->fields()[0];
          EXPECT_EQ(field.encoding, EncodingOf(intrinsic));
          EXPECT_EQ(field.report_counts, counts);
          EXPECT_EQ(field.keeps_counts, counts || NeedsCoordinateCounts(intrinsic));
          EXPECT_EQ(field.rows * field.row_width, 18);
          EXPECT_NE(field.result_dtype, DType::kFloat16);
          EXPECT_NE(field.result_dtype, DType::kBFloat16);
          EXPECT_NE(field.result_dtype, DType::kInt32);
          EXPECT_EQ((*spec)->options().float64_accumulation, f64);
        }
      }
    }
  }
}

TEST(ReductionSpecTest, RowsAndWidthsPerEncoding) {
  const auto dense = OneFieldSpec(DType::kFloat32, {6, 3}, Intrinsic::kFederatedSum);
  EXPECT_EQ(dense->fields()[0].rows, 1);
  EXPECT_EQ(dense->fields()[0].row_width, 18);
  const auto sparse = OneFieldSpec(DType::kFloat32, {6, 3}, Intrinsic::kSparseSum);
  EXPECT_EQ(sparse->fields()[0].rows, 18);
  EXPECT_EQ(sparse->fields()[0].row_width, 1);
  const auto rows = OneFieldSpec(DType::kFloat32, {6, 3}, Intrinsic::kRowSparseSum);
  EXPECT_EQ(rows->fields()[0].rows, 6);
  EXPECT_EQ(rows->fields()[0].row_width, 3);
  const auto vector_rows = OneFieldSpec(DType::kFloat32, {6}, Intrinsic::kRowSparseMean);
  EXPECT_EQ(vector_rows->fields()[0].rows, 6);
  EXPECT_EQ(vector_rows->fields()[0].row_width, 1);
  const auto scalar_dense = OneFieldSpec(DType::kFloat32, {}, Intrinsic::kFederatedMean);
  EXPECT_EQ(scalar_dense->fields()[0].row_width, 1);
  const auto scalar_sparse = OneFieldSpec(DType::kFloat32, {}, Intrinsic::kSparseSum);
  EXPECT_EQ(scalar_sparse->fields()[0].rows, 1);
}

TEST(ReductionSpecTest, CanonicalDecidesMergeability) {
  const ValueType type = ValueType::Struct({{"w", T(DType::kFloat32, {3})}, {"ids", T(DType::kInt64, {8})}});
  const std::vector<FieldIntrinsic> intrinsics = {{Intrinsic::kFederatedMean}, {Intrinsic::kSparseSum}};
  const auto base = MakeSpec(type, intrinsics);
  EXPECT_EQ(base->canonical(), MakeSpec(type, intrinsics)->canonical());
  EXPECT_NE(base->canonical().find("federated_mean"), std::string::npos);
  EXPECT_NE(base->canonical().find("<w=float32[3],ids=int64[8]>"), std::string::npos);

  ReductionOptions finite;
  finite.require_finite = true;
  ReductionOptions f64;
  f64.float64_accumulation = true;
  const std::vector<std::string> others = {
      MakeSpec(type, intrinsics, finite)->canonical(),
      MakeSpec(type, intrinsics, f64)->canonical(),
      MakeSpec(type, {{Intrinsic::kFederatedSum}, {Intrinsic::kSparseSum}})->canonical(),
      MakeSpec(type, {{Intrinsic::kFederatedMean}, {Intrinsic::kSparseSum, true}})->canonical(),
      MakeSpec(ValueType::Struct({{"v", T(DType::kFloat32, {3})}, {"ids", T(DType::kInt64, {8})}}), intrinsics)
          ->canonical(),
      MakeSpec(ValueType::Struct({{"w", T(DType::kFloat32, {4})}, {"ids", T(DType::kInt64, {8})}}), intrinsics)
          ->canonical(),
      MakeSpec(ValueType::Struct({{"w", T(DType::kFloat64, {3})}, {"ids", T(DType::kInt64, {8})}}), intrinsics)
          ->canonical(),
  };
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_NE(base->canonical(), others[i]) << i;
    for (size_t j = i + 1; j < others.size(); ++j) EXPECT_NE(others[i], others[j]) << i << " " << j;
  }
}

TEST(ReductionSpecTest, KeepsTypeAndOptions) {
  ReductionOptions options;
  options.require_finite = true;
  const ValueType type = ValueType::Struct({{"a", T(DType::kFloat16, {2})}});
  const auto spec = MakeSpec(type, {{Intrinsic::kFederatedSum}}, options);
  EXPECT_EQ(spec->value_type(), type);
  EXPECT_TRUE(spec->options().require_finite);
  EXPECT_FALSE(spec->options().float64_accumulation);
}

TEST(ReductionSpecTest, RejectsWrongNumberOfIntrinsics) {
  const ValueType type = ValueType::Struct({{"a", T(DType::kFloat32, {2})}, {"b", T(DType::kFloat32, {2})}});
  EXPECT_TRUE(StatusIs(ReductionSpec::Create(type, {{Intrinsic::kFederatedSum}}),
                       absl::StatusCode::kInvalidArgument,
                       "has 2 tensor fields but 1 intrinsics were given"));
  EXPECT_TRUE(StatusIs(ReductionSpec::Create(type, {}), absl::StatusCode::kInvalidArgument,
                       "has 2 tensor fields but 0 intrinsics"));
  EXPECT_TRUE(StatusIs(ReductionSpec::Create(type, {{}, {}, {}}), absl::StatusCode::kInvalidArgument,
                       "has 2 tensor fields but 3 intrinsics"));
}

TEST(ReductionSpecTest, RejectsCountsOnDenseIntrinsics) {
  for (Intrinsic intrinsic : {Intrinsic::kFederatedSum, Intrinsic::kFederatedMean,
                              Intrinsic::kFederatedWeightedMean, Intrinsic::kFederatedMax,
                              Intrinsic::kFederatedMin}) {
    SCOPED_TRACE(IntrinsicName(intrinsic));
    EXPECT_TRUE(StatusIs(
        ReductionSpec::Create(ValueType::Struct({{"w", T(DType::kFloat32, {3})}}), {{intrinsic, true}}),
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("field 'w' uses ", IntrinsicName(intrinsic), ", a dense intrinsic")));
  }
}

TEST(ReductionSpecTest, RejectsRowSparseOnScalar) {
  for (Intrinsic intrinsic : {Intrinsic::kRowSparseSum, Intrinsic::kRowSparseMean}) {
    SCOPED_TRACE(IntrinsicName(intrinsic));
    EXPECT_TRUE(StatusIs(
        ReductionSpec::Create(ValueType::Struct({{"s", T(DType::kFloat32, {})}}), {{intrinsic}}),
        absl::StatusCode::kInvalidArgument, "field 's' is a scalar (float32)"));
  }
}

TEST(ReductionSpecTest, RejectsInvalidTypes) {
  EXPECT_TRUE(StatusIs(ReductionSpec::Create(T(DType::kFloat32, {-2}), {{Intrinsic::kFederatedSum}}),
                       absl::StatusCode::kInvalidArgument, "negative dimension"));
  EXPECT_TRUE(StatusIs(ReductionSpec::Create(ValueType::Struct({}), {}),
                       absl::StatusCode::kInvalidArgument, "has no fields"));
}

}  // namespace
}  // namespace fedagg
