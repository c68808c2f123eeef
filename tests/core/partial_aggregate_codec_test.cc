// Tests of the partial-aggregate binary format: Serialize / Deserialize round trips for
// every accumulator kind, and every malformed input (truncated, trailing bytes, bad magic,
// bad version, another spec, inconsistent headers, counts and indices) refused with
// DATA_LOSS or FAILED_PRECONDITION while nothing else changes.
//
// Layout relied on below (little-endian):
//   "FAPA" | u32 version | u64 n, canonical spec (n bytes) | i64 contributions |
//   f64 weight sum | u32 field count | per field: u8 intrinsic, u8 accumulation dtype,
//   then the accumulator's arrays, each a u64 element count followed by the elements.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/core/byte_codec.h"
#include "service/core/cpu_kernels.h"
#include "service/core/partial_aggregate.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::IsOk;
using ::fedagg::testing::kAllDTypes;
using ::fedagg::testing::kAllIntrinsics;
using ::fedagg::testing::MakeSpec;
using ::fedagg::testing::T;
using ::fedagg::testing::OneFieldSpec;
using ::fedagg::testing::SameTensor;
using ::fedagg::testing::Snapshot;
using ::fedagg::testing::StatusIs;
using ::fedagg::testing::TakeSnapshot;
using ::fedagg::testing::Unchanged;
using ::fedagg::testing::Update;
using ::fedagg::testing::ValueOrDie;
using ::fedagg::testing::Values;
using ::fedagg::testing::Views;

constexpr auto kDataLoss = absl::StatusCode::kDataLoss;


template <typename V>
void Patch(std::string& bytes, size_t offset, V value) {
  ASSERT_LE(offset + sizeof(V), bytes.size());
  std::memcpy(bytes.data() + offset, &value, sizeof(V));
}
template <typename V>
V Read(const std::string& bytes, size_t offset) {
  V value{};
  std::memcpy(&value, bytes.data() + offset, sizeof(V));
  return value;
}

// Offsets in the header of a serialized aggregate of `spec`.
struct Layout {
  explicit Layout(const ReductionSpec& spec) : canonical_size(spec.canonical().size()) {}
  size_t canonical_size;
  size_t contributions() const { return 16 + canonical_size; }
  size_t weight_sum() const { return 24 + canonical_size; }
  size_t field_count() const { return 32 + canonical_size; }
  size_t first_field() const { return 36 + canonical_size; }  // u8 intrinsic, u8 accumulation dtype
  size_t first_payload() const { return first_field() + 2; }
};

// One update for a single-field spec of any intrinsic, values derived from `seed`.
Update OneUpdate(const ReductionSpec& spec, int seed) {
  const FieldSpec& field = spec.fields()[0];
  Update u;
  cpu::DispatchDType(field.type.dtype, [&](auto tag) {
    using V = typename decltype(tag)::type;
    switch (field.encoding) {
      case Encoding::kDense: {
        std::vector<V> values;
        for (int64_t i = 0; i < field.row_width; ++i) values.push_back(::fedagg::testing::FromDouble<V>((i * 3 + seed) % 7 - 3));
        u.Dense(values);
        break;
      }
      case Encoding::kSparse:
        // A repeated index, so that counting it once survives the round trip.
        u.Sparse<V>({seed % field.rows, (seed + 2) % field.rows, seed % field.rows}, Values<V>({1, -2, static_cast<double>(seed)}));
        break;
      case Encoding::kRowSparse: {
        std::vector<V> rows;
        for (int64_t i = 0; i < 2 * field.row_width; ++i) rows.push_back(::fedagg::testing::FromDouble<V>(i - seed));
        u.RowSparse<V>({seed % field.rows, seed % field.rows}, rows);
        break;
      }
    }
  });
  if (spec.has_weighted_field()) u.Weight(0.5 + seed);
  return u;
}

void ExpectSameReport(const PartialAggregate& a, const PartialAggregate& b) {
  const AggregateResult x = ValueOrDie(a.Report());
  const AggregateResult y = ValueOrDie(b.Report());
  EXPECT_EQ(x.contributions, y.contributions);
  EXPECT_EQ(x.weight_sum, y.weight_sum);
  ASSERT_EQ(x.fields.size(), y.fields.size());
  for (size_t f = 0; f < x.fields.size(); ++f) {
    EXPECT_EQ(x.fields[f].path, y.fields[f].path);
    EXPECT_TRUE(SameTensor(x.fields[f].value, y.fields[f].value));
    EXPECT_EQ(x.fields[f].indices, y.fields[f].indices);
    EXPECT_EQ(x.fields[f].counts, y.fields[f].counts);
  }
}

