// Where the registry creates an aggregation (AggregationRegistry::CreateAsync): with the
// node's workers (AggregationOptions::finalizer), there and not on the caller's thread (an
// RPC thread in the server), which returns at once while the accumulator is allocated
// and the first checkpoint written; the aggregation is seen only once it is created.
// Without workers, inline.
#include <string>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/core/thread_pool.h"
#include "service/rounds/aggregation_registry.h"
#include "tests/rounds/rounds_test_util.h"

namespace fedagg {
namespace {

using testing::CountingSpec;
using testing::Signal;

// A store whose first-checkpoint write waits for `release` (10 s at most).
class StalledStore final : public AggregationStore {
 public:
  absl::Status Created(Aggregation&) override {
    writing.Raise();
    release.WaitFor(absl::Seconds(10));
    return absl::OkStatus();
  }
  void Forgotten(const std::string&) override {}

  Signal writing;
  Signal release;
};

// What CreateAsync's callback was given, and on which thread.
struct Answer {
  absl::StatusOr<std::shared_ptr<Aggregation>> created = absl::UnknownError("not answered");
  std::thread::id thread;
  Signal given;
};

AggregationRegistry::Created Into(Answer* answer) {
  return [answer](absl::StatusOr<std::shared_ptr<Aggregation>> created) {
    answer->created = std::move(created);
    answer->thread = std::this_thread::get_id();
    answer->given.Raise();
  };
}

TEST(AggregationRegistryCreateTest, WithWorkersTheCallerDoesNotWaitForTheFirstCheckpoint) {
  StalledStore store;  // outlives the workers and the registry
  ThreadPool workers(2);
  AggregationOptions options;
  options.finalizer = &workers;
  AggregationRegistry registry(options);
  registry.SetStore(&store);
  const absl::Cleanup release = [&store] { store.release.Raise(); };
  Answer answer;
  registry.CreateAsync(CountingSpec("r1"), Into(&answer));
  // Back here while the store still writes: the write runs elsewhere.
  ASSERT_TRUE(store.writing.WaitFor(absl::Seconds(10)));
  EXPECT_FALSE(answer.given.Raised());
  EXPECT_EQ(registry.Find("r1").status().code(), absl::StatusCode::kNotFound) << "seen before it was stored";
  store.release.Raise();
  ASSERT_TRUE(answer.given.WaitFor(absl::Seconds(10)));
  ASSERT_TRUE(answer.created.ok()) << answer.created.status();
  EXPECT_NE(answer.thread, std::this_thread::get_id());
  EXPECT_TRUE(registry.Find("r1").ok());
}

TEST(AggregationRegistryCreateTest, RefusalsComeThroughTheCallbackToo) {
  ThreadPool workers(2);
  AggregationOptions options;
  options.finalizer = &workers;
  AggregationRegistry registry(options);
  Answer first, again;
  registry.CreateAsync(CountingSpec("r1"), Into(&first));
  ASSERT_TRUE(first.given.WaitFor(absl::Seconds(10)));
  ASSERT_TRUE(first.created.ok()) << first.created.status();
  registry.CreateAsync(CountingSpec("r1"), Into(&again));
  ASSERT_TRUE(again.given.WaitFor(absl::Seconds(10)));
  EXPECT_EQ(again.created.status().code(), absl::StatusCode::kAlreadyExists) << again.created.status();
}

TEST(AggregationRegistryCreateTest, WithoutWorkersInline) {
  AggregationRegistry registry(AggregationOptions{});
  Answer answer;
  registry.CreateAsync(CountingSpec("r1"), Into(&answer));
  EXPECT_TRUE(answer.given.Raised());
  EXPECT_EQ(answer.thread, std::this_thread::get_id());
  EXPECT_TRUE(answer.created.ok()) << answer.created.status();
}

}  // namespace
}  // namespace fedagg
