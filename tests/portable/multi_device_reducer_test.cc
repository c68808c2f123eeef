// MultiDeviceReducer's orchestration over fake per-device reducers (a float64 sum in host
// memory that records which device took which batch and fails where told): routing in
// turn, the merge at Save through the host merger, Merge and Load, and one device failing.
#include "portable/multi_device_reducer.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "portable/host_device_merger.h"

namespace fedagg::portable {
namespace {

constexpr int64_t kWidth = 3;

// What the fakes of one test share: the devices that took each batch, and the failures.
struct Devices {
  std::vector<int> took;            // device of each batch accumulated, in order
  std::vector<Outcome::Code> fail_accumulate;  // per device
  std::vector<Outcome::Code> fail_save;        // per device
};

class FakeReducer final : public FieldReducer<double> {
 public:
  FakeReducer(int device, Devices* devices) : device_(device), devices_(devices) {}

  Outcome Accumulate(const HostBatch& batch) override {
    if (const Outcome::Code code = devices_->fail_accumulate[device_]; code != Outcome::Code::kOk) {
      return Outcome{code, "device " + std::to_string(device_) + " failed"};
    }
    devices_->took.push_back(device_);
    for (int64_t u = 0; u < batch.updates; ++u) {
      for (int64_t j = 0; j < kWidth; ++j) sum_[j] += static_cast<const double*>(batch.values[u])[j];
    }
    return Outcome{};
  }
  Outcome Merge(const FieldReducer<double>& other) override {
    for (int64_t j = 0; j < kWidth; ++j) sum_[j] += static_cast<const FakeReducer&>(other).sum_[j];
    return Outcome{};
  }
  Outcome Save(HostState<double>* out) const override {
    if (const Outcome::Code code = devices_->fail_save[device_]; code != Outcome::Code::kOk) {
      return Outcome{code, "saving device " + std::to_string(device_) + " failed"};
    }
    out->values = sum_;
    return Outcome{};
  }
  // The values as they are (the fake divides nothing).
  Outcome SaveResult(const ResultRequest& request) const override {
    HostState<double> state;
    if (Outcome saved = Save(&state); !saved.ok()) return saved;
    if (request.count != state.values.size()) return Outcome{Outcome::Code::kInternal, "another count"};
    std::copy(state.values.begin(), state.values.end(), static_cast<double*>(request.values));
    return Outcome{};
  }
  Outcome Load(const HostState<double>& in) override {
    sum_ = in.values;
    return Outcome{};
  }
  uint64_t HostBytes() const override { return 100 + static_cast<uint64_t>(device_); }

 private:
  const int device_;
  Devices* const devices_;
  std::vector<double> sum_ = std::vector<double>(kWidth, 0.0);
};

class MultiDeviceReducerTest : public ::testing::Test {
 protected:
  // A reducer over `count` fake devices, merged through the host.
  std::unique_ptr<FieldReducer<double>> Make(int count) {
    devices_.fail_accumulate.resize(static_cast<size_t>(count), Outcome::Code::kOk);
    devices_.fail_save.resize(static_cast<size_t>(count), Outcome::Code::kOk);
    std::vector<ReducerMaker<double>> makers;
    for (int d = 0; d < count; ++d) {
      makers.push_back([d, this](const ReducerSpec&) { return std::make_unique<FakeReducer>(d, &devices_); });
    }
    auto merger = std::make_shared<HostDeviceMerger<double>>(makers[0]);
    return MultiDeviceMaker<double>(makers, merger)(spec_);
  }

  // One batch of one update whose values are all `value`.
  static Outcome Add(FieldReducer<double>& reducer, double value) {
    const std::vector<double> values(kWidth, value);
    const void* data[] = {values.data()};
    const double weights[] = {1.0};
    const int64_t entries[] = {kWidth};
    return reducer.Accumulate(HostBatch{1, nullptr, entries, data, weights});
  }

  static std::vector<double> Saved(const FieldReducer<double>& reducer) {
    HostState<double> state;
    const Outcome saved = reducer.Save(&state);
    EXPECT_TRUE(saved.ok()) << saved.message;
    return state.values;
  }

