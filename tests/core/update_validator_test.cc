// Tests of update validation: every rejection (with its status code and the part of the
// message a person acts on) and the valid edge cases that must pass.
#include "service/core/update_validator.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::FromDouble;
using ::fedagg::testing::IsOk;
using ::fedagg::testing::kFloatDTypes;
using ::fedagg::testing::MakeSpec;
using ::fedagg::testing::T;
using ::fedagg::testing::OneFieldSpec;
using ::fedagg::testing::StatusIs;
using ::fedagg::testing::ToBytes;
using ::fedagg::testing::Update;
using ::fedagg::testing::Values;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;


// <w=float32[2,2], ids=float32[6], emb=float32[4,2]>: one field of each encoding.
std::shared_ptr<const ReductionSpec> ThreeEncodings(ReductionOptions options = {},
                                                    bool weighted = false) {
  return MakeSpec(ValueType::Struct({{"w", T(DType::kFloat32, {2, 2})},
                                     {"ids", T(DType::kFloat32, {6})},
                                     {"emb", T(DType::kFloat32, {4, 2})}}),
                  {{weighted ? Intrinsic::kFederatedWeightedMean : Intrinsic::kFederatedSum},
                   {Intrinsic::kSparseSum},
                   {Intrinsic::kRowSparseSum}},
                  options);
}

Update Good() {
  Update u;
  u.Dense(Values<float>({1, 2, 3, 4}))
      .Sparse<float>({0, 5, 5}, Values<float>({1, 2, 3}))
      .RowSparse<float>({3, 0}, Values<float>({1, 2, 3, 4}));
  return u;
}

TEST(UpdateValidatorTest, AcceptsValidUpdates) {
  const auto spec = ThreeEncodings();
  EXPECT_TRUE(IsOk(ValidateUpdate(*spec, Good().view())));
  // Empty sparse and row-sparse values are valid: the client touched nothing.
  Update empty;
  empty.Dense(Values<float>({0, 0, 0, 0})).Sparse<float>({}, {}).RowSparse<float>({}, {});
  EXPECT_TRUE(IsOk(ValidateUpdate(*spec, empty.view())));
  // Bounds are inclusive at 0 and exclusive at the size.
  Update edges;
  edges.Dense(Values<float>({0, 0, 0, 0}))
      .Sparse<float>({0, 5}, Values<float>({1, 1}))
      .RowSparse<float>({0, 3}, Values<float>({1, 1, 1, 1}));
  EXPECT_TRUE(IsOk(ValidateUpdate(*spec, edges.view())));
}

TEST(UpdateValidatorTest, RejectsWrongFieldCount) {
  const auto spec = ThreeEncodings();
  Update one;
  one.Dense(Values<float>({1, 2, 3, 4}));
  EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, one.view()), kInvalid,
                       "update has 1 fields but type <w=float32[2,2],ids=float32[6],emb=float32[4,2]> has 3"));
  Update four = Good();
  four.Dense(Values<float>({1}));
  EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, four.view()), kInvalid, "update has 4 fields"));
  EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, UpdateView{}), kInvalid, "update has 0 fields"));
}

TEST(UpdateValidatorTest, RejectsWrongEncoding) {
  const auto spec = ThreeEncodings();
  {
    Update u;
    u.Sparse<float>({0}, Values<float>({1}))
        .Sparse<float>({}, {})
        .RowSparse<float>({}, {});
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid,
                         "field 'w' (float32[2,2], federated_sum): sent sparse but federated_sum "
                         "takes dense values"));
  }
  {
    Update u;
    u.Dense(Values<float>({1, 2, 3, 4})).Dense(Values<float>({1, 2, 3, 4, 5, 6})).RowSparse<float>({}, {});
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid,
                         "field 'ids' (float32[6], sparse_sum): sent dense but sparse_sum takes "
                         "sparse values"));
  }
  {
    Update u;
    u.Dense(Values<float>({1, 2, 3, 4})).Sparse<float>({}, {}).Sparse<float>({1}, Values<float>({1}));
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid,
                         "sent sparse but row_sparse_sum takes row-sparse values"));
  }
}

