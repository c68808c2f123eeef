// The staging ring on the CPU copy engine: reductions in submission order, each seeing
// its own slot's bytes after the copy; back pressure when every slot is busy; a failed
// copy skipping only its own reduction; allocation failures, on first use and all at once
// (AllocateSlots); shutdown with slots in flight (reductions not started are cancelled,
// Acquire waiters released).
#include "portable/staging_ring.h"

#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "portable/cpu_copy_engine.h"
#include "service/core/mutex.h"

namespace fedagg::portable {
namespace {

// A one-shot gate that reductions wait on.
class Gate {
 public:
  void Open() {
    MutexLock lock(&mu_);
    open_ = true;
  }
  void Wait() {
    MutexLock lock(&mu_);
    mu_.Await([&] { return open_; });
  }

 private:
  Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

// The CPU engine, with chosen allocations and copies failing.
class FaultyEngine final : public CopyEngine {
 public:
  int allocations_before_failing = 1 << 30;
  int fail_start_of_copy = -1;  // the n-th StartCopy (0-based) fails to start
  int fail_wait_of_copy = -1;   // the n-th copy fails when waited for

  absl::StatusOr<std::unique_ptr<StagingBuffer>> Allocate(size_t bytes) override {
    if (allocations_before_failing-- <= 0) return absl::ResourceExhaustedError("no memory for a slot (test)");
    return cpu_.Allocate(bytes);
  }
  absl::Status StartCopy(StagingBuffer& buffer, absl::Span<const CopySpan> spans) override {
    const int n = starts_++;
    if (n == fail_start_of_copy) return absl::InternalError("copy could not start (test)");
    {
      MutexLock lock(&mu_);
      copy_number_[&buffer] = n;
    }
    return cpu_.StartCopy(buffer, spans);
  }
  absl::StatusOr<absl::Duration> WaitCopied(StagingBuffer& buffer) override {
    absl::StatusOr<absl::Duration> copied = cpu_.WaitCopied(buffer);
    MutexLock lock(&mu_);
    if (copy_number_[&buffer] == fail_wait_of_copy) return absl::DataLossError("copy failed (test)");
    return copied;
  }
  absl::Status BindThread(int) override { return absl::OkStatus(); }