  static std::vector<double> All(double value) { return std::vector<double>(kWidth, value); }

  ReducerSpec spec_{ReducerKind::kDense, ReducerOp::kSum, InType::kF64, 1, kWidth};
  Devices devices_;
};

TEST_F(MultiDeviceReducerTest, OneDeviceIsThatDevicesReducerWithNoWrapper) {
  const std::unique_ptr<FieldReducer<double>> reducer = Make(1);
  EXPECT_NE(dynamic_cast<FakeReducer*>(reducer.get()), nullptr);
}

TEST_F(MultiDeviceReducerTest, BatchesGoToTheDevicesInTurn) {
  const std::unique_ptr<FieldReducer<double>> reducer = Make(3);
  for (int b = 0; b < 5; ++b) ASSERT_TRUE(Add(*reducer, 1.0).ok());
  EXPECT_EQ(devices_.took, (std::vector<int>{0, 1, 2, 0, 1}));
}

TEST_F(MultiDeviceReducerTest, SaveCountsEveryDeviceOnceHoweverOftenItRuns) {
  const std::unique_ptr<FieldReducer<double>> reducer = Make(3);
  for (double value : {1.0, 2.0, 4.0, 8.0}) ASSERT_TRUE(Add(*reducer, value).ok());
  EXPECT_EQ(Saved(*reducer), All(15.0));
  EXPECT_EQ(Saved(*reducer), All(15.0)) << "a second Save counted a device twice";
  ASSERT_TRUE(Add(*reducer, 16.0).ok());
  ASSERT_TRUE(Add(*reducer, 32.0).ok());
  EXPECT_EQ(Saved(*reducer), All(63.0));
}

// A report's result gathers the devices as Save does, once.
TEST_F(MultiDeviceReducerTest, SaveResultCountsEveryDeviceOnce) {
  const std::unique_ptr<FieldReducer<double>> reducer = Make(3);
  for (double value : {1.0, 2.0, 4.0, 8.0}) ASSERT_TRUE(Add(*reducer, value).ok());
  std::vector<double> values(kWidth, -1.0);
  ResultRequest request;
  request.values = values.data();
  request.count = values.size();
  ASSERT_TRUE(reducer->SaveResult(request).ok());
  EXPECT_EQ(values, All(15.0));
  EXPECT_EQ(Saved(*reducer), All(15.0)) << "SaveResult counted a device twice";
  devices_.fail_save[0] = Outcome::Code::kInternal;
  EXPECT_EQ(reducer->SaveResult(request).code, Outcome::Code::kInternal);
  devices_.fail_save[0] = Outcome::Code::kOk;
  EXPECT_EQ(reducer->SaveResult(request).code, Outcome::Code::kInternal) << "a failed reducer went on";
}

TEST_F(MultiDeviceReducerTest, LoadReplacesEveryDevicesStateThenAccumulates) {
  const std::unique_ptr<FieldReducer<double>> reducer = Make(2);
  for (double value : {1.0, 2.0}) ASSERT_TRUE(Add(*reducer, value).ok());  // one on each device
  HostState<double> loaded;
  loaded.values = All(100.0);
  ASSERT_TRUE(reducer->Load(loaded).ok());
  EXPECT_EQ(Saved(*reducer), All(100.0)) << "a device kept its state through Load";
  for (double value : {1.0, 2.0, 4.0}) ASSERT_TRUE(Add(*reducer, value).ok());
  EXPECT_EQ(Saved(*reducer), All(107.0));
}

TEST_F(MultiDeviceReducerTest, MergeAddsDeviceByDevice) {
  const std::unique_ptr<FieldReducer<double>> mine = Make(2);
  const std::unique_ptr<FieldReducer<double>> theirs = Make(2);
  for (double value : {1.0, 2.0, 4.0}) ASSERT_TRUE(Add(*mine, value).ok());
  for (double value : {8.0, 16.0}) ASSERT_TRUE(Add(*theirs, value).ok());
  ASSERT_TRUE(mine->Merge(*theirs).ok());
  EXPECT_EQ(Saved(*mine), All(31.0));
  EXPECT_EQ(Saved(*theirs), All(24.0)) << "Merge changed the merged-in reducer";
}

TEST_F(MultiDeviceReducerTest, MergingAnotherDeviceSetIsRefused) {
  const std::unique_ptr<FieldReducer<double>> two = Make(2);
  const std::unique_ptr<FieldReducer<double>> three = Make(3);
  const Outcome merged = two->Merge(*three);
  EXPECT_EQ(merged.code, Outcome::Code::kInternal);
  EXPECT_EQ(two->Merge(*two).code, Outcome::Code::kInternal) << "a failed reducer went on";
}

TEST_F(MultiDeviceReducerTest, AFailingDeviceIsReturnedAndNothingIsSavedAfterIt) {
  const std::unique_ptr<FieldReducer<double>> reducer = Make(3);
  ASSERT_TRUE(Add(*reducer, 1.0).ok());
  devices_.fail_accumulate[1] = Outcome::Code::kResourceExhausted;
  const Outcome failed = Add(*reducer, 2.0);
  EXPECT_EQ(failed.code, Outcome::Code::kResourceExhausted);
  EXPECT_EQ(failed.message, "device 1 failed");
  devices_.fail_accumulate[1] = Outcome::Code::kOk;  // the device recovers: too late
  EXPECT_EQ(Add(*reducer, 4.0).code, Outcome::Code::kResourceExhausted);
  HostState<double> state;
  const Outcome saved = reducer->Save(&state);
  EXPECT_EQ(saved.code, Outcome::Code::kResourceExhausted) << "a partial sum was saved as OK";
  EXPECT_EQ(saved.message, "device 1 failed");
  EXPECT_EQ(reducer->Load(state).code, Outcome::Code::kResourceExhausted);
}

// An index outside the field is found on the device, maybe after part of the batch was
// added: like any other failure, it breaks the reducer.
TEST_F(MultiDeviceReducerTest, AnIndexOutsideTheFieldFailsEveryLaterCall) {
  const std::unique_ptr<FieldReducer<double>> reducer = Make(2);
  ASSERT_TRUE(Add(*reducer, 1.0).ok());
  devices_.fail_accumulate[1] = Outcome::Code::kInvalidArgument;
  EXPECT_EQ(Add(*reducer, 2.0).code, Outcome::Code::kInvalidArgument);
  devices_.fail_accumulate[1] = Outcome::Code::kOk;
  EXPECT_EQ(Add(*reducer, 4.0).code, Outcome::Code::kInvalidArgument);
  HostState<double> state;
  EXPECT_EQ(reducer->Save(&state).code, Outcome::Code::kInvalidArgument) << "a partial sum was saved as OK";
}

TEST_F(MultiDeviceReducerTest, ADeviceFailingTheMergeFailsEverySave) {
  const std::unique_ptr<FieldReducer<double>> reducer = Make(3);
  for (double value : {1.0, 2.0, 4.0}) ASSERT_TRUE(Add(*reducer, value).ok());
  devices_.fail_save[2] = Outcome::Code::kInternal;
  HostState<double> state;
  const Outcome saved = reducer->Save(&state);
  EXPECT_EQ(saved.code, Outcome::Code::kInternal);
  EXPECT_EQ(saved.message, "saving device 2 failed");
  devices_.fail_save[2] = Outcome::Code::kOk;
  // Device 1 may already be in device 0: a later Save must not report that as the sum.
  EXPECT_EQ(reducer->Save(&state).code, Outcome::Code::kInternal);
  EXPECT_EQ(Add(*reducer, 8.0).code, Outcome::Code::kInternal);
}

TEST_F(MultiDeviceReducerTest, HostBytesAddsTheDevices) {
  EXPECT_EQ(Make(3)->HostBytes(), 100u + 101u + 102u);
}

}  // namespace
}  // namespace fedagg::portable
