// Which finished aggregations the registry keeps (its ticker forgets the rest): the newest
// AggregationOptions::retain_finished in the order they finished, and of those, results
// that take at most retain_finished_bytes together — the oldest results go first, only
// aggregations holding a result, never the newest result; never one that finished less
// than finished_grace ago, never an open aggregation.
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/rounds/aggregation_registry.h"
#include "tests/rounds/rounds_test_util.h"

namespace fedagg {
namespace {

using testing::CountingSpec;

constexpr int64_t kElements = 64 << 10;  // an int64 sum: a result of 512 KiB
constexpr uint64_t kResultBytes = kElements * sizeof(int64_t);

v1::AggregationSpec SpecOfElements(const std::string& id) {
  v1::AggregationSpec spec = CountingSpec(id);
  absl::StatusOr<ValueType> type = ParseValueType(absl::StrCat("<w=int64[", kElements, "]>"));
  EXPECT_TRUE(type.ok()) << type.status();
  *spec.mutable_value_type() = ValueTypeToProto(*type);
  return spec;
}

// Counts one update of zeros and seals: FINALIZED, with a result of kResultBytes.
void Finalize(Aggregation& aggregation) {
  absl::StatusOr<UpdateBuffer> update = UpdateBuffer::Create(aggregation.reduction(), {0}, std::nullopt, 1 << 20);
  ASSERT_TRUE(update.ok()) << update.status();
  absl::Span<std::byte> values = update->section(0, UpdateBuffer::Section::kValues);
  std::memset(values.data(), 0, values.size());
  ASSERT_TRUE(aggregation.BeginUpdate("client").ok());
  ASSERT_TRUE(aggregation.CommitUpdate("client", *std::move(update)).ok());
  ASSERT_TRUE(aggregation.Seal().ok());
  ASSERT_EQ(aggregation.state(), v1::FINALIZED);
  ASSERT_EQ(aggregation.finish().result_bytes, kResultBytes);
}

// More finished aggregations than any test makes.
constexpr int kNoCountBound = 1000;

// A registry's options: it keeps `retain_finished` finished aggregations and results of
// `retain_finished_bytes` at most, each for at least `finished_grace`.
AggregationOptions Retaining(int retain_finished, uint64_t retain_finished_bytes, absl::Duration finished_grace) {
  AggregationOptions options;
  options.retain_finished = retain_finished;
  options.retain_finished_bytes = retain_finished_bytes;
  options.finished_grace = finished_grace;
  return options;
}

// A long round and a short one: "created-first", then "finished-first", which finishes
// first; "created-first" finishes next (its client reads its result next).
void FinishInTheOtherOrder(AggregationRegistry& registry) {
  std::shared_ptr<Aggregation> created_first = *registry.Create(SpecOfElements("created-first"));
  std::shared_ptr<Aggregation> finished_first = *registry.Create(SpecOfElements("finished-first"));
  Finalize(*finished_first);
  absl::SleepFor(absl::Milliseconds(1));  // finished at two distinct times
  Finalize(*created_first);
}

// Whether the registry forgot `id` within 10 s (its ticker runs every 20 ms).
bool ForgottenSoon(const AggregationRegistry& registry, const std::string& id) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (registry.Find(id).ok()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

TEST(AggregationRegistryRetentionTest, TheOldestResultsGoOnceTheResultsTakeMoreThanTheBound) {
  const AggregationOptions options = Retaining(kNoCountBound, 3 * kResultBytes, absl::ZeroDuration());
  AggregationRegistry registry(options);
  std::shared_ptr<Aggregation> failed = *registry.Create(SpecOfElements("failed"));
  ASSERT_TRUE(failed->Seal().ok());  // no contribution: FAILED, no result
  ASSERT_EQ(failed->state(), v1::FAILED);
  std::shared_ptr<Aggregation> open = *registry.Create(SpecOfElements("open"));
  for (const char* id : {"a", "b", "c"}) {
    std::shared_ptr<Aggregation> aggregation = *registry.Create(SpecOfElements(id));
    Finalize(*aggregation);
  }
  std::shared_ptr<Aggregation> d = *registry.Create(SpecOfElements("d"));
  Finalize(*d);  // four results: one more than the bound holds

  EXPECT_TRUE(ForgottenSoon(registry, "a"));
  // Forgotten with "a" in one pass (the ticker reads all it forgets under one lock), so
  // the others are known to be kept: each is still there.
  for (const char* id : {"b", "c", "d", "failed", "open"}) EXPECT_TRUE(registry.Find(id).ok()) << id;
}

TEST(AggregationRegistryRetentionTest, TheNewestResultStaysWhateverItsSize) {
  const AggregationOptions options = Retaining(kNoCountBound, kResultBytes / 2, absl::ZeroDuration());
  AggregationRegistry registry(options);
  std::shared_ptr<Aggregation> old = *registry.Create(SpecOfElements("old"));
  Finalize(*old);
  std::shared_ptr<Aggregation> newest = *registry.Create(SpecOfElements("newest"));
  Finalize(*newest);
  EXPECT_TRUE(ForgottenSoon(registry, "old"));
  EXPECT_TRUE(registry.Find("newest").ok());
  ASSERT_TRUE(registry.Find("newest").ok());
  EXPECT_TRUE((*registry.Find("newest"))->Result().ok());
}

TEST(AggregationRegistryRetentionTest, TheOldestResultGoesNotTheFirstCreated) {
  const AggregationOptions options = Retaining(kNoCountBound, kResultBytes, absl::ZeroDuration());
  AggregationRegistry registry(options);
  FinishInTheOtherOrder(registry);
  EXPECT_TRUE(ForgottenSoon(registry, "finished-first"));
  EXPECT_TRUE(registry.Find("created-first").ok());
}

TEST(AggregationRegistryRetentionTest, NothingGoesWithinItsGracePeriodWhateverTheBounds) {
  // With an hour's grace the ticker, on the clock, forgets nothing.
  const AggregationOptions options = Retaining(1, kResultBytes, absl::Hours(1));
  AggregationRegistry registry(options);
  std::shared_ptr<Aggregation> failed = *registry.Create(SpecOfElements("failed"));
  ASSERT_TRUE(failed->Seal().ok());  // no contribution: FAILED, no result
  for (const char* id : {"a", "b", "c"}) {
    std::shared_ptr<Aggregation> aggregation = *registry.Create(SpecOfElements(id));
    Finalize(*aggregation);
  }
  EXPECT_FALSE(registry.ForgetFinished(absl::Now()));
  for (const char* id : {"failed", "a", "b", "c"}) EXPECT_TRUE(registry.Find(id).ok()) << id;
  // Past the grace, both bounds apply: the count keeps the one that finished last.
  EXPECT_TRUE(registry.ForgetFinished(absl::Now() + absl::Hours(2)));
  for (const char* id : {"failed", "a", "b"}) EXPECT_FALSE(registry.Find(id).ok()) << id;
  EXPECT_TRUE(registry.Find("c").ok());
}

TEST(AggregationRegistryRetentionTest, TheCountKeepsTheRoundsThatFinishedLastNotTheLastCreated) {
  const AggregationOptions options = Retaining(1, 0, absl::Hours(1));
  AggregationRegistry registry(options);
  FinishInTheOtherOrder(registry);
  EXPECT_TRUE(registry.ForgetFinished(absl::Now() + absl::Hours(2)));
  EXPECT_FALSE(registry.Find("finished-first").ok());
  EXPECT_TRUE(registry.Find("created-first").ok());
}

TEST(AggregationRegistryRetentionTest, TheGraceEndsOneGraceAfterFinishing) {
  const AggregationOptions options = Retaining(0, 0, absl::Hours(1));
  AggregationRegistry registry(options);
  std::shared_ptr<Aggregation> first = *registry.Create(SpecOfElements("first"));
  Finalize(*first);
  absl::SleepFor(absl::Milliseconds(1));
  std::shared_ptr<Aggregation> second = *registry.Create(SpecOfElements("second"));
  Finalize(*second);
  // A nanosecond before the grace of "second" ends: only "first", finished before it, goes.
  EXPECT_TRUE(registry.ForgetFinished(second->finish().at + options.finished_grace - absl::Nanoseconds(1)));
  EXPECT_FALSE(registry.Find("first").ok());
  EXPECT_TRUE(registry.Find("second").ok());
  // As its grace ends, "second" goes too.
  EXPECT_TRUE(registry.ForgetFinished(second->finish().at + options.finished_grace));
  EXPECT_FALSE(registry.Find("second").ok());
}

TEST(AggregationRegistryRetentionTest, EveryWayToFinishRecordsWhen) {
  AggregationRegistry registry(AggregationOptions{});
  std::shared_ptr<Aggregation> cancelled = *registry.Create(SpecOfElements("cancelled"));
  std::shared_ptr<Aggregation> finalized = *registry.Create(SpecOfElements("finalized"));
  std::shared_ptr<Aggregation> failed = *registry.Create(SpecOfElements("failed"));
  std::shared_ptr<Aggregation> forwarded = *registry.Create(SpecOfElements("forwarded"));
  EXPECT_EQ(cancelled->finish().at, absl::InfinitePast());  // open: not finished
  const absl::Time before = absl::Now();
  ASSERT_TRUE(cancelled->Cancel("test").ok());
  Finalize(*finalized);
  ASSERT_TRUE(failed->Seal().ok());  // no contribution: FAILED
  forwarded->MarkForwarded(absl::OkStatus());
  const absl::Time after = absl::Now();
  for (const auto& aggregation : {cancelled, finalized, failed, forwarded}) {
    EXPECT_GE(aggregation->finish().at, before) << aggregation->id();
    EXPECT_LE(aggregation->finish().at, after) << aggregation->id();
  }
  EXPECT_EQ(finalized->finish().result_bytes, kResultBytes);
  EXPECT_EQ(failed->finish().result_bytes, 0u);
}

TEST(AggregationRegistryRetentionTest, WithoutAByteBoundTheCountAloneDecides) {
  const AggregationOptions options = Retaining(2, 0, absl::ZeroDuration());
  AggregationRegistry registry(options);
  for (const char* id : {"a", "b", "c"}) {
    std::shared_ptr<Aggregation> aggregation = *registry.Create(SpecOfElements(id));
    Finalize(*aggregation);
  }
  EXPECT_TRUE(ForgottenSoon(registry, "a"));
  EXPECT_TRUE(registry.Find("b").ok());
  EXPECT_TRUE(registry.Find("c").ok());
}

}  // namespace
}  // namespace fedagg