TEST(PartialAggregateCodecTest, RoundTripsEveryIntrinsicAndDType) {
  for (DType dtype : kAllDTypes) {
    for (Intrinsic intrinsic : kAllIntrinsics) {
      for (bool counts : {false, true}) {
        if (counts && !IsSparseFamily(intrinsic)) continue;
        SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " ", IntrinsicName(intrinsic), counts ? " +counts" : ""));
        const auto spec = OneFieldSpec(dtype, {5, 3}, intrinsic, counts);
        PartialAggregate original(spec);
        const std::vector<Update> updates = [&] {
          std::vector<Update> u;
          for (int seed = 1; seed <= 3; ++seed) u.push_back(OneUpdate(*spec, seed));
          return u;
        }();
        ASSERT_TRUE(IsOk(original.AccumulateBatch(Views(updates))));
        const std::string bytes = original.Serialize().value();
        PartialAggregate restored = ValueOrDie(PartialAggregate::Deserialize(spec, bytes));
        EXPECT_EQ(restored.Serialize().value(), bytes);
        EXPECT_EQ(restored.contributions(), 3);
        EXPECT_EQ(restored.weight_sum(), original.weight_sum());
        ExpectSameReport(original, restored);
        // The restored aggregate goes on exactly like the original (an update with a
        // repeated index still counts once after the round trip).
        const Update more = OneUpdate(*spec, 4);
        ASSERT_TRUE(IsOk(original.Accumulate(more.view())));
        ASSERT_TRUE(IsOk(restored.Accumulate(more.view())));
        EXPECT_EQ(restored.Serialize().value(), original.Serialize().value());
        ExpectSameReport(original, restored);
        // And merges like it.
        PartialAggregate via_bytes(spec), direct(spec);
        ASSERT_TRUE(IsOk(via_bytes.MergeWith(ValueOrDie(PartialAggregate::Deserialize(spec, bytes)))));
        ASSERT_TRUE(IsOk(direct.MergeWith(ValueOrDie(PartialAggregate::Deserialize(spec, bytes)))));
        EXPECT_EQ(via_bytes.Serialize().value(), direct.Serialize().value());
      }
    }
  }
}

TEST(PartialAggregateCodecTest, HeaderFields) {
  const auto spec = OneFieldSpec(DType::kFloat32, {3}, Intrinsic::kFederatedWeightedMean);
  PartialAggregate partial(spec);
  Update u;
  u.Dense(Values<float>({1, 2, 3})).Weight(2.5);
  ASSERT_TRUE(IsOk(partial.Accumulate(u.view())));
  const std::string bytes = partial.Serialize().value();
  const Layout layout(*spec);
  EXPECT_EQ(bytes.substr(0, 4), "FAPA");
  EXPECT_EQ(Read<uint32_t>(bytes, 4), PartialAggregate::kFormatVersion);
  EXPECT_EQ(Read<uint64_t>(bytes, 8), spec->canonical().size());
  EXPECT_EQ(bytes.substr(16, spec->canonical().size()), spec->canonical());
  EXPECT_EQ(Read<int64_t>(bytes, layout.contributions()), 1);
  EXPECT_EQ(Read<double>(bytes, layout.weight_sum()), 2.5);
  EXPECT_EQ(Read<uint32_t>(bytes, layout.field_count()), 1u);
  EXPECT_EQ(Read<uint8_t>(bytes, layout.first_field()), static_cast<uint8_t>(Intrinsic::kFederatedWeightedMean));
  EXPECT_EQ(Read<uint8_t>(bytes, layout.first_field() + 1), static_cast<uint8_t>(DType::kFloat32));
  EXPECT_EQ(Read<uint64_t>(bytes, layout.first_payload()), 3u);
  EXPECT_EQ(Read<float>(bytes, layout.first_payload() + 8), 2.5f);       // weight * value
  EXPECT_EQ(Read<float>(bytes, layout.first_payload() + 8 + 8), 7.5f);
  EXPECT_EQ(bytes.size(), layout.first_payload() + 8 + 3 * 4);
}

