// How an aggregation batches and reduces its updates (service/rounds/batch_reducer.h): a
// batch closes at --batch_size updates, or earlier once it holds batch_max_bytes of
// payload; full batches are reduced on the reduction workers, not on the committing
// thread; and whatever needs the partial (the result, a checkpoint, a mirror's delta) first
// reduces what is still queued or pending, so nothing counted is missing even while the
// workers are busy, and counting goes on meanwhile.
#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/core/memory_budget.h"
#include "service/core/mutex.h"
#include "service/core/thread_pool.h"
#include "service/rounds/aggregation.h"
#include "tests/rounds/rounds_test_util.h"

namespace fedagg {
namespace {

using testing::Contribute;
using testing::NewCountingAggregation;
using testing::ResultOf;
using testing::Signal;

// Each CountingUpdate holds two int64 values: 16 payload bytes.
constexpr uint64_t kUpdateBytes = 16;

// The batches reduced so far, as the workers report them.
class Batches {
 public:
  void Reduced(size_t size) {
    MutexLock lock(&mu_);
    sizes_.push_back(size);
    threads_.push_back(std::this_thread::get_id());
  }
  // The sizes, in order, once `count` batches were reduced (or after 30 s, whatever came).
  std::vector<size_t> AwaitSizes(size_t count) {
    MutexLock lock(&mu_);
    (void)mu_.AwaitWithTimeout([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return sizes_.size() >= count; },
                               absl::Seconds(30));
    return sizes_;
  }
  std::vector<std::thread::id> threads() {
    MutexLock lock(&mu_);
    return threads_;
  }