TEST(UpdateValidatorTest, RejectsWrongDType) {
  const auto spec = ThreeEncodings();
  {
    Update u;
    u.Dense(Values<double>({1, 2, 3, 4})).Sparse<float>({}, {}).RowSparse<float>({}, {});
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid,
                         "field 'w' (float32[2,2], federated_sum): sent dtype float64, declared float32"));
  }
  {
    // Same element size, different dtype: still rejected.
    Update u;
    u.Dense(Values<float>({1, 2, 3, 4})).Sparse<int32_t>({1}, Values<int32_t>({1})).RowSparse<float>({}, {});
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid, "sent dtype int32, declared float32"));
  }
  {
    Update u;
    u.Dense(Values<float>({1, 2, 3, 4})).Sparse<float>({}, {}).RowSparse<BFloat16>({1}, Values<BFloat16>({1, 2}));
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid, "sent dtype bfloat16, declared float32"));
  }
}

TEST(UpdateValidatorTest, RejectsWrongDenseSize) {
  const auto spec = ThreeEncodings();
  for (size_t n : {0u, 3u, 5u, 16u}) {
    SCOPED_TRACE(n);
    Update u;
    u.Dense(std::vector<float>(n, 1.0f)).Sparse<float>({}, {}).RowSparse<float>({}, {});
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid,
                         absl::StrCat("field 'w' (float32[2,2], federated_sum): expected 4 elements "
                                      "(16 bytes), got ", n * 4, " bytes")));
  }
  // A byte count that is not a whole number of elements.
  Update ragged;
  ragged.Raw(Encoding::kDense, DType::kFloat32, {}, std::vector<std::byte>(15))
      .Sparse<float>({}, {})
      .RowSparse<float>({}, {});
  EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, ragged.view()), kInvalid, "got 15 bytes"));
}

TEST(UpdateValidatorTest, RejectsIndicesOnDenseValue) {
  const auto spec = ThreeEncodings();
  Update u;
  u.Raw(Encoding::kDense, DType::kFloat32, {0, 1, 2, 3}, ToBytes(Values<float>({1, 2, 3, 4})))
      .Sparse<float>({}, {})
      .RowSparse<float>({}, {});
  EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid, "a dense value carries no indices"));
}

TEST(UpdateValidatorTest, RejectsMisalignedValues) {
  const auto spec = OneFieldSpec(DType::kFloat64, {2}, Intrinsic::kFederatedSum);
  alignas(16) std::byte storage[32] = {};
  const FieldValue misaligned{Encoding::kDense, DType::kFloat64, {},
                              absl::MakeConstSpan(storage + 4, 16)};
  EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, UpdateView{{misaligned}, std::nullopt}), kInvalid,
                       "values are not aligned to their element size"));
  const FieldValue aligned{Encoding::kDense, DType::kFloat64, {}, absl::MakeConstSpan(storage + 8, 16)};
  EXPECT_TRUE(IsOk(ValidateUpdate(*spec, UpdateView{{aligned}, std::nullopt})));
}

TEST(UpdateValidatorTest, RejectsSparseIndexOutOfRange) {
  const auto spec = ThreeEncodings();
  struct Case {
    std::vector<int64_t> indices;
    std::string message;
  };
  for (const Case& c : {
           Case{{0, 6}, "index 6 at position 1 is out of range [0, 6)"},
           Case{{-1, 0}, "index -1 at position 0 is out of range [0, 6)"},
           Case{{1, 2, std::numeric_limits<int64_t>::max()}, "index 9223372036854775807 at position 2 is out of range [0, 6)"},
           Case{{std::numeric_limits<int64_t>::min()}, "index -9223372036854775808 at position 0 is out of range [0, 6)"},
           // Several outside: the first is named (the check counts them all in one pass).
           Case{{3, 9, 0, -2, 7}, "index 9 at position 1 is out of range [0, 6)"},
       }) {
    SCOPED_TRACE(c.message);
    Update u;
    u.Dense(Values<float>({1, 2, 3, 4}))
        .Sparse<float>(c.indices, std::vector<float>(c.indices.size(), 1.0f))
        .RowSparse<float>({}, {});
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid,
                         absl::StrCat("field 'ids' (float32[6], sparse_sum): ", c.message)));
  }
}

