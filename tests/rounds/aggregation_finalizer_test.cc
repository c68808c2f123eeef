// Where an aggregation finalizes (AggregationOptions::finalizer): with a pool, on its
// workers, never on the thread whose call sealed or completed the aggregation (an RPC
// thread in the server); the answer to that call still comes after the result, so a
// client that was answered sees the final state. Without a pool, on the calling thread.
// Either way, the aggregation's other callers do not wait for the finalization's work.
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/core/mutex.h"
#include "service/core/thread_pool.h"
#include "service/rounds/aggregation.h"
#include "tests/rounds/rounds_test_util.h"

namespace fedagg {
namespace {

using testing::Contribute;
using testing::CountingUpdate;
using testing::NewCountingAggregation;
using testing::ResultOf;
using testing::Signal;

// What a callback saw when it ran: its thread and the aggregation's state (read once
// `ran` is raised).
struct Seen {
  std::thread::id thread;
  v1::AggregationState state = v1::AGGREGATION_STATE_UNSPECIFIED;
  Signal ran;
};

std::function<void()> Record(Seen* seen, const Aggregation& aggregation) {
  return [seen, &aggregation] {
    seen->thread = std::this_thread::get_id();
    seen->state = aggregation.Status().state();
    seen->ran.Raise();
  };
}

std::shared_ptr<Aggregation> AggregationFinalizedOn(ThreadPool* finalizer, int64_t max_contributions = 0) {
  AggregationOptions options;
  options.finalizer = finalizer;
  return NewCountingAggregation("finalized", options, max_contributions);
}

// Holds a finalization in its reduction: updates wait pending (batches of 100, no flush)
// until the finalization reduces them, and that reduction raises `reducing` and waits for
// `release`. Declared before the pool that runs it (it outlives the workers); a cleanup
// declared after the pool raises `release` however the test ends.
struct StalledReduction {
  Signal reducing;
  Signal release;
  AggregationOptions Options(ThreadPool* workers) {
    AggregationOptions options;
    options.finalizer = workers;
    options.batching.workers = workers;
    options.flush_interval = absl::Hours(1);
    options.batching.batch_size = 100;
    options.batching.on_batch_reduced = [this](absl::Duration, size_t) {
      reducing.Raise();
      (void)release.WaitFor(absl::Seconds(60));
    };
    return options;
  }
};

TEST(AggregationFinalizerTest, ASealIsAnsweredFromTheFinalizerOnceTheResultIsMade) {
  ThreadPool finalizer(3);
  std::shared_ptr<Aggregation> aggregation = AggregationFinalizedOn(&finalizer);
  Contribute(*aggregation, "a", 10);
  Contribute(*aggregation, "b", 32);
  Seen seen;
  ASSERT_TRUE(aggregation->Seal(Record(&seen, *aggregation)).ok());
  ASSERT_TRUE(seen.ran.WaitFor(absl::Seconds(30)));
  EXPECT_NE(seen.thread, std::this_thread::get_id());
  EXPECT_EQ(seen.state, v1::FINALIZED);
  EXPECT_EQ(ResultOf(*aggregation), (std::vector<int64_t>{2, 42}));
}

TEST(AggregationFinalizerTest, TheUpdateThatCompletesTheAggregationIsAckedAfterItsResult) {
  ThreadPool finalizer(3);
  std::shared_ptr<Aggregation> aggregation = AggregationFinalizedOn(&finalizer, /*max_contributions=*/2);
  std::vector<Seen> acks(2);
  for (int i = 0; i < 2; ++i) {
    const std::string client = i == 0 ? "a" : "b";
    ASSERT_TRUE(aggregation->BeginUpdate(client).ok());
    absl::StatusOr<Aggregation::ValidatedUpdate> valid = aggregation->Validate(CountingUpdate(aggregation->reduction(), 5));
    ASSERT_TRUE(valid.ok()) << valid.status();
    aggregation->ClaimAndCommit(client, *std::move(valid), [&acks, i, &aggregation](absl::StatusOr<int64_t> counted) {
      EXPECT_TRUE(counted.ok()) << counted.status();
      Record(&acks[i], *aggregation)();
    });
  }
  ASSERT_TRUE(acks[1].ran.WaitFor(absl::Seconds(30)));
  // The first ack goes out at once, on the committing thread; the second waits for the result.
  ASSERT_TRUE(acks[0].ran.Raised());
  EXPECT_EQ(acks[0].thread, std::this_thread::get_id());
  EXPECT_EQ(acks[0].state, v1::OPEN);
  EXPECT_NE(acks[1].thread, std::this_thread::get_id());
  EXPECT_EQ(acks[1].state, v1::FINALIZED);
  EXPECT_EQ(ResultOf(*aggregation), (std::vector<int64_t>{2, 10}));
}

TEST(AggregationFinalizerTest, ASecondSealIsAnsweredOnlyOnceTheFirstOnesFinalizationIsOver) {
  Signal release;  // before the pool: outlives its worker
  ThreadPool finalizer(2);  // one worker, held busy until both seals are in
  finalizer.Run([&release] { (void)release.WaitFor(absl::InfiniteDuration()); });
  // Frees the worker however the test ends, before the pool waits for it.
  absl::Cleanup free_worker = [&release] { release.Raise(); };
  std::shared_ptr<Aggregation> aggregation = AggregationFinalizedOn(&finalizer);
  Contribute(*aggregation, "a", 7);
  Seen first;
  Seen second;
  ASSERT_TRUE(aggregation->Seal(Record(&first, *aggregation)).ok());
  ASSERT_TRUE(aggregation->Seal(Record(&second, *aggregation)).ok());  // already SEALED: OK
  EXPECT_EQ(aggregation->Status().state(), v1::SEALED);
  EXPECT_FALSE(first.ran.Raised());
  EXPECT_FALSE(second.ran.Raised());
  release.Raise();
  ASSERT_TRUE(second.ran.WaitFor(absl::Seconds(30)));
  ASSERT_TRUE(first.ran.WaitFor(absl::Seconds(30)));
  EXPECT_EQ(first.state, v1::FINALIZED);
  EXPECT_EQ(second.state, v1::FINALIZED);
}

TEST(AggregationFinalizerTest, StatusCallsDoNotWaitForTheFinalizationsReduction) {
  StalledReduction stall;
  ThreadPool finalizer(3);
  absl::Cleanup free_worker = [&stall] { stall.release.Raise(); };
  std::shared_ptr<Aggregation> aggregation = NewCountingAggregation("slow", stall.Options(&finalizer));
  Contribute(*aggregation, "a", 5);
  Seen settled;
  ASSERT_TRUE(aggregation->Seal(Record(&settled, *aggregation)).ok());
  ASSERT_TRUE(stall.reducing.WaitFor(absl::Seconds(30)));  // the finalizer is reducing, and stays there
  Signal answered;
  v1::AggregationState seen_meanwhile = v1::AGGREGATION_STATE_UNSPECIFIED;
  std::thread status_call([&] {
    seen_meanwhile = aggregation->Status().state();
    answered.Raise();
  });
  EXPECT_TRUE(answered.WaitFor(absl::Seconds(10))) << "Status() waited for the finalization's reduction";
  stall.release.Raise();
  status_call.join();
  EXPECT_EQ(seen_meanwhile, v1::SEALED);
  ASSERT_TRUE(settled.ran.WaitFor(absl::Seconds(30)));
  EXPECT_EQ(settled.state, v1::FINALIZED);
  EXPECT_EQ(ResultOf(*aggregation), (std::vector<int64_t>{1, 5}));
}

TEST(AggregationFinalizerTest, RepeatedRequestsHoldOneWorkerWhileAFinalizationRuns) {
  StalledReduction stall;
  ThreadPool workers(3);  // two workers: one finalizes, the other stays free for reductions
  absl::Cleanup free_worker = [&stall] { stall.release.Raise(); };
  std::shared_ptr<Aggregation> slow = NewCountingAggregation("slow", stall.Options(&workers));
  Contribute(*slow, "a", 1);
  ASSERT_TRUE(slow->Seal().ok());
  ASSERT_TRUE(stall.reducing.WaitFor(absl::Seconds(30)));
  for (int tick = 0; tick < 5; ++tick) slow->Tick(absl::Now());  // the ticker asks, tick after tick
  Seen settled;
  ASSERT_TRUE(slow->Seal(Record(&settled, *slow)).ok());  // and so does a second Seal

  Signal other_reduced;
  AggregationOptions other_options;
  other_options.batching.workers = &workers;
  other_options.batching.batch_size = 1;
  other_options.batching.on_batch_reduced = [&other_reduced](absl::Duration, size_t) { other_reduced.Raise(); };
  std::shared_ptr<Aggregation> other = NewCountingAggregation("other", other_options);
  Contribute(*other, "b", 2);
  EXPECT_TRUE(other_reduced.WaitFor(absl::Seconds(10)))
      << "another aggregation's batch found no free worker while one finalization ran";

  EXPECT_FALSE(settled.ran.Raised());
  stall.release.Raise();
  ASSERT_TRUE(settled.ran.WaitFor(absl::Seconds(30)));
  EXPECT_EQ(settled.state, v1::FINALIZED);
  EXPECT_EQ(ResultOf(*slow), (std::vector<int64_t>{1, 1}));
}

TEST(AggregationFinalizerTest, WithoutAFinalizerASealFinalizesBeforeItReturns) {
  std::shared_ptr<Aggregation> aggregation = AggregationFinalizedOn(nullptr);
  Contribute(*aggregation, "a", 3);
  Seen seen;
  ASSERT_TRUE(aggregation->Seal(Record(&seen, *aggregation)).ok());
  ASSERT_TRUE(seen.ran.Raised());
  EXPECT_EQ(seen.thread, std::this_thread::get_id());
  EXPECT_EQ(seen.state, v1::FINALIZED);
}

TEST(AggregationFinalizerTest, ARefusedSealNeverAnswersThroughTheCallback) {
  ThreadPool finalizer(3);
  std::shared_ptr<Aggregation> aggregation = AggregationFinalizedOn(&finalizer);
  ASSERT_TRUE(aggregation->Cancel("test").ok());
  Seen seen;
  EXPECT_EQ(aggregation->Seal(Record(&seen, *aggregation)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(seen.ran.WaitFor(absl::Milliseconds(200)));
}

}  // namespace
}  // namespace fedagg
