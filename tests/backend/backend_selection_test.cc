// How the service picks and survives a backend: ChooseBackend for every --backend value
// and --devices on whatever machine runs the test (with or without CUDA, with or without a
// device), and
// an aggregation whose backend runs out of device memory ends FAILED with the reason
// while nothing crashes.
#include <dlfcn.h>

#include <cstring>
#include <memory>
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "service/backend/backend_choice.h"
#include "service/backend/backend_plugin_loader.h"
#include "service/core/cpu_accumulator_factory.h"
#include "service/rounds/aggregation.h"
#include "tests/backend/failing_backend.h"

namespace fedagg {
namespace {

TEST(BackendChoiceTest, CpuIsAlwaysThere) {
  absl::StatusOr<BackendChoice> cpu = ChooseBackend("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->backend->name(), "cpu");
  EXPECT_EQ(BuiltBackends().front(), "cpu");
}

TEST(BackendChoiceTest, UnknownNameListsTheChoices) {
  absl::StatusOr<BackendChoice> bogus = ChooseBackend("tpu");
  EXPECT_EQ(bogus.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bogus.status().message(), "cpu")) << bogus.status();
  EXPECT_TRUE(absl::StrContains(bogus.status().message(), "'tpu'")) << bogus.status();
}

TEST(BackendChoiceTest, AutoPicksCudaExactlyWhenCudaIsAvailable) {
  absl::StatusOr<BackendChoice> cuda = ChooseBackend("cuda");
  absl::StatusOr<BackendChoice> automatic = ChooseBackend("auto");
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  if (cuda.ok()) {
    EXPECT_EQ(cuda->backend->name(), "cuda");
    EXPECT_EQ(automatic->backend->name(), "cuda");
    EXPECT_TRUE(absl::StrContains(automatic->reason, "found a CUDA device")) << automatic->reason;
    return;
  }
  // Refused with a reason a person can act on: no CUDA in the build, or no device here.
  EXPECT_TRUE(cuda.status().code() == absl::StatusCode::kUnavailable ||
              cuda.status().code() == absl::StatusCode::kFailedPrecondition)
      << cuda.status();
  EXPECT_TRUE(absl::StrContains(cuda.status().message(), "--backend=cpu")) << cuda.status();
  EXPECT_EQ(automatic->backend->name(), "cpu");
  EXPECT_TRUE(absl::StrContains(automatic->reason, "no CUDA")) << automatic->reason;
}

TEST(DeviceSelectionTest, AllOrDistinctIds) {
  absl::StatusOr<DeviceSelection> all = ParseDeviceSelection("all");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_FALSE(all->has_value());
  EXPECT_EQ(DeviceSelectionName(*all), "all");
  absl::StatusOr<DeviceSelection> two = ParseDeviceSelection("2,0");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->value(), (std::vector<int>{2, 0}));
  EXPECT_EQ(DeviceSelectionName(*two), "2,0");
  for (const char* bad : {"", "x", "-1", "0,,1", "1,1", "ALL", "0;1"}) {
    EXPECT_EQ(ParseDeviceSelection(bad).status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
  EXPECT_TRUE(absl::StrContains(ParseDeviceSelection("1,1").status().message(), "twice"));
}

TEST(BackendChoiceTest, CpuHasNoDevicesToName) {
  absl::StatusOr<BackendChoice> cpu = ChooseBackend("cpu", BackendOptions{.devices = std::vector<int>{0, 1}});
  EXPECT_EQ(cpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(cpu.status().message(), "--devices=0,1")) << cpu.status();
}

TEST(BackendChoiceTest, ThrustOmpSimulatesAsManyDevicesAsNamed) {
  const std::vector<std::string> built = BuiltBackends();
  if (std::find(built.begin(), built.end(), "thrust-omp") == built.end()) {
    GTEST_SKIP() << "this build has no thrust-omp backend";
  }
  absl::StatusOr<BackendChoice> one = ChooseBackend("thrust-omp");
  absl::StatusOr<BackendChoice> three = ChooseBackend("thrust-omp", BackendOptions{.devices = std::vector<int>{0, 1, 2}});
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_NE(one->backend, three->backend);
  EXPECT_EQ(three->backend->name(), "thrust-omp");
  EXPECT_TRUE(absl::StrContains(three->reason, "3 simulated devices")) << three->reason;
  EXPECT_EQ(ChooseBackend("thrust-omp", BackendOptions{.devices = std::vector<int>{4, 5, 6}})->backend, three->backend);
}

// Devices that are not there are refused, and naming devices never falls back to the CPU.
TEST(BackendChoiceTest, CudaDevicesMustExist) {
  absl::StatusOr<BackendChoice> missing = ChooseBackend("cuda", BackendOptions{.devices = std::vector<int>{0, 999}});
  EXPECT_FALSE(missing.ok());
  if (ChooseBackend("cuda").ok()) {
    EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument) << missing.status();
    EXPECT_TRUE(absl::StrContains(missing.status().message(), "999")) << missing.status();
  }
  absl::StatusOr<BackendChoice> automatic = ChooseBackend("auto", BackendOptions{.devices = std::vector<int>{0}});
  if (!ChooseBackend("cuda").ok()) {
    EXPECT_FALSE(automatic.ok()) << "auto fell back to " << automatic->reason;
    EXPECT_TRUE(absl::StrContains(automatic.status().message(), "--devices=all")) << automatic.status();
  }
}

#ifdef FEDAGG_TEST_CUDA_PLUGIN
// The cuda plugin of this build loads, and answers for the devices of whatever machine runs
// the test: the backend where there is a device, UNAVAILABLE with the runtime's reason where
// there is none.
TEST(BackendPluginTest, TheBuildsCudaPluginLoadsAndAnswersForTheDevices) {
  absl::StatusOr<const BackendPlugin*> plugin = LoadBackendPlugin(FEDAGG_TEST_CUDA_PLUGIN);
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  EXPECT_EQ((*plugin)->version, kBackendPluginVersion);
  absl::StatusOr<BackendChoice> cuda = ChooseBackend("cuda", BackendOptions{.cuda_plugin = FEDAGG_TEST_CUDA_PLUGIN});
  if (cuda.ok()) {
    EXPECT_EQ(cuda->backend->name(), "cuda");
    return;
  }
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kUnavailable) << cuda.status();
  EXPECT_TRUE(absl::StrContains(cuda.status().message(), "no usable CUDA device")) << cuda.status();
}
#endif

// A plugin that is not there, or a library that is not a plugin, is refused naming it; auto
// then falls back to cpu saying why, and never with devices named.
TEST(BackendPluginTest, AMissingOrForeignPluginIsNamed) {
  absl::StatusOr<BackendChoice> missing = ChooseBackend("cuda", BackendOptions{.cuda_plugin = "/nonexistent/plugin.so"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "no cuda backend plugin at /nonexistent/plugin.so"))
      << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "--backend=cpu")) << missing.status();

  Dl_info libc;
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&strlen), &libc), 0);
  absl::StatusOr<const BackendPlugin*> foreign = LoadBackendPlugin(libc.dli_fname);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition) << foreign.status();
  EXPECT_TRUE(absl::StrContains(foreign.status().message(), "is not a fedagg backend plugin")) << foreign.status();

  absl::StatusOr<BackendChoice> automatic = ChooseBackend("auto", BackendOptions{.cuda_plugin = libc.dli_fname});
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ(automatic->backend->name(), "cpu");
  EXPECT_TRUE(absl::StrContains(automatic->reason, "no CUDA device to use")) << automatic->reason;
}