TEST(PartialAggregateCodecTest, EmptyAggregateRoundTrips) {
  for (Intrinsic intrinsic : kAllIntrinsics) {
    SCOPED_TRACE(IntrinsicName(intrinsic));
    const auto spec = OneFieldSpec(DType::kFloat32, {4, 2}, intrinsic);
    const std::string bytes = PartialAggregate(spec).Serialize().value();
    PartialAggregate restored = ValueOrDie(PartialAggregate::Deserialize(spec, bytes));
    EXPECT_EQ(restored.contributions(), 0);
    EXPECT_EQ(restored.Serialize().value(), bytes);
    EXPECT_TRUE(StatusIs(restored.Report(), absl::StatusCode::kFailedPrecondition, "no contributions"));
    // Max / min of nothing stay the identity of their merge after the round trip.
    const Update u = OneUpdate(*spec, 1);
    PartialAggregate fresh(spec);
    ASSERT_TRUE(IsOk(fresh.Accumulate(u.view())));
    ASSERT_TRUE(IsOk(restored.MergeWith(fresh)));
    ExpectSameReport(restored, fresh);
  }
}

// A struct spec with one field of each accumulator kind, and some state.
std::shared_ptr<const ReductionSpec> CodecSpec() {
  return MakeSpec(ValueType::Struct({{"w", T(DType::kFloat32, {3})},
                                     {"ids", T(DType::kInt64, {10})},
                                     {"emb", T(DType::kFloat16, {4, 2})},
                                     {"u", T(DType::kFloat64, {8})}}),
                  {{Intrinsic::kFederatedWeightedMean},
                   {Intrinsic::kSparseWeightedMean, true},
                   {Intrinsic::kRowSparseMean, true},
                   {Intrinsic::kSparseSumSparse, true}});
}

PartialAggregate MixedAggregate() {
  PartialAggregate partial(CodecSpec());
  std::vector<Update> updates(3);
  for (int i = 0; i < 3; ++i) {
    updates[i]
        .Dense(Values<float>({1.0 + i, 2, 3}))
        .Sparse<int64_t>({i, 9, 9}, {1, 2, 3})
        .RowSparse<Float16>({i % 4}, Values<Float16>({0.5, -1}))
        .Sparse<double>({7 - i, 1}, Values<double>({0.25, static_cast<double>(i)}))
        .Weight(1 + i);
  }
  EXPECT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
  return partial;
}

// Deserializing `bytes` for `spec` (CodecSpec() by default) fails with `code` and a message
// containing `message`.
::testing::AssertionResult Refused(const std::string& bytes, absl::StatusCode code, absl::string_view message,
                                   std::shared_ptr<const ReductionSpec> spec = nullptr) {
  if (spec == nullptr) spec = CodecSpec();
  absl::StatusOr<PartialAggregate> result = PartialAggregate::Deserialize(spec, bytes);
  return StatusIs(result, code, message);
}

TEST(PartialAggregateCodecTest, RefusesEveryTruncation) {
  const PartialAggregate source = MixedAggregate();
  const Snapshot before = TakeSnapshot(source);
  const std::string bytes = source.Serialize().value();
  for (size_t n = 0; n < bytes.size(); ++n) {
    SCOPED_TRACE(n);
    ASSERT_TRUE(Refused(bytes.substr(0, n), kDataLoss, "partial aggregate"));
  }
  EXPECT_TRUE(Refused(bytes.substr(0, bytes.size() - 1), kDataLoss, "truncated"));
  EXPECT_TRUE(Unchanged(source, before));
}

TEST(PartialAggregateCodecTest, RefusesTrailingBytes) {
  const std::string bytes = MixedAggregate().Serialize().value();
  EXPECT_TRUE(Refused(bytes + std::string(1, '\0'), kDataLoss, "has 1 trailing bytes"));
  EXPECT_TRUE(Refused(bytes + "12345678", kDataLoss, "has 8 trailing bytes"));
  EXPECT_TRUE(Refused(bytes + bytes, kDataLoss, "trailing bytes"));
}

TEST(PartialAggregateCodecTest, RefusesBadMagic) {
  const std::string bytes = MixedAggregate().Serialize().value();
  for (size_t i = 0; i < 4; ++i) {
    std::string bad = bytes;
    bad[i] ^= 0x20;
    EXPECT_TRUE(Refused(bad, kDataLoss, "not a fedagg partial aggregate (bad magic bytes)"));
  }
  EXPECT_TRUE(Refused("GARBAGE_GARBAGE_GARBAGE", kDataLoss, "bad magic"));
}