 private:
  CpuCopyEngine cpu_;
  std::atomic<int> starts_{0};
  Mutex mu_;
  std::map<const StagingBuffer*, int> copy_number_ ABSL_GUARDED_BY(mu_);  // of the last copy into each
};

// Waits until every slot is back: the ring records a reduction's time and frees its slot
// just after the reduction's callback returns.
void WaitIdle(const StagingRing& ring) {
  while (ring.slots_in_use() > 0) std::this_thread::yield();
}

StagingRingOptions Options(int slots, size_t slot_bytes = 4096, int lanes = 1) {
  StagingRingOptions options;
  options.slots = slots;
  options.slot_bytes = slot_bytes;
  options.lanes = lanes;
  return options;
}

// Submits a slot holding `value` in every byte of its first `bytes`, packed in its host
// memory, for reduction on `lane`.
void SubmitFilled(StagingRing& ring, unsigned char value, size_t bytes, StagingRing::Reduction reduction,
                  int lane = 0) {
  absl::StatusOr<StagingRing::Lease> lease = ring.Acquire();
  ASSERT_TRUE(lease.ok()) << lease.status();
  void* host = lease->host();
  std::memset(host, value, bytes);
  ring.Submit(*std::move(lease), {CopySpan{host, 0, bytes}}, std::move(reduction), lane);
}

TEST(StagingRingTest, ReductionsRunInSubmissionOrderOnTheirOwnCopiedBytes) {
  constexpr int kBatches = 200;
  std::vector<int> seen;
  Mutex mu;
  {
    StagingRing ring(std::make_unique<CpuCopyEngine>(), Options(3));
    for (int b = 0; b < kBatches; ++b) {
      const unsigned char value = static_cast<unsigned char>(b);
      const size_t bytes = 1 + (b * 37) % 4096;
      SubmitFilled(ring, value, bytes, [&, value, bytes](absl::StatusOr<const void*> data) {
        ASSERT_TRUE(data.ok()) << data.status();
        const unsigned char* device = static_cast<const unsigned char*>(*data);
        size_t wrong = 0;
        for (size_t i = 0; i < bytes; ++i) wrong += device[i] != value;
        EXPECT_EQ(wrong, 0u) << "batch " << int{value} << " read bytes that were not its own";
        MutexLock lock(&mu);
        seen.push_back(value);
      });
    }
    // Destroying the ring cancels what is not started; wait for all to be reduced first.
    {
      MutexLock lock(&mu);
      mu.Await([&] { return seen.size() == kBatches; });
    }
    WaitIdle(ring);
    EXPECT_LE(ring.host_bytes(), 3u * 4096);
    EXPECT_GT(ring.bytes_staged(), 0u);
    EXPECT_EQ(ring.copy_seconds().Read().count, static_cast<uint64_t>(kBatches));
    EXPECT_EQ(ring.reduce_seconds().Read().count, static_cast<uint64_t>(kBatches));
  }
  for (int b = 0; b < kBatches; ++b) EXPECT_EQ(seen[b], b % 256) << "out of order at " << b;
}

// Spans straight from the caller's memory, beside one packed in the slot: once WaitRead
// returns, the caller may overwrite its memory and the reduction still reads what was
// there at Submit, at the spans' offsets. Only the packed span counts as packed.
TEST(StagingRingTest, SpansFromTheCallersMemoryAreReadBeforeWaitReadReturns) {
  constexpr int kBatches = 50;
  Gate reductions;  // held shut: every reduction waits, so WaitRead cannot rely on them
  std::atomic<int> wrong{0}, reduced{0};
  StagingRing ring(std::make_unique<CpuCopyEngine>(), Options(kBatches, 4096));
  std::vector<std::vector<unsigned char>> callers(kBatches, std::vector<unsigned char>(1000));
  for (int b = 0; b < kBatches; ++b) {
    absl::StatusOr<StagingRing::Lease> lease = ring.Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    unsigned char* packed = static_cast<unsigned char*>(lease->host());
    std::memset(packed, 0xEE, 24);
    std::memset(callers[b].data(), b, callers[b].size());
    const StagingRing::Submission submission = ring.Submit(
        *std::move(lease), {CopySpan{callers[b].data(), 100, 1000}, CopySpan{packed, 0, 24}},
        [&, b](absl::StatusOr<const void*> data) {
          reductions.Wait();
          const unsigned char* device = static_cast<const unsigned char*>(*data);
          for (size_t i = 0; i < 24; ++i) wrong += device[i] != 0xEE;
          for (size_t i = 100; i < 1100; ++i) wrong += device[i] != static_cast<unsigned char>(b);
          ++reduced;
        });
    ring.WaitRead(submission);
    std::memset(callers[b].data(), 0xFF, callers[b].size());  // the caller reuses its memory
  }
  EXPECT_EQ(reduced.load(), 0) << "WaitRead waited for a reduction";
  reductions.Open();
  while (reduced.load() < kBatches) std::this_thread::yield();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(ring.bytes_staged(), kBatches * 1024u);
  EXPECT_EQ(ring.bytes_packed(), kBatches * 24u);
  WaitIdle(ring);
}

// Lanes: the lanes are assigned in turn; a reduction held on one lane does not hold the
// others back, and each lane reduces its own batches in the order they were submitted.
TEST(StagingRingTest, EachLaneReducesInOrderAndALaneHeldUpHoldsNoOtherBack) {
  constexpr int kLanes = 3, kBatchesPerLane = 40;
  StagingRing ring(std::make_unique<CpuCopyEngine>(), Options(8, 4096, kLanes));
  EXPECT_EQ(ring.AssignLane(), 0);
  EXPECT_EQ(ring.AssignLane(), 1);
  EXPECT_EQ(ring.AssignLane(), 2);
  EXPECT_EQ(ring.AssignLane(), 0);
  Gate held;  // lane 0's first reduction waits here
  Mutex mu;
  std::vector<std::vector<int>> seen(kLanes);
  SubmitFilled(ring, 0, 16, [&](absl::StatusOr<const void*>) {
    held.Wait();
    MutexLock lock(&mu);
    seen[0].push_back(0);
  }, 0);
  for (int b = 0; b < kBatchesPerLane; ++b) {
    for (int lane = 1; lane < kLanes; ++lane) {
      SubmitFilled(ring, static_cast<unsigned char>(b), 16, [&, lane, b](absl::StatusOr<const void*> data) {
        ASSERT_TRUE(data.ok()) << data.status();
        EXPECT_EQ(*static_cast<const unsigned char*>(*data), static_cast<unsigned char>(b));
        MutexLock lock(&mu);
        seen[lane].push_back(b);
      }, lane);
    }
  }
  {
    MutexLock lock(&mu);
    mu.Await([&] {
      return seen[1].size() == kBatchesPerLane && seen[2].size() == kBatchesPerLane;
    });  // while lane 0 is held
    EXPECT_TRUE(seen[0].empty());
  }
  held.Open();
  {
    MutexLock lock(&mu);
    mu.Await([&] { return seen[0].size() == 1; });
  }
  for (int lane = 1; lane < kLanes; ++lane) {
    for (int b = 0; b < kBatchesPerLane; ++b) EXPECT_EQ(seen[lane][b], b) << "lane " << lane << " out of order";
  }
  WaitIdle(ring);
}

TEST(StagingRingTest, AcquireWaitsWhileEverySlotIsBusy) {
  Gate gate;
  StagingRing ring(std::make_unique<CpuCopyEngine>(), Options(2));
  std::atomic<int> reduced{0};
  for (int b = 0; b < 2; ++b) {
    SubmitFilled(ring, 1, 16, [&](absl::StatusOr<const void*>) {
      gate.Wait();
      ++reduced;
    });
  }
  EXPECT_EQ(ring.slots_in_use(), 2);
  std::atomic<bool> acquired{false};
  std::thread third([&] {
    absl::StatusOr<StagingRing::Lease> lease = ring.Acquire();
    EXPECT_TRUE(lease.ok()) << lease.status();
    acquired = true;
  });
  // Both slots are held by reductions that cannot finish: the third Acquire must wait.
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(acquired.load()) << "Acquire returned a slot while every slot was busy";
  gate.Open();
  third.join();
  EXPECT_TRUE(acquired.load());
  while (reduced.load() < 2) std::this_thread::yield();
}

TEST(StagingRingTest, AFailedCopySkipsOnlyItsOwnReductionInItsTurn) {
  auto engine = std::make_unique<FaultyEngine>();
  engine->fail_start_of_copy = 1;
  engine->fail_wait_of_copy = 3;
  std::vector<std::string> outcomes;
  Mutex mu;
  {
    StagingRing ring(std::move(engine), Options(2));
    for (int b = 0; b < 5; ++b) {
      SubmitFilled(ring, static_cast<unsigned char>(b), 8, [&, b](absl::StatusOr<const void*> data) {
        MutexLock lock(&mu);
        outcomes.push_back(data.ok() ? absl::StrCat(b, ":", int{*static_cast<const unsigned char*>(*data)})
                                     : absl::StrCat(b, ":", data.status().message()));
      });
    }
    {
      MutexLock lock(&mu);
      mu.Await([&] { return outcomes.size() == 5; });
    }
    WaitIdle(ring);
    EXPECT_EQ(ring.copy_seconds().Read().count, 3u);  // only the copies that completed
    EXPECT_EQ(ring.reduce_seconds().Read().count, 3u);
  }
  EXPECT_EQ(outcomes, (std::vector<std::string>{"0:0", "1:copy could not start (test)", "2:2",
                                                "3:copy failed (test)", "4:4"}));
}

TEST(StagingRingTest, NoFirstSlotIsResourceExhaustedAndALaterFailureKeepsTheSlotsThereAre) {
  {
    auto engine = std::make_unique<FaultyEngine>();
    engine->allocations_before_failing = 0;
    StagingRing ring(std::move(engine), Options(4));
    absl::StatusOr<StagingRing::Lease> lease = ring.Acquire();
    EXPECT_EQ(lease.status().code(), absl::StatusCode::kResourceExhausted);
  }
  auto engine = std::make_unique<FaultyEngine>();
  engine->allocations_before_failing = 1;
  StagingRing ring(std::move(engine), Options(4));
  std::atomic<int> reduced{0};
  for (int b = 0; b < 10; ++b) SubmitFilled(ring, 7, 8, [&](absl::StatusOr<const void*> data) { reduced += data.ok(); });
  while (reduced.load() < 10) std::this_thread::yield();
  EXPECT_EQ(ring.host_bytes(), 4096u);  // the one slot that could be allocated served all
}

TEST(StagingRingTest, AllocateSlotsAllocatesEverySlotBeforeTheFirstBatch) {
  auto engine = std::make_unique<FaultyEngine>();
  FaultyEngine* faulty = engine.get();
  StagingRing ring(std::move(engine), Options(3));
  EXPECT_EQ(ring.host_bytes(), 0u);
  ASSERT_TRUE(ring.AllocateSlots().ok());
  EXPECT_EQ(ring.host_bytes(), 3 * 4096u);
  EXPECT_EQ(ring.slots_in_use(), 0);
  faulty->allocations_before_failing = 0;  // no allocation from here on: the slots are there
  std::atomic<int> reduced{0};
  for (int b = 0; b < 6; ++b) SubmitFilled(ring, 3, 8, [&](absl::StatusOr<const void*> data) { reduced += data.ok(); });
  while (reduced.load() < 6) std::this_thread::yield();
  EXPECT_TRUE(ring.AllocateSlots().ok()) << "every slot is allocated: nothing more to do";
  EXPECT_EQ(ring.host_bytes(), 3 * 4096u);
}

TEST(StagingRingTest, AllocateSlotsReportsTheFirstFailureAndTheRingRunsOnWhatItGot) {
  {
    auto engine = std::make_unique<FaultyEngine>();
    engine->allocations_before_failing = 0;
    StagingRing ring(std::move(engine), Options(4));
    EXPECT_EQ(ring.AllocateSlots().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(ring.Acquire().status().code(), absl::StatusCode::kResourceExhausted);
  }
  auto engine = std::make_unique<FaultyEngine>();
  engine->allocations_before_failing = 2;
  StagingRing ring(std::move(engine), Options(4));
  const absl::Status allocated = ring.AllocateSlots();
  EXPECT_EQ(allocated.code(), absl::StatusCode::kResourceExhausted) << allocated;
  EXPECT_EQ(ring.host_bytes(), 2 * 4096u);
  std::atomic<int> reduced{0};
  for (int b = 0; b < 10; ++b) SubmitFilled(ring, 5, 8, [&](absl::StatusOr<const void*> data) { reduced += data.ok(); });
  while (reduced.load() < 10) std::this_thread::yield();
  EXPECT_EQ(ring.host_bytes(), 2 * 4096u);  // the two slots served every batch
}

TEST(StagingRingTest, ShutdownWithSlotsInFlightCancelsWhatHasNotStarted) {
  Gate gate;
  std::vector<absl::StatusCode> codes;
  Mutex mu;
  std::atomic<bool> started{false};
  auto ring = std::make_unique<StagingRing>(std::make_unique<CpuCopyEngine>(), Options(3));
  SubmitFilled(*ring, 1, 64, [&](absl::StatusOr<const void*> data) {
    started = true;
    gate.Wait();
    MutexLock lock(&mu);
    codes.push_back(data.status().code());
  });
  for (int b = 0; b < 2; ++b) {
    SubmitFilled(*ring, 2, 64, [&](absl::StatusOr<const void*> data) {
      MutexLock lock(&mu);
      codes.push_back(data.status().code());
    });
  }
  while (!started.load()) std::this_thread::yield();
  // Every slot is busy: this Acquire waits until the ring shuts down. (The ring stays
  // alive until the gate opens, because its destructor joins the blocked reduction.)
  StagingRing* const raw = ring.get();
  std::thread waiter([raw] {
    absl::StatusOr<StagingRing::Lease> lease = raw->Acquire();
    EXPECT_EQ(lease.status().code(), absl::StatusCode::kCancelled);
  });
  absl::SleepFor(absl::Milliseconds(50));
  std::thread destroyer([&] { ring.reset(); });
  absl::SleepFor(absl::Milliseconds(50));
  gate.Open();
  destroyer.join();
  waiter.join();
  EXPECT_EQ(codes, (std::vector<absl::StatusCode>{absl::StatusCode::kOk, absl::StatusCode::kCancelled,
                                                  absl::StatusCode::kCancelled}));
}

TEST(StagingRingTest, ALeaseDroppedUnsubmittedReturnsItsSlot) {
  StagingRing ring(std::make_unique<CpuCopyEngine>(), Options(1));
  {
    absl::StatusOr<StagingRing::Lease> lease = ring.Acquire();
    ASSERT_TRUE(lease.ok());
    EXPECT_EQ(ring.slots_in_use(), 1);
  }
  EXPECT_EQ(ring.slots_in_use(), 0);
  absl::StatusOr<StagingRing::Lease> again = ring.Acquire();
  EXPECT_TRUE(again.ok()) << again.status();
}

}  // namespace
}  // namespace fedagg::portable
