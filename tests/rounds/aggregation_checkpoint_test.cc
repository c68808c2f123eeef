// Aggregation snapshots, restore and DURABLE waits; the Checkpointer writing, restoring
// and refusing checkpoint files.
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "service/core/memory_budget.h"
#include "service/core/partial_aggregate.h"
#include "service/rounds/aggregation.h"
#include "service/rounds/aggregation_registry.h"
#include "service/rounds/checkpointer.h"
#include "tests/backend/failing_backend.h"
#include "tests/rounds/rounds_test_util.h"

namespace fedagg {
namespace {

using testing::BackendFailures;
using testing::ChildPartial;
using testing::Contribute;
using testing::CountingSpec;
using testing::CountingUpdate;
using testing::FailingBackend;
using testing::ResultOf;
using testing::TempDir;

AggregationOptions Checkpointed() {
  AggregationOptions options;
  options.checkpointed = true;
  options.child_grace = absl::ZeroDuration();
  return options;
}

std::shared_ptr<Aggregation> NewAggregation(const std::string& id, AggregationOptions options = Checkpointed()) {
  return testing::NewCountingAggregation(id, options);
}

// The aggregation's snapshot, which must be taken without error.
std::optional<Aggregation::Snapshot> SnapshotOf(Aggregation& aggregation) {
  absl::StatusOr<std::optional<Aggregation::Snapshot>> snapshot = aggregation.TakeSnapshot();
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  return snapshot.ok() ? *std::move(snapshot) : std::nullopt;
}

TEST(AggregationCheckpointTest, RestoreKeepsCountedClientsAndChildSequences) {
  std::shared_ptr<Aggregation> original = NewAggregation("r");
  Contribute(*original, "alice", 10);
  Contribute(*original, "bob", 20);  // still in the pending batch: the snapshot reduces it
  ASSERT_TRUE(original->MergeChildPartial("edge@1", 1, false, ChildPartial(*original, 300)).ok());
  std::optional<Aggregation::Snapshot> snapshot = SnapshotOf(*original);
  ASSERT_TRUE(snapshot.has_value());
  EXPECT_EQ(snapshot->checkpoint.contributions, 3);

  absl::StatusOr<AggregationCheckpoint> decoded = DecodeCheckpoint(EncodeCheckpoint(snapshot->checkpoint));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  absl::StatusOr<std::shared_ptr<Aggregation>> restored = Aggregation::Restore(*decoded, Checkpointed());
  ASSERT_TRUE(restored.ok()) << restored.status();
  Aggregation& aggregation = **restored;
  EXPECT_EQ(aggregation.state(), v1::OPEN);
  EXPECT_EQ(aggregation.Status().contributions(), 3);
  // Exactly once across the restart: counted clients are refused, others accepted.
  EXPECT_EQ(aggregation.BeginUpdate("alice").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(aggregation.BeginUpdate("bob").code(), absl::StatusCode::kAlreadyExists);
  Contribute(aggregation, "carol", 4000);
  // The child learns what is held; its repeated push is not merged twice, the next one is.
  EXPECT_EQ(aggregation.ChildJoined("edge@1", nullptr)->last_sequence, 1u);
  EXPECT_EQ(aggregation.DurableChildSequence("edge@1"), 1u);
  ASSERT_TRUE(aggregation.MergeChildPartial("edge@1", 1, false, ChildPartial(aggregation, 300)).ok());
  ASSERT_TRUE(aggregation.MergeChildPartial("edge@1", 2, true, ChildPartial(aggregation, 50000)).ok());
  ASSERT_TRUE(aggregation.Seal().ok());
  EXPECT_EQ(aggregation.state(), v1::FINALIZED);
  EXPECT_EQ(ResultOf(aggregation), (std::vector<int64_t>{5, 54330}));
}

TEST(AggregationCheckpointTest, FinalizedRestoresItsResult) {
  std::shared_ptr<Aggregation> finished = NewAggregation("done");
  Contribute(*finished, "a", 7);
  ASSERT_TRUE(finished->Seal().ok());
  ASSERT_EQ(finished->state(), v1::FINALIZED);
  absl::StatusOr<std::shared_ptr<Aggregation>> restored =
      Aggregation::Restore(SnapshotOf(*finished)->checkpoint, Checkpointed());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->state(), v1::FINALIZED);
  EXPECT_EQ(ResultOf(**restored), (std::vector<int64_t>{1, 7}));
}

// A restored finished aggregation finished when its last checkpoint was written (rounds
// restored after a restart keep the order they finished in, and their grace), or, when
// that is not known, at the restart.
TEST(AggregationCheckpointTest, RestoredFinishedAggregationsFinishedWhenTheirCheckpointWasWritten) {
  std::shared_ptr<Aggregation> finished = NewAggregation("done");
  Contribute(*finished, "a", 7);
  ASSERT_TRUE(finished->Seal().ok());
  AggregationCheckpoint checkpoint = SnapshotOf(*finished)->checkpoint;
  checkpoint.written = absl::FromUnixSeconds(1'700'000'000);
  EXPECT_EQ(testing::ValueOrDie(Aggregation::Restore(checkpoint, Checkpointed()))->finish().at, checkpoint.written);
  checkpoint.written = absl::InfinitePast();
  const absl::Time before = absl::Now();
  EXPECT_GE(testing::ValueOrDie(Aggregation::Restore(checkpoint, Checkpointed()))->finish().at, before);
}

// A finalized checkpointed aggregation keeps its accumulators until a checkpoint holds its
// finished state, then frees them (the budget gets their bytes back) and keeps its result;
// what changes later (a child's claim given back) has nothing to write; a restart from
// that checkpoint reports the same result and frees them too.
TEST(AggregationCheckpointTest, AccumulatorsAreFreedOnceTheFinishedStateIsCheckpointed) {
  MemoryBudget budget(0);  // accounts only
  AggregationOptions options = Checkpointed();
  options.batching.memory_budget = &budget;
  std::shared_ptr<Aggregation> finished = NewAggregation("done", options);
  bool granted = false;
  finished->ClaimForChild("edge@1", "x", [&granted](absl::Status claimed) { granted = claimed.ok(); });
  ASSERT_TRUE(granted);
  Contribute(*finished, "a", 7);
  ASSERT_TRUE(finished->Seal().ok());  // the child's grace is 0: finalized without it
  ASSERT_EQ(finished->state(), v1::FINALIZED);
  EXPECT_GT(budget.used(), 0u) << "freed before a checkpoint held the finished state";
  EXPECT_TRUE(finished->HasCounted("a")) << "counted ids freed before a checkpoint held them";
  std::optional<Aggregation::Snapshot> snapshot = SnapshotOf(*finished);
  ASSERT_TRUE(snapshot.has_value());
  EXPECT_EQ(snapshot->checkpoint.state, v1::FINALIZED);
  EXPECT_EQ(snapshot->checkpoint.counted.ToVector(), (std::vector<std::string>{"x", "a"}));  // in order counted
  finished->MarkDurable(*snapshot);
  EXPECT_EQ(budget.used(), 0u);
  // The counted ids go with the accumulators: a retry is refused as not OPEN all the same.
  EXPECT_FALSE(finished->HasCounted("a"));
  EXPECT_TRUE(finished->CountedAnyClient());
  EXPECT_EQ(finished->BeginUpdate("a").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ResultOf(*finished), (std::vector<int64_t>{1, 7}));
  finished->ReleaseChildClaim("edge@1", "x");  // a new version, nothing to write for it
  EXPECT_FALSE(SnapshotOf(*finished).has_value());

  absl::StatusOr<std::shared_ptr<Aggregation>> restored = Aggregation::Restore(snapshot->checkpoint, options);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->state(), v1::FINALIZED);
  EXPECT_EQ(ResultOf(**restored), (std::vector<int64_t>{1, 7}));
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_FALSE((*restored)->HasCounted("a"));
  EXPECT_TRUE((*restored)->CountedAnyClient());
}

// Without checkpoints, the accumulators and counted ids are freed as soon as the result
// is made; a cancelled aggregation's as soon as it is cancelled.
TEST(AggregationCheckpointTest, WithoutCheckpointsFinishingFreesTheAccumulators) {
  MemoryBudget budget(0);
  AggregationOptions options;
  options.batching.memory_budget = &budget;
  std::shared_ptr<Aggregation> finalized = NewAggregation("finalized", options);
  Contribute(*finalized, "a", 7);
  ASSERT_TRUE(finalized->Seal().ok());
  ASSERT_EQ(finalized->state(), v1::FINALIZED);
  EXPECT_EQ(ResultOf(*finalized), (std::vector<int64_t>{1, 7}));
  EXPECT_FALSE(finalized->HasCounted("a"));  // its counted ids are freed too
  std::shared_ptr<Aggregation> cancelled = NewAggregation("cancelled", options);
  Contribute(*cancelled, "a", 7);
  EXPECT_GT(budget.used(), 0u);
  ASSERT_TRUE(cancelled->Cancel("test").ok());
  EXPECT_EQ(budget.used(), 0u);
}

TEST(AggregationCheckpointTest, RestoredSealedWaitsForItsChildrenToPushAgain) {
  AggregationOptions options = Checkpointed();
  options.child_grace = absl::Hours(1);
  std::shared_ptr<Aggregation> original = NewAggregation("r", options);
  ASSERT_TRUE(original->ChildJoined("edge@1", nullptr).ok());
  ASSERT_TRUE(original->MergeChildPartial("edge@1", 1, false, ChildPartial(*original, 10)).ok());
  ASSERT_TRUE(original->Seal().ok());
  ASSERT_EQ(original->state(), v1::SEALED);  // waits for the child's final push
  absl::StatusOr<std::shared_ptr<Aggregation>> restored =
      Aggregation::Restore(SnapshotOf(*original)->checkpoint, options);
  ASSERT_TRUE(restored.ok()) << restored.status();
  Aggregation& aggregation = **restored;
  aggregation.Tick(absl::Now());
  EXPECT_EQ(aggregation.state(), v1::SEALED);  // not finalized without the child
  const Aggregation::ChildRegistration rejoined = *aggregation.ChildJoined("edge@1", nullptr);
  EXPECT_EQ(rejoined.last_sequence, 1u);
  EXPECT_TRUE(rejoined.sealed);
  ASSERT_TRUE(aggregation.MergeChildPartial("edge@1", 2, true, ChildPartial(aggregation, 20)).ok());
  EXPECT_EQ(aggregation.state(), v1::FINALIZED);
  EXPECT_EQ(ResultOf(aggregation), (std::vector<int64_t>{2, 30}));
}

TEST(AggregationCheckpointTest, InconsistentCheckpointIsRefused) {
  std::shared_ptr<Aggregation> aggregation = NewAggregation("r");
  Contribute(*aggregation, "a", 1);
  AggregationCheckpoint checkpoint = SnapshotOf(*aggregation)->checkpoint;
  checkpoint.contributions = 2;  // the partial holds one
  EXPECT_EQ(Aggregation::Restore(checkpoint, Checkpointed()).status().code(), absl::StatusCode::kDataLoss);
  checkpoint.contributions = 1;
  checkpoint.partial = "not a partial aggregate";
  EXPECT_EQ(Aggregation::Restore(checkpoint, Checkpointed()).status().code(), absl::StatusCode::kDataLoss);
}

TEST(AggregationCheckpointTest, WhenDurableWaitsForTheCheckpointHoldingTheUpdate) {
  std::shared_ptr<Aggregation> aggregation = NewAggregation("r");
  std::vector<std::pair<std::string, bool>> acks;
  Contribute(*aggregation, "a", 1);
  aggregation->WhenDurable([&acks](bool durable) { acks.emplace_back("a", durable); });
  std::optional<Aggregation::Snapshot> first = SnapshotOf(*aggregation);
  ASSERT_TRUE(first.has_value());
  Contribute(*aggregation, "b", 2);  // after the snapshot: not in its checkpoint
  aggregation->WhenDurable([&acks](bool durable) { acks.emplace_back("b", durable); });
  EXPECT_TRUE(acks.empty());
  aggregation->MarkDurable(*first);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0], std::make_pair(std::string("a"), true));
  std::optional<Aggregation::Snapshot> second = SnapshotOf(*aggregation);
  ASSERT_TRUE(second.has_value());
  aggregation->MarkDurable(*second);
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(acks[1], std::make_pair(std::string("b"), true));
  EXPECT_FALSE(SnapshotOf(*aggregation).has_value());  // nothing changed since
  // Stopped checkpoints release the waiting acks as not durable.
  Contribute(*aggregation, "c", 3);
  aggregation->WhenDurable([&acks](bool durable) { acks.emplace_back("c", durable); });
  aggregation->StopDurability();
  ASSERT_EQ(acks.size(), 3u);
  EXPECT_EQ(acks[2], std::make_pair(std::string("c"), false));
}