 private:
  Mutex mu_;
  std::vector<size_t> sizes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

AggregationOptions Observed(Batches* batches, int batch_size, uint64_t batch_max_bytes) {
  AggregationOptions options;
  options.batching.batch_size = batch_size;
  options.batching.batch_max_bytes = batch_max_bytes;
  options.flush_interval = absl::Hours(1);  // only the limits under test close a batch
  options.batching.on_batch_reduced = [batches](absl::Duration, size_t size) { batches->Reduced(size); };
  return options;
}

TEST(AggregationBatchingTest, BatchIsReducedAtBatchSizeUpdates) {
  Batches batches;
  auto aggregation = NewCountingAggregation("r", Observed(&batches, 3, uint64_t{1} << 30));
  for (int c = 0; c < 7; ++c) Contribute(*aggregation, "client-" + std::to_string(c), c);
  EXPECT_EQ(batches.AwaitSizes(2), (std::vector<size_t>{3, 3}));
  EXPECT_EQ(aggregation->pending_updates(), 1);  // the 7th waits in the pending batch
}

TEST(AggregationBatchingTest, BatchIsReducedOnceItHoldsBatchMaxBytes) {
  Batches batches;
  auto aggregation = NewCountingAggregation("r", Observed(&batches, 16, 2 * kUpdateBytes));
  for (int c = 0; c < 5; ++c) Contribute(*aggregation, "client-" + std::to_string(c), c);
  EXPECT_EQ(batches.AwaitSizes(2), (std::vector<size_t>{2, 2}));
  EXPECT_EQ(aggregation->pending_updates(), 1);
}

TEST(AggregationBatchingTest, BatchesAreReducedOnTheWorkersNotOnTheCommittingThread) {
  Batches batches;
  ThreadPool workers(3);
  AggregationOptions options = Observed(&batches, 2, uint64_t{1} << 30);
  options.batching.workers = &workers;
  auto aggregation = NewCountingAggregation("r", options);
  for (int c = 0; c < 8; ++c) Contribute(*aggregation, "client-" + std::to_string(c), c);
  EXPECT_EQ(batches.AwaitSizes(4), (std::vector<size_t>(4, 2)));
  for (const std::thread::id& thread : batches.threads()) EXPECT_NE(thread, std::this_thread::get_id());
}

TEST(AggregationBatchingTest, TheResultHoldsWhatIsStillQueuedWhileTheWorkersAreBusy) {
  Batches batches;
  Mutex gate_mu;
  bool gate_open = false;
  ThreadPool workers(2);  // one worker, kept busy below (destroyed, so joined, before the gate)
  workers.Run([&] {
    MutexLock lock(&gate_mu);
    gate_mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return gate_open; });
  });
  AggregationOptions options = Observed(&batches, 3, uint64_t{1} << 30);
  options.batching.workers = &workers;
  auto aggregation = NewCountingAggregation("r", options);
  int64_t expected = 0;
  for (int c = 0; c < 7; ++c) {
    Contribute(*aggregation, "client-" + std::to_string(c), 10 + c);
    expected += 10 + c;
  }
  EXPECT_EQ(aggregation->pending_updates(), 7);  // two full batches queued, one update pending
  ASSERT_TRUE(aggregation->Seal().ok());
  ASSERT_EQ(aggregation->state(), v1::FINALIZED) << aggregation->Status().detail();
  EXPECT_EQ(ResultOf(*aggregation), (std::vector<int64_t>{7, expected}));
  EXPECT_EQ(batches.AwaitSizes(3), (std::vector<size_t>{3, 3, 1}));  // reduced by the sealing thread
  EXPECT_EQ(aggregation->pending_updates(), 0);
  {
    MutexLock lock(&gate_mu);
    gate_open = true;
  }
}

TEST(AggregationBatchingTest, EveryUpdateCountsOnceWhateverTheBatchBoundaries) {
  Batches batches;
  auto aggregation = NewCountingAggregation("r", Observed(&batches, 16, kUpdateBytes));
  int64_t expected = 0;
  for (int c = 0; c < 5; ++c) {
    Contribute(*aggregation, "client-" + std::to_string(c), 10 + c);
    expected += 10 + c;
  }
  EXPECT_EQ(batches.AwaitSizes(5), (std::vector<size_t>(5, 1)));  // one update already fills a batch
  ASSERT_TRUE(aggregation->Seal().ok());
  ASSERT_EQ(aggregation->state(), v1::FINALIZED) << aggregation->Status().detail();
  EXPECT_EQ(ResultOf(*aggregation), (std::vector<int64_t>{5, expected}));
}

TEST(AggregationBatchingTest, AMirrorKeepsCountingWhileItsDeltaIsReduced) {
  Signal reducing;
  Signal release;
  std::atomic<int> reductions{0};
  AggregationOptions options;
  options.forwarding = true;
  options.flush_interval = absl::Hours(1);
  options.batching.batch_size = 100;  // updates stay pending until a delta takes them
  options.batching.on_batch_reduced = [&](absl::Duration, size_t) {
    if (reductions.fetch_add(1) > 0) return;
    reducing.Raise();  // the first delta's reduction waits here
    (void)release.WaitFor(absl::Seconds(60));
  };
  std::shared_ptr<Aggregation> mirror = NewCountingAggregation("m", options);
  mirror->SetJoinedUpstream(true);
  absl::Cleanup free_reduction = [&release] { release.Raise(); };
  Contribute(*mirror, "before-the-cut", 1);
  absl::StatusOr<Aggregation::Delta> first = absl::UnknownError("not taken");
  std::thread take([&] { first = mirror->TakeDelta(false); });
  ASSERT_TRUE(reducing.WaitFor(absl::Seconds(30)));
  Signal counted;
  std::thread contribute([&] {
    Contribute(*mirror, "after-the-cut", 2);
    counted.Raise();
  });
  EXPECT_TRUE(counted.WaitFor(absl::Seconds(10))) << "counting waited for the delta's reduction";
  release.Raise();
  take.join();
  contribute.join();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->contributions, 1);
  EXPECT_EQ(first->covered_client_ids, std::vector<std::string>{"before-the-cut"});
  absl::StatusOr<Aggregation::Delta> second = mirror->TakeDelta(false);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->contributions, 1);
  EXPECT_EQ(second->covered_client_ids, std::vector<std::string>{"after-the-cut"});
}

// A delta that is not the last leaves fresh accumulators for what comes next; after the
// final one, nothing more goes up and the mirror holds none.
TEST(AggregationBatchingTest, AMirrorsFinalDeltaLeavesNoAccumulatorsBehind) {
  MemoryBudget budget(0);  // accounts only
  AggregationOptions options;
  options.forwarding = true;
  options.batching.memory_budget = &budget;
  std::shared_ptr<Aggregation> mirror = NewCountingAggregation("m", options);
  mirror->SetJoinedUpstream(true);
  Contribute(*mirror, "a", 1);
  const uint64_t fresh = budget.used();
  ASSERT_GT(fresh, 0u);
  ASSERT_TRUE(mirror->TakeDelta(false).ok());
  EXPECT_EQ(budget.used(), fresh);
  EXPECT_TRUE(mirror->holds_accumulators());
  Contribute(*mirror, "b", 2);
  absl::StatusOr<Aggregation::Delta> last = mirror->TakeDelta(true);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->contributions, 1);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_FALSE(mirror->holds_accumulators());
}

}  // namespace
}  // namespace fedagg
