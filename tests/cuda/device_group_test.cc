// DeviceGroup: NCCL sum across the GPUs of one node into device 0 (needs GPUs; the
// argument checks run everywhere).
#include "cuda/device_group.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda/gpu_test_support.h"

namespace fedagg::cuda {
namespace {

TEST(DeviceGroupTest, NeedsAtLeastOneDevice) {
  EXPECT_EQ(DeviceGroup::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
}

// Fills `count` floats on device `device` with `value`; returns the buffer.
DeviceMemory Filled(int device, size_t count, float value) {
  EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
  absl::StatusOr<DeviceMemory> memory = AllocateDevice(count * sizeof(float));
  EXPECT_TRUE(memory.ok()) << memory.status();
  const std::vector<float> host(count, value);
  EXPECT_EQ(cudaMemcpy(memory->get(), host.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  return *std::move(memory);
}

std::vector<float> Read(int device, const DeviceMemory& memory, size_t count) {
  std::vector<float> host(count);
  EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), memory.get(), count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

TEST(DeviceGroupTest, OneDeviceIsLeftAlone) {
  FEDAGG_SKIP_WITHOUT_GPU();
  absl::StatusOr<DeviceGroup> group = DeviceGroup::Create(1);
  ASSERT_TRUE(group.ok()) << group.status();
  DeviceMemory buffer = Filled(0, 100, 2.5f);
  float* buffers[] = {static_cast<float*>(buffer.get())};
  const cudaStream_t streams[] = {nullptr};
  ASSERT_TRUE(group->SumIntoFirst(buffers, 100, streams).ok());
  EXPECT_EQ(Read(0, buffer, 100), std::vector<float>(100, 2.5f));
  EXPECT_EQ(group->SumIntoFirst(buffers, 100, {}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceGroupTest, SumsEveryDeviceIntoTheFirst) {
  FEDAGG_SKIP_WITHOUT_GPU();
  const int devices = *UsableDeviceCount();
  if (devices < 2) GTEST_SKIP() << "needs two or more CUDA devices, found " << devices;
  absl::StatusOr<DeviceGroup> group = DeviceGroup::Create(devices);
  ASSERT_TRUE(group.ok()) << group.status();
  constexpr size_t kCount = 1 << 16;
  std::vector<DeviceMemory> memory;
  std::vector<float*> buffers;
  std::vector<cudaStream_t> streams(static_cast<size_t>(devices), nullptr);
  float expected = 0;
  for (int d = 0; d < devices; ++d) {
    memory.push_back(Filled(d, kCount, static_cast<float>(d + 1)));
    buffers.push_back(static_cast<float*>(memory.back().get()));
    expected += static_cast<float>(d + 1);
  }
  ASSERT_TRUE(group->SumIntoFirst(buffers, kCount, streams).ok());
  for (int d = 0; d < devices; ++d) {
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  EXPECT_EQ(Read(0, memory[0], kCount), std::vector<float>(kCount, expected));
  EXPECT_EQ(Read(1, memory[1], kCount), std::vector<float>(kCount, 2.0f)) << "a non-root buffer changed";
}

}  // namespace
}  // namespace fedagg::cuda