TEST(UpdateValidatorTest, RejectsRowIdOutOfRange) {
  const auto spec = ThreeEncodings();
  for (const auto& [ids, message] : std::vector<std::pair<std::vector<int64_t>, std::string>>{
           {{0, 1, 4}, "row id 4 at position 2 is out of range [0, 4)"},
           {{-3}, "row id -3 at position 0 is out of range [0, 4)"},
       }) {
    SCOPED_TRACE(message);
    Update u;
    u.Dense(Values<float>({1, 2, 3, 4}))
        .Sparse<float>({}, {})
        .RowSparse<float>(ids, std::vector<float>(ids.size() * 2, 1.0f));
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid,
                         absl::StrCat("field 'emb' (float32[4,2], row_sparse_sum): ", message)));
  }
}

TEST(UpdateValidatorTest, RejectsCountMismatchBetweenIndicesAndValues) {
  const auto spec = ThreeEncodings();
  {
    Update u;
    u.Dense(Values<float>({1, 2, 3, 4})).Sparse<float>({1, 2}, Values<float>({1})).RowSparse<float>({}, {});
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid, "but 1 values (4 bytes); send one value per index"));
  }
  {
    Update u;
    u.Dense(Values<float>({1, 2, 3, 4})).Sparse<float>({1}, Values<float>({1, 2})).RowSparse<float>({}, {});
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid, "but 2 values (8 bytes)"));
  }
  {
    // Values but no indices.
    Update u;
    u.Dense(Values<float>({1, 2, 3, 4})).Sparse<float>({}, Values<float>({1})).RowSparse<float>({}, {});
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid, "send one value per index"));
  }
  {
    // Row-sparse: 2 row ids, one and a half rows.
    Update u;
    u.Dense(Values<float>({1, 2, 3, 4})).Sparse<float>({}, {}).RowSparse<float>({1, 2}, Values<float>({1, 2, 3}));
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid,
                         "2 row ids but 1 rows (12 bytes); send one row per row id"));
  }
  {
    Update u;
    u.Dense(Values<float>({1, 2, 3, 4})).Sparse<float>({}, {}).RowSparse<float>({1}, Values<float>({1, 2, 3, 4}));
    EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid, "1 row ids but 2 rows (16 bytes)"));
  }
}

// Raw bits of a non-finite value of each floating dtype.
std::vector<std::byte> NonFinite(DType dtype, int which /*0: NaN, 1: +Inf, 2: -Inf*/) {
  const double x = which == 0 ? NAN : which == 1 ? INFINITY : -INFINITY;
  switch (dtype) {
    case DType::kFloat32: return ToBytes(std::vector<float>{1.0f, static_cast<float>(x)});
    case DType::kFloat64: return ToBytes(std::vector<double>{1.0, x});
    case DType::kFloat16:
      return ToBytes(std::vector<Float16>{
          FromDouble<Float16>(1), Float16{static_cast<uint16_t>(which == 0 ? 0x7e00 : which == 1 ? 0x7c00 : 0xfc00)}});
    case DType::kBFloat16:
      return ToBytes(std::vector<BFloat16>{
          FromDouble<BFloat16>(1), BFloat16{static_cast<uint16_t>(which == 0 ? 0x7fc0 : which == 1 ? 0x7f80 : 0xff80)}});
    default: return {};
  }
}

