// Unit tests of the load generator's pieces that need no server: the incremental update
// encoder, the fault plan's counts, the generated updates (valid for their spec, of the
// asked density) and the result check (it passes on the real reduction of what was sent
// and fails on a wrong result).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "client_stub/loadgen/result_check.h"
#include "client_stub/loadgen/workload.h"
#include "client_stub/update_encoder.h"
#include "gtest/gtest.h"
#include "service/core/crc32c.h"
#include "service/core/partial_aggregate.h"
#include "service/core/update_validator.h"

namespace fedagg::loadgen {
namespace {

std::shared_ptr<const ReductionSpec> Spec(const std::string& type, std::vector<FieldIntrinsic> intrinsics) {
  auto parsed = ParseValueType(type);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  auto spec = ReductionSpec::Create(*parsed, std::move(intrinsics));
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

// A struct with every encoding, an integer field and a weighted one.
std::shared_ptr<const ReductionSpec> MixedSpec() {
  return Spec("<d=float32[7,3],e=float32[50,4],t=int64[1000],h=int32[5],b=bfloat16[9]>",
              {{Intrinsic::kFederatedWeightedMean},
               {Intrinsic::kRowSparseMean, true},
               {Intrinsic::kSparseSumSparse, true},
               {Intrinsic::kFederatedSum},
               {Intrinsic::kFederatedMax}});
}

TEST(UpdateEncoderTest, PiecesInWireOrderWithTheChecksumOfAllSections) {
  auto spec = MixedSpec();
  auto pool = GenerateUpdates(*spec, {1, 0.1, 0.01, 1, 1}, 1, 7);
  ASSERT_TRUE(pool.ok()) << pool.status();
  const UpdateView& update = (*pool)[0].view();
  UpdateEncoder encoder("agg", "", update, /*chunk_bytes=*/16);
  std::vector<v1::ContributeRequest> pieces;
  while (!encoder.done()) encoder.Next(pieces.emplace_back());
  EXPECT_EQ(static_cast<int64_t>(pieces.size()), encoder.total_pieces());
  EXPECT_EQ(encoder.pieces_produced(), encoder.total_pieces());
  ASSERT_TRUE(pieces.front().has_header());
  EXPECT_EQ(pieces.front().header().aggregation_id(), "agg");
  EXPECT_TRUE(pieces.front().header().client_id().empty());
  EXPECT_TRUE(pieces.front().header().has_weight());
  ASSERT_EQ(pieces.front().header().fields_size(), 5);
  EXPECT_EQ(pieces.front().header().fields(1).nnz(), 5);  // 10% of 50 rows
  ASSERT_TRUE(pieces.back().has_end());
  // Reassemble every section from the chunks and compare with the update itself.
  std::vector<std::string> sections(2 * update.fields.size());
  for (size_t i = 1; i + 1 < pieces.size(); ++i) {
    ASSERT_TRUE(pieces[i].has_chunk());
    const v1::Chunk& chunk = pieces[i].chunk();
    EXPECT_LE(chunk.data().size(), 16u);
    EXPECT_FALSE(chunk.data().empty());
    std::string& section = sections[2 * chunk.field() + (chunk.section() == v1::INDICES ? 0 : 1)];
    EXPECT_EQ(chunk.offset(), section.size());
    section += chunk.data();
  }
  uint32_t crc = 0;
  for (size_t f = 0; f < update.fields.size(); ++f) {
    const auto indices = AsBytes(update.fields[f].indices);
    EXPECT_EQ(sections[2 * f], std::string(reinterpret_cast<const char*>(indices.data()), indices.size()));
    EXPECT_EQ(sections[2 * f + 1], std::string(reinterpret_cast<const char*>(update.fields[f].values.data()),
                                               update.fields[f].values.size()));
    crc = Crc32cExtend(crc, indices.data(), indices.size());
    crc = Crc32cExtend(crc, update.fields[f].values.data(), update.fields[f].values.size());
  }
  EXPECT_EQ(pieces.back().end().crc32c(), crc);
}

TEST(UpdateEncoderTest, NamesTheClientWhenAskedTo) {
  auto spec = Spec("<w=float32[2]>", {{Intrinsic::kFederatedSum}});
  auto pool = GenerateUpdates(*spec, {1}, 1, 1);
  ASSERT_TRUE(pool.ok());
  UpdateEncoder encoder("agg", "client-9", (*pool)[0].view(), 1 << 20);
  v1::SubmitRequest request;
  encoder.Next(request);
  EXPECT_EQ(request.header().client_id(), "client-9");
  EXPECT_EQ(encoder.total_pieces(), 3);  // header, one chunk, end
}

TEST(FaultPlanTest, EachFractionPicksExactlyFloorOfNTimesIt) {
  for (double fraction : {0.0, 0.01, 0.1, 0.25, 1.0 / 3, 0.5, 1.0}) {
    for (int64_t clients : {1, 7, 10, 200, 1001}) {
      FaultPlan plan;
      plan.disconnect = fraction;
      int64_t picked = 0;
      for (int64_t i = 0; i < clients; ++i) picked += plan.For(i).disconnect ? 1 : 0;
      EXPECT_EQ(picked, FaultPlan::Picked(fraction, clients)) << fraction << " of " << clients;
      EXPECT_EQ(picked, static_cast<int64_t>(static_cast<double>(clients) * fraction)) << fraction << " of " << clients;
    }
  }
}

TEST(GenerateUpdatesTest, UpdatesAreValidDistinctAndOfTheAskedDensity) {
  auto spec = MixedSpec();
  auto pool = GenerateUpdates(*spec, {1, 0.1, 0.01, 1, 1}, 4, 3);
  ASSERT_TRUE(pool.ok()) << pool.status();
  ASSERT_EQ(pool->size(), 4u);
  for (const GeneratedUpdate& update : *pool) {
    EXPECT_TRUE(ValidateUpdate(*spec, update.view()).ok()) << ValidateUpdate(*spec, update.view());
    EXPECT_EQ(update.view().fields[1].indices.size(), 5u);
    EXPECT_EQ(update.view().fields[2].indices.size(), 10u);
    ASSERT_TRUE(update.view().weight.has_value());
    EXPECT_GE(*update.view().weight, 1);
  }
  const auto& a = (*pool)[0].view().fields[0].values;
  const auto& b = (*pool)[1].view().fields[0].values;
  EXPECT_NE(std::memcmp(a.data(), b.data(), a.size()), 0);
  EXPECT_FALSE(GenerateUpdates(*spec, {0.5, 0.5}, 1, 1).ok());  // neither one nor one per field
  EXPECT_FALSE(GenerateUpdates(*spec, {0}, 1, 1).ok());
}

TEST(CheckResultTest, PassesOnTheRealReductionAndFailsOnAWrongResult) {
  auto spec = MixedSpec();
  auto pool = GenerateUpdates(*spec, {1, 0.1, 0.01, 1, 1}, 3, 5);
  ASSERT_TRUE(pool.ok());
  const std::vector<int64_t> counted = {4, 0, 2};
  PartialAggregate partial(spec);
  for (size_t k = 0; k < pool->size(); ++k) {
    for (int64_t c = 0; c < counted[k]; ++c) ASSERT_TRUE(partial.Accumulate((*pool)[k].view()).ok());
  }
  auto result = partial.Report();
  ASSERT_TRUE(result.ok()) << result.status();
  const CheckReport good = CheckResult(*spec, *pool, counted, *result);
  EXPECT_TRUE(good.passed);
  EXPECT_EQ(good.contributions, 6);
  ASSERT_EQ(good.fields.size(), 5u);
  EXPECT_EQ(good.fields[2].tolerance, 0);  // int64 sparse sum: exact

  // The same result claimed for other multiplicities: wrong count and wrong values.
  EXPECT_FALSE(CheckResult(*spec, *pool, {4, 1, 2}, *result).passed);
  const CheckReport swapped = CheckResult(*spec, *pool, {2, 0, 4}, *result);
  EXPECT_FALSE(swapped.passed);
  EXPECT_EQ(swapped.contributions, swapped.expected_contributions);
  // One integer off by one is caught.
  AggregateResult off = *result;
  off.fields[3].value.mutable_values<int64_t>()[0] += 1;
  const CheckReport off_by_one = CheckResult(*spec, *pool, counted, off);
  EXPECT_FALSE(off_by_one.passed);
  EXPECT_FALSE(off_by_one.fields[3].passed);
}

}  // namespace
}  // namespace fedagg::loadgen
