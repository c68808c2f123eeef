// The ring-fed reducer over a fake device reducer: Accumulate returns once the batch is
// copied and the reduction finishes later, without waiting for earlier batches'
// reductions; a dense batch's values are copied once, straight from the updates; Save waits for them; a failed reduction poisons every later call; a refused
// batch leaves nothing behind; a batch cut into parts sums exactly as a whole one.
#include "portable/ring_field_reducer.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "portable/cpu_copy_engine.h"

namespace fedagg::portable {
namespace {

// Sums dense float32 parts into float64 sums on the "device" (the CPU); can be held at a
// gate, or told to fail.
class FakeDeviceReducer final : public StagedFieldReducer<double> {
 public:
  explicit FakeDeviceReducer(int64_t width) : sums_(static_cast<size_t>(width), 0.0) {}

  Mutex mu;
  bool held ABSL_GUARDED_BY(mu) = false;
  bool fail ABSL_GUARDED_BY(mu) = false;
  int parts ABSL_GUARDED_BY(mu) = 0;

  Outcome Accumulate(const StagedBatch& batch) override {
    MutexLock lock(&mu);
    mu.Await([&] { return !held; });
    ++parts;
    if (fail) return Outcome{Outcome::Code::kInternal, "the device fell over (test)"};
    const float* values = static_cast<const float*>(batch.values);
    for (int64_t r = 0; r < batch.updates; ++r) {
      for (int64_t c = 0; c < batch.columns; ++c) {
        sums_[batch.column_begin + c] += batch.weights[r] * values[r * batch.columns + c];
      }
    }
    return Outcome{};
  }
  Outcome Merge(const StagedFieldReducer<double>&) override { return Outcome{}; }
  Outcome Save(HostState<double>* out) const override {
    out->values = sums_;
    return Outcome{};
  }
  // The sums as they are (the fake divides nothing).
  Outcome SaveResult(const ResultRequest& request) const override {
    if (request.count != sums_.size()) return Outcome{Outcome::Code::kInternal, "another count"};
    std::copy(sums_.begin(), sums_.end(), static_cast<double*>(request.values));
    return Outcome{};
  }
  Outcome Load(const HostState<double>& in) override {
    sums_ = in.values;
    return Outcome{};
  }
  uint64_t HostBytes() const override { return sums_.size() * sizeof(double); }