UpdateBuffer DenseUpdate(const ReductionSpec& spec, float value) {
  absl::StatusOr<UpdateBuffer> buffer = UpdateBuffer::Create(spec, {0}, std::nullopt, 1 << 20);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  absl::Span<std::byte> bytes = buffer->section(0, UpdateBuffer::Section::kValues);
  for (size_t i = 0; i < bytes.size() / sizeof(float); ++i) {
    std::memcpy(bytes.data() + i * sizeof(float), &value, sizeof(float));
  }
  return *std::move(buffer);
}

TEST(BackendFailureTest, OutOfDeviceMemoryFailsTheAggregationWithTheReason) {
  const testing::FailingBackend backend({.reduce = true});  // every batch out of device memory
  AggregationConfig config;
  config.id = "round-1";
  config.reduction = *ReductionSpec::Create(ValueType::Tensor(DType::kFloat32, {4}),
                                            {{Intrinsic::kFederatedSum, false}});
  AggregationOptions options;
  options.batching.batch_size = 1;  // every commit closes a batch
  options.backend = &backend;
  Aggregation aggregation(config, options);
  for (const char* client : {"alice", "bob"}) {
    ASSERT_TRUE(aggregation.BeginUpdate(client).ok());
    // The update is counted (it was valid); the reduction failing is the backend's fault.
    EXPECT_TRUE(aggregation.CommitUpdate(client, DenseUpdate(*config.reduction, 1.0f)).ok());
  }
  ASSERT_TRUE(aggregation.Seal().ok());
  const v1::AggregationStatus status = aggregation.Status();
  EXPECT_EQ(status.state(), v1::FAILED);
  EXPECT_TRUE(absl::StrContains(status.detail(), "RESOURCE_EXHAUSTED")) << status.detail();
  EXPECT_TRUE(absl::StrContains(status.detail(), "failing backend")) << status.detail();
  EXPECT_FALSE(aggregation.Result().ok());
}

}  // namespace
}  // namespace fedagg