TEST(PartialAggregateCodecTest, RefusesOtherVersions) {
  const std::string bytes = MixedAggregate().Serialize().value();
  for (uint32_t version : {0u, 4u, 0xffffffffu}) {
    std::string bad = bytes;
    Patch<uint32_t>(bad, 4, version);
    EXPECT_TRUE(Refused(bad, kDataLoss, absl::StrCat("format version ", version,
                                                     " is not supported; this build reads versions 1, 2 and 3")));
  }
  {  // version 3 (16-bit sums, narrowed_partial_test.cc) has a dtype byte version 1 lacks
    std::string bad = bytes;
    Patch<uint32_t>(bad, 4, 3);
    EXPECT_FALSE(PartialAggregate::Deserialize(CodecSpec(), bad).ok());
  }
  {  // version 2 is a deterministic aggregation's layout
    std::string bad = bytes;
    Patch<uint32_t>(bad, 4, 2);
    EXPECT_TRUE(Refused(bad, kDataLoss, "has format version 2, but its spec's partials are version 1"));
  }
}

TEST(PartialAggregateCodecTest, RefusesAnotherSpecsAggregate) {
  const std::string bytes = MixedAggregate().Serialize().value();
  ReductionOptions finite;
  finite.require_finite = true;
  const auto other_options = MakeSpec(CodecSpec()->value_type(),
                                      {{Intrinsic::kFederatedWeightedMean},
                                       {Intrinsic::kSparseWeightedMean, true},
                                       {Intrinsic::kRowSparseMean, true},
                                       {Intrinsic::kSparseSumSparse, true}},
                                      finite);
  const auto other_counts = MakeSpec(CodecSpec()->value_type(),
                                     {{Intrinsic::kFederatedWeightedMean},
                                      {Intrinsic::kSparseWeightedMean, false},
                                      {Intrinsic::kRowSparseMean, true},
                                      {Intrinsic::kSparseSumSparse, true}});
  for (const auto& other : {other_options, other_counts, OneFieldSpec(DType::kFloat32, {3}, Intrinsic::kFederatedSum)}) {
    SCOPED_TRACE(other->canonical());
    EXPECT_TRUE(Refused(bytes, absl::StatusCode::kFailedPrecondition,
                        absl::StrCat("partial aggregate was built for spec ", CodecSpec()->canonical(),
                                     ", expected ", other->canonical()),
                        other));
  }
  // An edited canonical string is another spec too.
  std::string bad = bytes;
  bad[16] = '[';
  EXPECT_TRUE(Refused(bad, absl::StatusCode::kFailedPrecondition, "partial aggregate was built for spec"));
}

TEST(PartialAggregateCodecTest, RefusesInvalidTotals) {
  const auto spec = CodecSpec();
  const Layout layout(*spec);
  const std::string bytes = MixedAggregate().Serialize().value();
  {
    std::string bad = bytes;
    Patch<int64_t>(bad, layout.contributions(), -1);
    EXPECT_TRUE(Refused(bad, kDataLoss, "partial aggregate has invalid totals: -1 contributions"));
  }
  for (double w : {-1.0, std::nan(""), static_cast<double>(INFINITY)}) {
    SCOPED_TRACE(w);
    std::string bad = bytes;
    Patch<double>(bad, layout.weight_sum(), w);
    EXPECT_TRUE(Refused(bad, kDataLoss, "invalid totals"));
  }
}

// Totals must be consistent with the spec: an unweighted aggregate weighs one per
// contribution; a weighted one has a positive weight sum exactly when it has contributions.
TEST(PartialAggregateCodecTest, RefusesTotalsInconsistentWithTheSpec) {
  for (Intrinsic intrinsic : {Intrinsic::kFederatedSum, Intrinsic::kFederatedWeightedMean}) {
    SCOPED_TRACE(IntrinsicName(intrinsic));
    const auto spec = OneFieldSpec(DType::kFloat32, {3}, intrinsic);
    PartialAggregate partial(spec);
    Update update = OneUpdate(*spec, 1);
    ASSERT_TRUE(IsOk(partial.Accumulate(update.view())));
    const Layout layout(*spec);
    std::string bad = partial.Serialize().value();
    Patch<double>(bad, layout.weight_sum(), intrinsic == Intrinsic::kFederatedSum ? 2.0 : 0.0);
    absl::StatusOr<PartialAggregate> read = PartialAggregate::Deserialize(spec, bad);
    EXPECT_EQ(read.status().code(), kDataLoss);
    EXPECT_NE(read.status().message().find("invalid totals"), std::string::npos) << read.status();
  }
}