TEST(AggregationCheckpointTest, NotCheckpointedIsNeverDurable) {
  std::shared_ptr<Aggregation> aggregation = NewAggregation("r", AggregationOptions());
  Contribute(*aggregation, "a", 1);
  std::optional<bool> answer;
  aggregation->WhenDurable([&answer](bool durable) { answer = durable; });
  EXPECT_EQ(answer, std::optional<bool>(false));
}

TEST(AggregationCheckpointTest, PartialTheBackendCannotSerializeGivesNoSnapshot) {
  const FailingBackend backend({.serialize = true});
  AggregationOptions options = Checkpointed();
  options.backend = &backend;
  std::shared_ptr<Aggregation> aggregation = NewAggregation("r", options);
  Contribute(*aggregation, "a", 1);
  std::optional<bool> answer;
  aggregation->WhenDurable([&answer](bool durable) { answer = durable; });
  absl::StatusOr<std::optional<Aggregation::Snapshot>> snapshot = aggregation->TakeSnapshot();
  EXPECT_EQ(snapshot.status().code(), absl::StatusCode::kInternal) << snapshot.status();
  EXPECT_TRUE(absl::StrContains(snapshot.status().message(), "failing backend")) << snapshot.status();
  EXPECT_FALSE(answer.has_value());  // the ack keeps waiting for a checkpoint that holds it
  EXPECT_TRUE(aggregation->HasCounted("a"));
}