 private:
  std::vector<double> sums_;
};

ReducerSpec Spec(int64_t width) {
  ReducerSpec spec;
  spec.kind = ReducerKind::kDense;
  spec.op = ReducerOp::kWeightedSum;
  spec.in = InType::kF32;
  spec.row_width = width;
  return spec;
}

struct Rows {
  std::vector<std::vector<float>> rows;
  std::vector<const void*> pointers;
  std::vector<int64_t> entries;
  std::vector<double> weights;
  HostBatch View() {
    pointers.clear();
    for (const auto& row : rows) pointers.push_back(row.data());
    return HostBatch{static_cast<int64_t>(rows.size()), nullptr, entries.data(), pointers.data(), weights.data()};
  }
};

Rows MakeRows(int64_t updates, int64_t width) {
  Rows rows;
  for (int64_t u = 0; u < updates; ++u) {
    std::vector<float> row(static_cast<size_t>(width));
    for (int64_t j = 0; j < width; ++j) row[j] = static_cast<float>((u + 1) * (j % 7));
    rows.rows.push_back(std::move(row));
    rows.entries.push_back(width);
    rows.weights.push_back(static_cast<double>(u + 1));
  }
  return rows;
}

std::vector<double> Expected(const Rows& rows, int64_t width) {
  std::vector<double> sums(static_cast<size_t>(width), 0.0);
  for (size_t u = 0; u < rows.rows.size(); ++u) {
    for (int64_t j = 0; j < width; ++j) sums[j] += rows.weights[u] * rows.rows[u][j];
  }
  return sums;
}

StagingRingOptions Slots(size_t slot_bytes) {
  StagingRingOptions options;
  options.slots = 2;
  options.slot_bytes = slot_bytes;
  return options;
}

// The fake device holds every reduction until a thread lets it go, 50 ms later.
void Hold(FakeDeviceReducer* fake) {
  MutexLock lock(&fake->mu);
  fake->held = true;
}
std::thread ReleaseSoon(FakeDeviceReducer* fake) {
  return std::thread([fake] {
    absl::SleepFor(absl::Milliseconds(50));
    MutexLock lock(&fake->mu);
    fake->held = false;
  });
}

// Save, and SaveResult (a report's), wait for the reductions submitted so far.
TEST(RingFieldReducerTest, AccumulateReturnsBeforeTheReductionAndEverySaveWaitsForIt) {
  StagingRing ring(std::make_unique<CpuCopyEngine>(), Slots(1 << 20));
  auto device = std::make_unique<FakeDeviceReducer>(64);
  FakeDeviceReducer* fake = device.get();
  RingFieldReducer<double> reducer(ring, Spec(64), std::move(device));
  Hold(fake);
  Rows rows = MakeRows(5, 64);
  EXPECT_TRUE(reducer.Accumulate(rows.View()).ok());  // returns while the device is held
  rows.rows.clear();  // the caller's buffers may go at once: the batch was copied
  std::thread release = ReleaseSoon(fake);
  HostState<double> state;
  EXPECT_TRUE(reducer.Save(&state).ok());
  release.join();
  std::vector<double> expected = Expected(MakeRows(5, 64), 64);
  EXPECT_EQ(state.values, expected);
  EXPECT_EQ(reducer.HostBytes(), 64 * sizeof(double));

  Hold(fake);
  Rows more = MakeRows(3, 64);
  EXPECT_TRUE(reducer.Accumulate(more.View()).ok());
  release = ReleaseSoon(fake);
  std::vector<double> values(64);
  ResultRequest request;
  request.values = values.data();
  request.count = values.size();
  EXPECT_TRUE(reducer.SaveResult(request).ok());
  release.join();
  const std::vector<double> added = Expected(more, 64);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += added[i];
  EXPECT_EQ(values, expected);
}

// The copies a dense batch costs after it was received: its values once, to the device,
// straight from the updates' buffers; nothing but the weights packed on the host.
TEST(RingFieldReducerTest, DenseValuesGoToTheDeviceStraightFromTheUpdates) {
  StagingRing ring(std::make_unique<CpuCopyEngine>(), Slots(1 << 20));
  RingFieldReducer<double> reducer(ring, Spec(1000), std::make_unique<FakeDeviceReducer>(1000));
  Rows rows = MakeRows(8, 1000);
  ASSERT_TRUE(reducer.Accumulate(rows.View()).ok());
  HostState<double> state;
  ASSERT_TRUE(reducer.Save(&state).ok());
  EXPECT_EQ(state.values, Expected(rows, 1000));
  EXPECT_EQ(ring.bytes_staged(), 8 * 1000 * sizeof(float) + 8 * sizeof(double));
  EXPECT_EQ(ring.bytes_packed(), 8 * sizeof(double));
}

TEST(RingFieldReducerTest, AccumulateDoesNotWaitForEarlierBatchesReductions) {
  StagingRing ring(std::make_unique<CpuCopyEngine>(), Slots(1 << 20));  // two slots
  auto device = std::make_unique<FakeDeviceReducer>(64);
  FakeDeviceReducer* fake = device.get();
  RingFieldReducer<double> reducer(ring, Spec(64), std::move(device));
  Hold(fake);
  Rows first = MakeRows(3, 64), second = MakeRows(4, 64);
  EXPECT_TRUE(reducer.Accumulate(first.View()).ok());
  // The second batch is packed into the other slot while the first one's reduction is
  // held: both calls return before any reduction ran.
  Mutex done_mu;
  bool done = false;
  std::thread accumulate([&] {
    EXPECT_TRUE(reducer.Accumulate(second.View()).ok());
    MutexLock lock(&done_mu);
    done = true;
  });
  bool returned = false;
  {
    MutexLock lock(&done_mu);
    returned = done_mu.AwaitWithTimeout([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done; }, absl::Seconds(30));
  }
  {
    MutexLock lock(&fake->mu);
    EXPECT_TRUE(returned) << "the second Accumulate waited for the first batch's reduction";
    EXPECT_EQ(fake->parts, 0);
    fake->held = false;
  }
  accumulate.join();
  HostState<double> state;
  ASSERT_TRUE(reducer.Save(&state).ok());
  std::vector<double> expected = Expected(first, 64);
  const std::vector<double> more = Expected(second, 64);
  for (size_t j = 0; j < expected.size(); ++j) expected[j] += more[j];
  EXPECT_EQ(state.values, expected);
}

TEST(RingFieldReducerTest, AFailedReductionIsReturnedByEveryLaterCall) {
  StagingRing ring(std::make_unique<CpuCopyEngine>(), Slots(1 << 20));
  auto device = std::make_unique<FakeDeviceReducer>(8);
  FakeDeviceReducer* fake = device.get();
  RingFieldReducer<double> reducer(ring, Spec(8), std::move(device));
  {
    MutexLock lock(&fake->mu);
    fake->fail = true;
  }
  Rows rows = MakeRows(2, 8);
  EXPECT_TRUE(reducer.Accumulate(rows.View()).ok());  // the failure is found later
  HostState<double> state;
  EXPECT_EQ(reducer.Save(&state).code, Outcome::Code::kInternal);  // waits for the reduction
  const Outcome next = reducer.Accumulate(rows.View());
  EXPECT_EQ(next.code, Outcome::Code::kInternal);
  EXPECT_EQ(next.message, "the device fell over (test)");
  EXPECT_EQ(reducer.Load(state).code, Outcome::Code::kInternal);
  std::vector<double> values(8);
  ResultRequest request;
  request.values = values.data();
  request.count = values.size();
  EXPECT_EQ(reducer.SaveResult(request).code, Outcome::Code::kInternal);
  MutexLock lock(&fake->mu);
  EXPECT_EQ(fake->parts, 1) << "nothing was reduced after the failure";
}

TEST(RingFieldReducerTest, ABatchCutIntoPartsSumsAsAWholeOne) {
  constexpr int64_t kWidth = 30000;  // 120 KB rows: slots of 64 KiB cut them by columns
  StagingRing ring(std::make_unique<CpuCopyEngine>(), Slots(64 * 1024));
  auto device = std::make_unique<FakeDeviceReducer>(kWidth);
  FakeDeviceReducer* fake = device.get();
  RingFieldReducer<double> reducer(ring, Spec(kWidth), std::move(device));
  Rows rows = MakeRows(6, kWidth);
  ASSERT_TRUE(reducer.Accumulate(rows.View()).ok());
  HostState<double> state;
  ASSERT_TRUE(reducer.Save(&state).ok());
  EXPECT_EQ(state.values, Expected(rows, kWidth));
  MutexLock lock(&fake->mu);
  EXPECT_GT(fake->parts, 1);
}

}  // namespace
}  // namespace fedagg::portable