TEST(PartialAggregateCodecTest, RefusesMismatchedFieldHeaders) {
  const auto spec = CodecSpec();
  const Layout layout(*spec);
  const std::string bytes = MixedAggregate().Serialize().value();
  {
    std::string bad = bytes;
    Patch<uint32_t>(bad, layout.field_count(), 3);
    EXPECT_TRUE(Refused(bad, kDataLoss, "partial aggregate has 3 fields, spec has 4"));
  }
  {
    std::string bad = bytes;
    Patch<uint8_t>(bad, layout.first_field(), static_cast<uint8_t>(Intrinsic::kFederatedSum));
    EXPECT_TRUE(Refused(bad, kDataLoss, "partial aggregate field 0 header does not match field 'w'"));
  }
  {
    std::string bad = bytes;
    Patch<uint8_t>(bad, layout.first_field() + 1, static_cast<uint8_t>(DType::kFloat64));
    EXPECT_TRUE(Refused(bad, kDataLoss, "field 0 header does not match"));
  }
}

TEST(PartialAggregateCodecTest, RefusesWrongArrayLengths) {
  const auto spec = OneFieldSpec(DType::kFloat32, {4}, Intrinsic::kFederatedSum);
  const Layout layout(*spec);
  PartialAggregate partial(spec);
  Update u;
  u.Dense(Values<float>({1, 2, 3, 4}));
  ASSERT_TRUE(IsOk(partial.Accumulate(u.view())));
  const std::string bytes = partial.Serialize().value();
  for (uint64_t count : {uint64_t{3}, uint64_t{5}, std::numeric_limits<uint64_t>::max()}) {
    std::string bad = bytes;
    Patch<uint64_t>(bad, layout.first_payload(), count);
    EXPECT_TRUE(Refused(bad, kDataLoss, absl::StrCat("field 'value' has ", count, " elements, expected 4"), spec));
  }
}

TEST(PartialAggregateCodecTest, RefusesBadScatterCountsAndWeights) {
  // sparse_weighted_mean of float32[3] with counts: acc (3 floats), counts (3), weight sums (3).
  const auto spec = OneFieldSpec(DType::kFloat32, {3}, Intrinsic::kSparseWeightedMean, true);
  const Layout layout(*spec);
  PartialAggregate partial(spec);
  std::vector<Update> updates(2);
  updates[0].Sparse<float>({0, 2}, Values<float>({1, 1})).Weight(1);
  updates[1].Sparse<float>({2}, Values<float>({3})).Weight(2);
  ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
  const std::string bytes = partial.Serialize().value();
  const size_t counts_at = layout.first_payload() + 8 + 3 * 4 + 8;
  const size_t weights_at = counts_at + 3 * 8 + 8;
  ASSERT_EQ(Read<int64_t>(bytes, counts_at + 16), 2);  // coordinate 2: both updates
  ASSERT_EQ(Read<double>(bytes, weights_at + 16), 3.0);
  ASSERT_EQ(bytes.size(), weights_at + 3 * 8);
  for (int64_t count : {int64_t{3}, int64_t{-1}, std::numeric_limits<int64_t>::max()}) {
    std::string bad = bytes;
    Patch<int64_t>(bad, counts_at + 8, count);
    EXPECT_TRUE(Refused(bad, kDataLoss, absl::StrCat("field 'value' has a count of ", count, " with only 2 contributions"), spec));
  }
  for (double w : {-0.5, std::nan(""), static_cast<double>(INFINITY)}) {
    std::string bad = bytes;
    Patch<double>(bad, weights_at, w);
    EXPECT_TRUE(Refused(bad, kDataLoss, "field 'value' has an invalid weight sum", spec));
  }
  {
    std::string bad = bytes;
    Patch<uint64_t>(bad, counts_at - 8, 2);
    EXPECT_TRUE(Refused(bad, kDataLoss, "field 'value' counts has 2 elements, expected 3", spec));
  }
}

