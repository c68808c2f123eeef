// Where the registry creates an aggregation (AggregationRegistry::CreateAsync): with the
// node's workers (AggregationOptions::finalizer), there and not on the caller's thread (an
// RPC thread in the server), which returns at once while the accumulator is allocated
// and the first checkpoint written; the aggregation is seen only once it is created.
// Without workers, inline. An intermediate makes one mirror of an aggregation however many
// lookups learn it at once. A creation whose accumulators do not fit the node (its memory
// budget, its memory) is refused with RESOURCE_EXHAUSTED before anything is allocated.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/core/cpu_accumulator_factory.h"
#include "service/core/device_monitor.h"
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

// Reduces like the CPU backend and says it reduces on a device (a monitor that reads none):
// what the registry counts of such a backend's accumulators is the host memory they take.
class DeviceBackendOnTheHost final : public AccumulatorFactory {
 public:
  class NoDevices final : public DeviceMonitor {
   public:
    absl::StatusOr<std::vector<DeviceMemoryReading>> ReadMemory() const override {
      return std::vector<DeviceMemoryReading>{};
    }
  };
  absl::string_view name() const override { return "device-on-the-host"; }
  std::unique_ptr<FieldAccumulator> Make(const FieldSpec& field) const override {
    return CpuAccumulatorFactory::Default().Make(field);
  }
  const DeviceMonitor* device_monitor() const override { return &monitor_; }

 private:
  NoDevices monitor_;
};

// A federated_sum of float32[elements], deterministic or not.
v1::AggregationSpec FloatSumOfElements(const std::string& id, int64_t elements, bool deterministic) {
  v1::AggregationSpec spec = CountingSpec(id);
  absl::StatusOr<ValueType> type = ParseValueType(absl::StrCat("<w=float32[", elements, "]>"));
  EXPECT_TRUE(type.ok()) << type.status();
  *spec.mutable_value_type() = ValueTypeToProto(*type);
  spec.set_deterministic(deterministic);
  return spec;
}

TEST(AggregationRegistryCreateTest, ADeviceBackendsExactSumsAreHostMemoryAndWeighedAsSuch) {
  // 32 Ki exact sums of 48 bytes: 1.5 MiB of host memory on every backend.
  constexpr int64_t kElements = 32 << 10;
  MemoryBudget budget(1 << 20);
  DeviceBackendOnTheHost backend;
  AggregationOptions options;
  options.backend = &backend;
  options.batching.memory_budget = &budget;
  AggregationRegistry registry(options);
  const absl::StatusOr<std::shared_ptr<Aggregation>> refused =
      registry.Create(FloatSumOfElements("exact", kElements, /*deterministic=*/true));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("needs 1572864 bytes"));
  EXPECT_EQ(budget.used(), 0u);
  // The same field summed in float lives on the device: the host budget does not weigh it.
  EXPECT_TRUE(registry.Create(FloatSumOfElements("float", kElements, /*deterministic=*/false)).ok());
}