TEST(UpdateValidatorTest, NonFiniteRejectedOnlyWhenRequired) {
  ReductionOptions finite;
  finite.require_finite = true;
  for (DType dtype : kFloatDTypes) {
    for (int which = 0; which < 3; ++which) {
      for (Intrinsic intrinsic : {Intrinsic::kFederatedSum, Intrinsic::kFederatedMax, Intrinsic::kSparseSum,
                                  Intrinsic::kRowSparseMean}) {
        SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " ", which, " ", IntrinsicName(intrinsic)));
        // Two elements: dense [2], sparse two indices, row-sparse two rows of width 1.
        std::vector<int64_t> indices;
        if (intrinsic != Intrinsic::kFederatedSum && intrinsic != Intrinsic::kFederatedMax) indices = {0, 1};
        Update u;
        u.Raw(EncodingOf(intrinsic), dtype, indices, NonFinite(dtype, which));
        const auto strict = OneFieldSpec(dtype, {2}, intrinsic, false, finite);
        EXPECT_TRUE(StatusIs(ValidateUpdate(*strict, u.view()), kInvalid,
                             "holds NaN or Inf, and this aggregation requires finite values"));
        const auto lenient = OneFieldSpec(dtype, {2}, intrinsic);
        EXPECT_TRUE(IsOk(ValidateUpdate(*lenient, u.view())));
      }
    }
  }
}

TEST(UpdateValidatorTest, RequireFiniteAcceptsLargeFiniteValuesAndIntegers) {
  ReductionOptions finite;
  finite.require_finite = true;
  {
    Update u;
    u.Dense(std::vector<Float16>{Float16{0x7bff}, Float16{0xfbff}, Float16{0x0001}});  // +-65504, subnormal
    EXPECT_TRUE(IsOk(ValidateUpdate(*OneFieldSpec(DType::kFloat16, {3}, Intrinsic::kFederatedSum, false, finite),
                                    u.view())));
  }
  {
    Update u;
    u.Dense(std::vector<BFloat16>{BFloat16{0x7f7f}, BFloat16{0xff7f}, BFloat16{0x0001}});
    EXPECT_TRUE(IsOk(ValidateUpdate(*OneFieldSpec(DType::kBFloat16, {3}, Intrinsic::kFederatedSum, false, finite),
                                    u.view())));
  }
  {
    Update u;
    u.Dense(std::vector<double>{std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest(),
                                std::numeric_limits<double>::denorm_min()});
    EXPECT_TRUE(IsOk(ValidateUpdate(*OneFieldSpec(DType::kFloat64, {3}, Intrinsic::kFederatedSum, false, finite),
                                    u.view())));
  }
  {
    // The bit patterns of NaN in a float32 are ordinary values for an int32 field.
    Update u;
    u.Dense(std::vector<int32_t>{0x7fc00000, 0x7f800000, -1});
    EXPECT_TRUE(IsOk(ValidateUpdate(*OneFieldSpec(DType::kInt32, {3}, Intrinsic::kFederatedSum, false, finite),
                                    u.view())));
  }
}

TEST(UpdateValidatorTest, WeightRequiredExactlyForWeightedSpecs) {
  const auto weighted = ThreeEncodings({}, /*weighted=*/true);
  EXPECT_TRUE(StatusIs(ValidateUpdate(*weighted, Good().view()), kInvalid,
                       "this aggregation has a weighted field; send a weight with the update"));
  Update with_weight = Good();
  with_weight.Weight(2.5);
  EXPECT_TRUE(IsOk(ValidateUpdate(*weighted, with_weight.view())));

  const auto unweighted = ThreeEncodings();
  EXPECT_TRUE(StatusIs(ValidateUpdate(*unweighted, with_weight.view()), kInvalid,
                       "this aggregation has no weighted field; send the update without a weight"));
  // Even a weight of exactly 1 is refused on an unweighted spec.
  Update one = Good();
  one.Weight(1.0);
  EXPECT_TRUE(StatusIs(ValidateUpdate(*unweighted, one.view()), kInvalid, "without a weight"));
}