TEST(PartialAggregateCodecTest, RefusesBadSparseUnionState) {
  // sparse_sum_sparse of int32[6]: indices (nnz int64), values (nnz int64), counts (nnz).
  const auto spec = OneFieldSpec(DType::kInt32, {6}, Intrinsic::kSparseSumSparse, true);
  const Layout layout(*spec);
  PartialAggregate partial(spec);
  std::vector<Update> updates(2);
  updates[0].Sparse<int32_t>({1, 4}, {10, 20});
  updates[1].Sparse<int32_t>({4, 5}, {1, 2});
  ASSERT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
  const std::string bytes = partial.Serialize().value();
  const size_t indices_at = layout.first_payload() + 8;
  const size_t values_at = indices_at + 3 * 8 + 8;
  const size_t counts_at = values_at + 3 * 8 + 8;
  ASSERT_EQ(Read<uint64_t>(bytes, layout.first_payload()), 3u);
  ASSERT_EQ(Read<int64_t>(bytes, indices_at + 8), 4);
  ASSERT_EQ(Read<int64_t>(bytes, values_at + 8), 21);
  ASSERT_EQ(Read<int64_t>(bytes, counts_at + 8), 2);
  ASSERT_EQ(bytes.size(), counts_at + 3 * 8);
  struct Case {
    size_t offset;
    int64_t value;
    std::string message;
  };
  for (const Case& c : {
           Case{indices_at, 6, "field 'value' index 6 at entry 0 is out of range or not strictly increasing"},
           Case{indices_at, -1, "index -1 at entry 0 is out of range"},
           Case{indices_at + 8, 1, "index 1 at entry 1 is out of range or not strictly increasing"},
           Case{indices_at + 8, 0, "index 0 at entry 1 is out of range or not strictly increasing"},
           Case{counts_at, 0, "field 'value' entry 0 has count 0 with 2 contributions"},
           Case{counts_at + 16, 3, "entry 2 has count 3 with 2 contributions"},
           Case{counts_at + 8, -5, "entry 1 has count -5"},
       }) {
    SCOPED_TRACE(c.message);
    std::string bad = bytes;
    Patch<int64_t>(bad, c.offset, c.value);
    EXPECT_TRUE(Refused(bad, kDataLoss, c.message, spec));
  }
  {
    // More entries than the field has coordinates.
    std::string bad = bytes.substr(0, layout.first_payload());
    ByteWriter extra;
    std::vector<int64_t> seven = {0, 1, 2, 3, 4, 5, 6};
    extra.PutArray(seven.data(), seven.size());
    extra.PutArray(seven.data(), seven.size());
    extra.PutArray(seven.data(), seven.size());
    bad += extra.Take();
    EXPECT_TRUE(Refused(bad, kDataLoss, "field 'value' has 7 entries but only 6 coordinates", spec));
  }
  {
    // A length that claims more than the input holds must not allocate it.
    std::string bad = bytes;
    Patch<uint64_t>(bad, layout.first_payload(), std::numeric_limits<uint64_t>::max() / 8);
    EXPECT_TRUE(Refused(bad, kDataLoss, "truncated", spec));
  }
  {
    std::string bad = bytes;
    Patch<uint64_t>(bad, values_at - 8, 2);
    EXPECT_TRUE(Refused(bad, kDataLoss, "field 'value' values has 2 elements, expected 3", spec));
  }
}

// Random single-byte corruptions never crash; each is refused with DATA_LOSS or
// FAILED_PRECONDITION, or accepted — and then the bytes are a faithful encoding.
TEST(PartialAggregateCodecTest, RandomCorruptionIsRefusedOrFaithful) {
  const std::random_device::result_type seed = std::random_device{}();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  std::mt19937 rng(seed);
  const PartialAggregate source = MixedAggregate();
  const Snapshot before = TakeSnapshot(source);
  const std::string bytes = source.Serialize().value();
  int refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string bad = bytes;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < flips; ++i) {
      bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    }
    absl::StatusOr<PartialAggregate> result = PartialAggregate::Deserialize(CodecSpec(), bad);
    if (result.ok()) {
      ASSERT_EQ(result->Serialize().value(), bad) << "trial " << trial;
    } else {
      ++refused;
      ASSERT_TRUE(result.status().code() == kDataLoss ||
                  result.status().code() == absl::StatusCode::kFailedPrecondition)
          << "trial " << trial << ": " << result.status();
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_TRUE(Unchanged(source, before));
}