TEST(AggregationRegistryCreateTest, FinishedAggregationsGiveBackTheirAccumulatorsAndKeepTheirStatus) {
  MemoryBudget budget(1 << 20);
  AggregationOptions options;
  options.batching.memory_budget = &budget;
  AggregationRegistry registry(options);
  absl::StatusOr<std::shared_ptr<Aggregation>> finished = registry.Create(SpecOfElements("finished", 64 << 10));
  absl::StatusOr<std::shared_ptr<Aggregation>> open = registry.Create(SpecOfElements("open", 32 << 10));
  ASSERT_TRUE(finished.ok() && open.ok());
  EXPECT_EQ(budget.used(), 768u << 10);
  ASSERT_TRUE((*finished)->Seal().ok());  // no contribution: FAILED, finished
  ASSERT_EQ((*finished)->state(), v1::FAILED);
  EXPECT_EQ(budget.used(), 256u << 10);  // the open one's only
  EXPECT_TRUE(registry.Find("finished").ok());
  // Its 512 KiB are free for a new one, with nothing forgotten.
  ASSERT_TRUE(registry.Create(SpecOfElements("new", 96 << 10)).ok());
  EXPECT_TRUE(registry.Find("finished").ok());
  EXPECT_EQ(budget.used(), 1u << 20);
  // One that open aggregations leave no room for is refused, and the finished one, which
  // frees nothing by going, keeps its status.
  EXPECT_EQ(registry.Create(SpecOfElements("too-big", 8 << 10)).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(registry.Find("finished").ok());
}

// A checkpointed aggregation keeps its accumulators until its finished state is
// checkpointed (here never: no checkpointer runs), so until then the oldest finished
// ones give way.
TEST(AggregationRegistryCreateTest, TheOldestFinishedAggregationsGiveWayToANewOne) {
  MemoryBudget budget(1 << 20);
  AggregationOptions options;
  options.batching.memory_budget = &budget;
  options.checkpointed = true;
  AggregationRegistry registry(options);
  absl::StatusOr<std::shared_ptr<Aggregation>> older = registry.Create(SpecOfElements("older", 48 << 10));
  absl::StatusOr<std::shared_ptr<Aggregation>> old = registry.Create(SpecOfElements("old", 48 << 10));
  absl::StatusOr<std::shared_ptr<Aggregation>> open = registry.Create(SpecOfElements("open", 16 << 10));
  ASSERT_TRUE(older.ok() && old.ok() && open.ok());
  ASSERT_TRUE((*older)->Seal().ok());  // no contribution: FAILED, finished
  ASSERT_TRUE((*old)->Seal().ok());
  ASSERT_EQ((*older)->state(), v1::FAILED);
  older->reset();  // the registry holds the only references
  old->reset();
  EXPECT_EQ(budget.used(), 896u << 10);
  // 512 KiB more: only the older finished one needs to go.
  ASSERT_TRUE(registry.Create(SpecOfElements("new", 64 << 10)).ok());
  EXPECT_EQ(registry.Find("older").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.Find("old").ok());
  EXPECT_TRUE(registry.Find("open").ok());
  EXPECT_EQ(budget.used(), 1u << 20);  // old 384 + open 128 + new 512 KiB
  // Open aggregations never give way: past them (and past 'old', which is forgotten
  // trying), the creation is refused.
  const absl::StatusOr<std::shared_ptr<Aggregation>> refused = registry.Create(SpecOfElements("too-big", 80 << 10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_EQ(registry.Find("old").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.Find("open").ok());
  EXPECT_TRUE(registry.Find("new").ok());
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

// The parent as an intermediate sees it: every spec fetched has a field of 4 Mi int64 (32
// MiB to allocate and zero, so that two workers making a mirror overlap), answered on a
// thread of its own; mirrors made are counted.
class FakeParent final : public UpstreamSource {
 public:
  ~FakeParent() override {
    for (std::thread& answer : answers_) answer.join();
  }
  void FetchSpec(const std::string& id, std::function<void(absl::StatusOr<v1::AggregationSpec>)> done) override {
    v1::AggregationSpec spec = SpecOfElements(id, 4 << 20);
    spec.set_incarnation("1");
    MutexLock lock(&mu_);
    answers_.emplace_back([spec, done = std::move(done)] { done(spec); });
  }
  void MirrorCreated(std::shared_ptr<Aggregation>) override { ++mirrors_created; }
  void Claim(const std::string&, const std::string&, const std::string&, std::function<void(absl::Status)> done) override {
    done(absl::OkStatus());
  }
  void Release(const std::string&, const std::string&, const std::string&) override {}

  std::atomic<int> mirrors_created{0};

 private:
  Mutex mu_;
  std::vector<std::thread> answers_ ABSL_GUARDED_BY(mu_);
};

TEST(AggregationRegistryCreateTest, ManyLookupsLearningOneAggregationMakeOneMirror) {
  FakeParent parent;  // outlives the workers and the registry
  ThreadPool workers(3);  // two worker threads
  AggregationOptions options;
  options.finalizer = &workers;  // mirrors are made there
  constexpr int kLookups = 16;
  std::vector<Answer> answers(kLookups);
  {
    AggregationRegistry registry(options);
    registry.SetUpstream(&parent);
    std::vector<std::thread> lookups;
    for (int i = 0; i < kLookups; ++i) {
      lookups.emplace_back([&registry, answer = &answers[i]] { registry.GetAsync("learned", Into(answer)); });
    }
    for (std::thread& lookup : lookups) lookup.join();
    // The mirror never joins the fake parent: each lookup is answered after the join wait.
    for (Answer& answer : answers) ASSERT_TRUE(answer.given.WaitFor(absl::Seconds(10)));
  }
  EXPECT_EQ(parent.mirrors_created.load(), 1);
  for (const Answer& answer : answers) {
    ASSERT_TRUE(answer.created.ok()) << answer.created.status();
    EXPECT_EQ(answer.created->get(), answers[0].created->get());
  }
}

}  // namespace
}  // namespace fedagg