TEST(UpdateValidatorTest, RejectsBadWeights) {
  const auto weighted = ThreeEncodings({}, /*weighted=*/true);
  for (double w : std::initializer_list<double>{0.0, -0.0, -1.0, -1e-300, std::nan(""), INFINITY, -INFINITY}) {
    SCOPED_TRACE(w);
    Update u = Good();
    u.Weight(w);
    EXPECT_TRUE(StatusIs(ValidateUpdate(*weighted, u.view()), kInvalid,
                         "is invalid: it must be finite and greater than 0"));
  }
  Update negative = Good();
  negative.Weight(-2);
  EXPECT_TRUE(StatusIs(ValidateUpdate(*weighted, negative.view()), kInvalid, "weight -2 is invalid"));
}

// A weighted field accumulated in float32 multiplies by the weight in float32, so its
// weights are limited to [kMinFloat32Weight, kMaxFloat32Weight]; float64-accumulated
// weighted fields take any finite weight > 0.
TEST(UpdateValidatorTest, WeightRangeOfFloat32WeightedFields) {
  const auto float32_weighted = ThreeEncodings({}, /*weighted=*/true);
  EXPECT_TRUE(float32_weighted->has_float32_weighted_field());
  for (double w : {kMinFloat32Weight, 1.0, kMaxFloat32Weight}) {
    SCOPED_TRACE(w);
    Update u = Good();
    u.Weight(w);
    EXPECT_TRUE(IsOk(ValidateUpdate(*float32_weighted, u.view())));
  }
  for (double w : {std::nextafter(kMinFloat32Weight, 0.0), std::nextafter(kMaxFloat32Weight, INFINITY), 1e-300,
                   std::numeric_limits<double>::denorm_min(), 1e39, 1e300}) {
    SCOPED_TRACE(w);
    Update u = Good();
    u.Weight(w);
    EXPECT_TRUE(StatusIs(ValidateUpdate(*float32_weighted, u.view()), kInvalid,
                         absl::StrCat("weight ", w, " is outside [", kMinFloat32Weight, ", ", kMaxFloat32Weight,
                                      "], the range a float32-accumulated weighted field supports")));
  }

  // float64 accumulation, asked for or implied by the dtype, lifts the limit.
  ReductionOptions f64;
  f64.float64_accumulation = true;
  const auto float64_weighted = ThreeEncodings(f64, /*weighted=*/true);
  const auto f64_dtype = MakeSpec(ValueType::Struct({{"w", T(DType::kFloat64, {2})}, {"s", T(DType::kFloat32, {2})}}),
                                  {{Intrinsic::kFederatedWeightedMean}, {Intrinsic::kFederatedSum}});
  const auto int_dtype = OneFieldSpec(DType::kInt32, {2}, Intrinsic::kSparseWeightedMean);
  const auto bf16_dtype = OneFieldSpec(DType::kBFloat16, {2}, Intrinsic::kSparseWeightedMean);
  EXPECT_FALSE(float64_weighted->has_float32_weighted_field());
  EXPECT_FALSE(f64_dtype->has_float32_weighted_field());
  EXPECT_FALSE(int_dtype->has_float32_weighted_field());
  EXPECT_TRUE(bf16_dtype->has_float32_weighted_field());
  for (double w : {1e-300, std::numeric_limits<double>::denorm_min(), 1e39, 1e300}) {
    SCOPED_TRACE(w);
    Update u = Good();
    u.Weight(w);
    EXPECT_TRUE(IsOk(ValidateUpdate(*float64_weighted, u.view())));
    Update v;
    v.Dense(Values<double>({1, 2})).Dense(Values<float>({1, 2})).Weight(w);
    EXPECT_TRUE(IsOk(ValidateUpdate(*f64_dtype, v.view())));
    Update i;
    i.Sparse<int32_t>({1}, {7}).Weight(w);
    EXPECT_TRUE(IsOk(ValidateUpdate(*int_dtype, i.view())));
    Update b;
    b.Sparse<BFloat16>({1}, Values<BFloat16>({7})).Weight(w);
    EXPECT_TRUE(StatusIs(ValidateUpdate(*bf16_dtype, b.view()), kInvalid, "is outside ["));
  }
}