TEST(AggregationCheckpointTest, BatchTheBackendFailedToReduceGivesNoSnapshot) {
  const FailingBackend backend({.reduce = true});
  AggregationOptions options = Checkpointed();
  options.backend = &backend;
  options.batching.batch_size = 1;  // every commit closes a batch
  std::shared_ptr<Aggregation> aggregation = NewAggregation("r", options);
  Contribute(*aggregation, "a", 1);  // counted; its reduction failed
  std::optional<bool> answer;
  aggregation->WhenDurable([&answer](bool durable) { answer = durable; });
  EXPECT_FALSE(answer.has_value());
  absl::StatusOr<std::optional<Aggregation::Snapshot>> snapshot = aggregation->TakeSnapshot();
  // The partial does not hold the counted update: a checkpoint of it would be inconsistent.
  EXPECT_EQ(snapshot.status().code(), absl::StatusCode::kResourceExhausted) << snapshot.status();
  EXPECT_TRUE(absl::StrContains(snapshot.status().message(), "failing backend")) << snapshot.status();
  // No checkpoint will ever hold it: the waiting ack, and any later one, is not durable.
  EXPECT_EQ(answer, std::optional<bool>(false));
  std::optional<bool> later;
  aggregation->WhenDurable([&later](bool durable) { later = durable; });
  EXPECT_EQ(later, std::optional<bool>(false));
}