// Hands `bytes` to a ByteReader in pieces of `piece` bytes, as a stream's chunks arrive;
// after `fail_after` bytes (if set) it fails the way a broken stream does.
class PieceSource : public ByteSource {
 public:
  PieceSource(absl::string_view bytes, size_t piece, size_t fail_after = std::string::npos)
      : bytes_(bytes), piece_(piece), fail_after_(std::min(fail_after, bytes.size())) {}
  absl::StatusOr<absl::string_view> Next() override {
    if (offset_ == fail_after_) return absl::CancelledError("the stream broke");
    const size_t n = std::min(piece_, fail_after_ - offset_);
    const absl::string_view out = bytes_.substr(offset_, n);
    offset_ += n;
    return out;
  }

 private:
  const absl::string_view bytes_;
  const size_t piece_;
  const size_t fail_after_;
  size_t offset_ = 0;
};

// A sparse_sum_sparse partial with more entries than one block of the decoder (2^16) over
// many shards, for the streamed decode.
std::shared_ptr<const ReductionSpec> LargeUnionSpec() {
  return OneFieldSpec(DType::kFloat32, {int64_t{1} << 22}, Intrinsic::kSparseSumSparse, true);
}

PartialAggregate LargeUnionAggregate() {
  PartialAggregate partial(LargeUnionSpec());
  std::vector<Update> updates(2);
  for (int u = 0; u < 2; ++u) {
    std::vector<int64_t> indices;
    std::vector<float> values;
    for (int64_t i = 0; i < 60000; ++i) {
      indices.push_back((i * 61 + u * 17) % (int64_t{1} << 22));
      values.push_back(static_cast<float>(i % 13) - 6.0f);
    }
    updates[u].Sparse<float>(indices, values);
  }
  EXPECT_TRUE(IsOk(partial.AccumulateBatch(Views(updates))));
  return partial;
}

// Read as its chunks arrive, in pieces of any size, a partial decodes to the same state
// as read whole.
TEST(PartialAggregateCodecTest, DecodesTheSameWhenReadAsItsChunksArrive) {
  struct Case {
    std::shared_ptr<const ReductionSpec> spec;
    PartialAggregate source;
  };
  Case cases[] = {{CodecSpec(), MixedAggregate()}, {LargeUnionSpec(), LargeUnionAggregate()}};
  for (const auto& [spec, source] : cases) {
    const std::string bytes = source.Serialize().value();
    for (size_t piece : {size_t{1}, size_t{3}, size_t{8}, size_t{13}, size_t{4096}, bytes.size()}) {
      if (piece == 1 && bytes.size() > 100000) continue;  // a byte at a time is slow, not different
      SCOPED_TRACE(absl::StrCat(bytes.size(), " bytes in pieces of ", piece));
      PieceSource pieces(bytes, piece);
      ByteReader in(pieces, bytes.size());
      PartialAggregate decoded = ValueOrDie(PartialAggregate::Deserialize(spec, in));
      EXPECT_EQ(decoded.Serialize().value(), bytes);
      ExpectSameReport(decoded, source);
    }
  }
}

// A stream that breaks while its partial is read fails the decode with the stream's own
// error, wherever it breaks; a stream that carries more than it declared is refused.
TEST(PartialAggregateCodecTest, AStreamThatBreaksOrRunsOverFailsTheDecode) {
  const std::string bytes = MixedAggregate().Serialize().value();
  for (size_t fail_after = 0; fail_after < bytes.size(); ++fail_after) {
    SCOPED_TRACE(fail_after);
    PieceSource pieces(bytes, 7, fail_after);
    ByteReader in(pieces, bytes.size());
    ASSERT_TRUE(StatusIs(PartialAggregate::Deserialize(CodecSpec(), in), absl::StatusCode::kCancelled,
                         "the stream broke"));
  }
  const std::string longer = bytes + "extra";
  PieceSource pieces(longer, longer.size());
  ByteReader in(pieces, bytes.size());
  EXPECT_TRUE(StatusIs(PartialAggregate::Deserialize(CodecSpec(), in), kDataLoss,
                       absl::StrCat("its input runs past the ", bytes.size(), " bytes declared")));
}

}  // namespace
}  // namespace fedagg