TEST(UpdateValidatorTest, ReportsTheFirstBadField) {
  const auto spec = ThreeEncodings();
  Update u;
  u.Dense(Values<float>({1, 2, 3, 4})).Sparse<float>({9}, Values<float>({1})).RowSparse<float>({9}, Values<float>({1, 2}));
  EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, u.view()), kInvalid, "field 'ids'"));
}

TEST(UpdateValidatorTest, ValidateFieldAlone) {
  const auto spec = ThreeEncodings();
  const FieldSpec& emb = spec->fields()[2];
  Update good;
  good.RowSparse<float>({1}, Values<float>({1, 2}));
  EXPECT_TRUE(IsOk(ValidateField(*spec, emb, good.view().fields[0])));
  Update bad;
  bad.RowSparse<float>({4}, Values<float>({1, 2}));
  EXPECT_TRUE(StatusIs(ValidateField(*spec, emb, bad.view().fields[0]), kInvalid,
                       "field 'emb' (float32[4,2], row_sparse_sum): row id 4"));
}

// ValidateAndMarkUpdate reports, per sparse field, whether its indices ascend (repeats
// allowed), from the same pass that checks their bounds; dense fields are never marked.
TEST(UpdateValidatorTest, MarksTheFieldsWhoseIndicesAscend) {
  const auto spec = ThreeEncodings();
  const Update good = Good();
  UpdateView ascending = good.view();  // ids {0, 5, 5}, emb rows {3, 0}
  ASSERT_TRUE(IsOk(ValidateAndMarkUpdate(*spec, ascending)));
  EXPECT_FALSE(ascending.fields[0].ascending);  // dense
  EXPECT_TRUE(ascending.fields[1].ascending);   // repeats allowed
  EXPECT_FALSE(ascending.fields[2].ascending);  // 3 then 0
  Update sorted;
  sorted.Dense(Values<float>({1, 2, 3, 4})).Sparse<float>({4, 1}, Values<float>({1, 2})).RowSparse<float>({0, 3}, Values<float>({1, 2, 3, 4}));
  UpdateView marked = sorted.view();
  ASSERT_TRUE(IsOk(ValidateAndMarkUpdate(*spec, marked)));
  EXPECT_FALSE(marked.fields[1].ascending);
  EXPECT_TRUE(marked.fields[2].ascending);
  Update empty;
  empty.Dense(Values<float>({0, 0, 0, 0})).Sparse<float>({}, {}).RowSparse<float>({}, {});
  UpdateView nothing = empty.view();
  ASSERT_TRUE(IsOk(ValidateAndMarkUpdate(*spec, nothing)));
  EXPECT_TRUE(nothing.fields[1].ascending && nothing.fields[2].ascending);
  // Refused as ValidateUpdate refuses it.
  Update bad;
  bad.Dense(Values<float>({1, 2, 3, 4})).Sparse<float>({0, 6}, Values<float>({1, 2})).RowSparse<float>({}, {});
  UpdateView refused = bad.view();
  EXPECT_TRUE(StatusIs(ValidateAndMarkUpdate(*spec, refused), kInvalid, "index 6 at position 1 is out of range"));
}

TEST(UpdateValidatorTest, ZeroSizedFields) {
  // A [0]-shaped dense field takes zero bytes; a [3, 0] row table takes empty rows.
  const auto spec = MakeSpec(ValueType::Struct({{"e", T(DType::kFloat32, {0})}, {"r", T(DType::kFloat32, {3, 0})}}),
                             {{Intrinsic::kFederatedSum}, {Intrinsic::kRowSparseSum}});
  Update u;
  u.Dense<float>({}).RowSparse<float>({0, 2}, {});
  EXPECT_TRUE(IsOk(ValidateUpdate(*spec, u.view())));
  Update bad;
  bad.Dense<float>({}).RowSparse<float>({3}, {});
  EXPECT_TRUE(StatusIs(ValidateUpdate(*spec, bad.view()), kInvalid, "row id 3 at position 0 is out of range [0, 3)"));
}

}  // namespace
}  // namespace fedagg