TEST(AggregationCheckpointTest, RestoreUsesTheAggregationsBackend) {
  std::shared_ptr<Aggregation> original = NewAggregation("r");
  Contribute(*original, "a", 7);
  const FailingBackend backend({.reduce = true});
  AggregationOptions options = Checkpointed();
  options.backend = &backend;
  options.batching.batch_size = 1;
  absl::StatusOr<std::shared_ptr<Aggregation>> restored =
      Aggregation::Restore(SnapshotOf(*original)->checkpoint, options);
  ASSERT_TRUE(restored.ok()) << restored.status();
  // The restored partial's accumulators come from `backend`: its next batch fails there.
  Contribute(**restored, "b", 8);
  ASSERT_TRUE((*restored)->Seal().ok());
  EXPECT_EQ((*restored)->state(), v1::FAILED);
  EXPECT_TRUE(absl::StrContains((*restored)->Status().detail(), "failing backend"))
      << (*restored)->Status().detail();
}

TEST(CheckpointerTest, SnapshotFailureIsAFailedWriteAndWritesNothing) {
  TempDir dir;
  const FailingBackend backend({.serialize = true});
  AggregationOptions options = Checkpointed();
  options.backend = &backend;
  std::vector<bool> writes;
  CheckpointerOptions checkpoints{dir.path(), absl::Hours(1)};
  checkpoints.on_written = [&writes](absl::Duration, bool ok) { writes.push_back(ok); };
  std::unique_ptr<Checkpointer> checkpointer;
  AggregationRegistry registry(options);
  checkpointer = testing::ValueOrDie(Checkpointer::Open(std::move(checkpoints), registry));
  registry.SetStore(checkpointer.get());
  // The first checkpoint is written before the aggregation exists: it is not created.
  absl::StatusOr<std::shared_ptr<Aggregation>> created = registry.Create(CountingSpec("r1"));
  EXPECT_EQ(created.status().code(), absl::StatusCode::kUnavailable) << created.status();
  EXPECT_TRUE(absl::StrContains(created.status().message(), "failing backend")) << created.status();
  EXPECT_FALSE(registry.Find("r1").ok());
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/r1.ckpt"));
  EXPECT_EQ(writes, std::vector<bool>{false});
}

