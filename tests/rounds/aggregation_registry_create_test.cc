// Where the registry creates an aggregation (AggregationRegistry::CreateAsync): with the
// node's workers (AggregationOptions::finalizer), there and not on the caller's thread (an
// RPC thread in the server), which returns at once while the accumulator is allocated
// and the first checkpoint written; the aggregation is seen only once it is created.
// Without workers, inline. A creation whose accumulators do not fit the node (its memory
// budget, its memory) is refused with RESOURCE_EXHAUSTED before anything is allocated.
#include <string>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/core/machine_resources.h"
#include "service/core/memory_budget.h"
#include "service/core/thread_pool.h"
#include "service/rounds/spec_conversion.h"
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

// CountingSpec(id) with a field of `elements` int64 (8 bytes each in the accumulator).
v1::AggregationSpec SpecOfElements(const std::string& id, int64_t elements) {
  v1::AggregationSpec spec = CountingSpec(id);
  absl::StatusOr<ValueType> type = ParseValueType(absl::StrCat("<w=int64[", elements, "]>"));
  EXPECT_TRUE(type.ok()) << type.status();
  *spec.mutable_value_type() = ValueTypeToProto(*type);
  return spec;
}

TEST(AggregationRegistryCreateTest, AccumulatorsBeyondTheMemoryBudgetAreRefusedBeforeTheyAreMade) {
  MemoryBudget budget(1 << 20);
  AggregationOptions options;
  options.batching.memory_budget = &budget;
  AggregationRegistry registry(options);
  ASSERT_TRUE(registry.Create(SpecOfElements("fits", 64 << 10)).ok());  // 512 KiB of the 1 MiB
  EXPECT_EQ(budget.used(), 512u << 10);
  const absl::StatusOr<std::shared_ptr<Aggregation>> refused = registry.Create(SpecOfElements("too-big", 96 << 10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("the accumulators of aggregation 'too-big' (<w=int64[98304]>) needs 786432 bytes"));
  EXPECT_EQ(budget.used(), 512u << 10);  // nothing held for it
  EXPECT_EQ(registry.Find("too-big").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.Create(SpecOfElements("fits-too", 32 << 10)).ok());
}

TEST(AggregationRegistryCreateTest, AccumulatorsBeyondTheNodesMemoryAreRefusedWithoutABudgetLimit) {
  const uint64_t memory = ReadMachineResources().memory_bytes;
  if (memory == 0) GTEST_SKIP() << "this machine's memory could not be read";
  MemoryBudget accounts_only(0);
  AggregationOptions options;
  options.batching.memory_budget = &accounts_only;
  AggregationRegistry registry(options);
  // Twice the node's memory, in 8-byte elements: allocating it would end the process.
  const int64_t elements = static_cast<int64_t>(memory / 4);
  const absl::StatusOr<std::shared_ptr<Aggregation>> refused = registry.Create(SpecOfElements("huge", elements));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("more memory"));
  EXPECT_EQ(accounts_only.used(), 0u);
  // An id already taken is answered ALREADY_EXISTS before the accumulators are even weighed.
  ASSERT_TRUE(registry.Create(CountingSpec("taken")).ok());
  EXPECT_EQ(registry.Create(SpecOfElements("taken", elements)).status().code(), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace fedagg