TEST(CheckpointerTest, WritesOnCreationRestoresAfterRestartAndRemovesForgotten) {
  TempDir dir;
  AggregationOptions options = Checkpointed();
  options.retain_finished = 0;
  options.finished_grace = absl::ZeroDuration();
  // Each checkpointer outlives its registry, whose ticker may report forgotten aggregations.
  {
    std::unique_ptr<Checkpointer> checkpointer;
    AggregationRegistry registry(options);
    checkpointer = testing::ValueOrDie(Checkpointer::Open({dir.path(), absl::Hours(1)}, registry));
    registry.SetStore(checkpointer.get());
    absl::StatusOr<std::shared_ptr<Aggregation>> created = registry.Create(CountingSpec("r1"));
    ASSERT_TRUE(created.ok()) << created.status();
    EXPECT_TRUE(std::filesystem::exists(dir.path() + "/r1.ckpt"));
    Contribute(**created, "alice", 5);
    bool durable = false;
    (*created)->WhenDurable([&durable](bool d) { durable = d; });
    EXPECT_FALSE(durable);
    checkpointer->CheckpointAll();
    EXPECT_TRUE(durable);
    Contribute(**created, "bob", 6);
    checkpointer->Stop();  // an orderly shutdown writes a last checkpoint
  }
  std::unique_ptr<Checkpointer> checkpointer;
  AggregationRegistry registry(options);
  checkpointer = testing::ValueOrDie(Checkpointer::Open({dir.path(), absl::Hours(1)}, registry));
  registry.SetStore(checkpointer.get());
  EXPECT_EQ(testing::ValueOrDie(checkpointer->RestoreAll()), 1);
  absl::StatusOr<std::shared_ptr<Aggregation>> restored = registry.Find("r1");
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE((*restored)->HasCounted("alice"));
  EXPECT_TRUE((*restored)->HasCounted("bob"));
  // Read with its file's modification time: a checkpoint is never written in the future.
  EXPECT_LE(testing::ValueOrDie(ReadCheckpointFile(dir.path() + "/r1.ckpt")).written, absl::Now());
  EXPECT_GT(testing::ValueOrDie(ReadCheckpointFile(dir.path() + "/r1.ckpt")).written, absl::Now() - absl::Hours(1));
  // Finished and forgotten (retain_finished = 0): its file goes.
  ASSERT_TRUE((*restored)->Seal().ok());
  for (int i = 0; i < 200 && std::filesystem::exists(dir.path() + "/r1.ckpt"); ++i) {
    absl::SleepFor(absl::Milliseconds(20));  // the registry's ticker forgets it
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/r1.ckpt"));
}

TEST(CheckpointerTest, CorruptFileIsRefusedAndKeptAside) {
  TempDir dir;
  {
    std::ofstream corrupt(dir.path() + "/bad.ckpt", std::ios::binary);
    corrupt << "FEDAGGCK but nothing after";
  }
  {
    std::ofstream leftover(dir.path() + "/r2.ckpt.tmp", std::ios::binary);
    leftover << "an interrupted write";
  }
  AggregationRegistry registry(Checkpointed());
  absl::StatusOr<std::unique_ptr<Checkpointer>> checkpointer =
      Checkpointer::Open({dir.path(), absl::Hours(1)}, registry);
  ASSERT_TRUE(checkpointer.ok()) << checkpointer.status();
  EXPECT_EQ(testing::ValueOrDie((*checkpointer)->RestoreAll()), 0);
  EXPECT_TRUE(registry.List().empty());
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/bad.ckpt.refused"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/bad.ckpt"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/r2.ckpt.tmp"));
}

TEST(CheckpointerTest, UnwritableDirectoryIsRefused) {
  TempDir dir;
  const std::string file = dir.path() + "/a-file";
  { std::ofstream(file) << "x"; }
  AggregationRegistry registry(Checkpointed());
  EXPECT_EQ(Checkpointer::Open({file, absl::Seconds(1)}, registry).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace fedagg
