// DeviceGroup: NCCL sum across the GPUs of one node into the first device, for each
// element type of fedagg's accumulators (needs GPUs; the argument checks run everywhere).
#include "cuda/device_group.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda/gpu_test_support.h"

namespace fedagg::cuda {
namespace {

TEST(DeviceGroupTest, NeedsAtLeastOneDevice) {
  EXPECT_EQ(DeviceGroup::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
}

// Fills `count` values of T on device `device` with `value`; returns the buffer.
template <typename T>
DeviceMemory Filled(int device, size_t count, T value) {
  EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
  absl::StatusOr<DeviceMemory> memory = AllocateDevice(count * sizeof(T));
  EXPECT_TRUE(memory.ok()) << memory.status();
  const std::vector<T> host(count, value);
  EXPECT_EQ(cudaMemcpy(memory->get(), host.data(), count * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return *std::move(memory);
}

template <typename T>
std::vector<T> Read(int device, const DeviceMemory& memory, size_t count) {
  std::vector<T> host(count);
  EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), memory.get(), count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

TEST(DeviceGroupTest, OneDeviceIsLeftAlone) {
  FEDAGG_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<DeviceGroup>> group = DeviceGroup::Create({0});
  ASSERT_TRUE(group.ok()) << group.status();
  DeviceMemory buffer = Filled(0, 100, 2.5f);
  float* buffers[] = {static_cast<float*>(buffer.get())};
  const cudaStream_t streams[] = {nullptr};
  ASSERT_TRUE((*group)->SumIntoFirst<float>(buffers, 100, streams).ok());
  EXPECT_EQ(Read<float>(0, buffer, 100), std::vector<float>(100, 2.5f));
  EXPECT_EQ((*group)->SumIntoFirst<float>(buffers, 100, {}).code(), absl::StatusCode::kInvalidArgument);
}

template <typename T>
class DeviceGroupSumTest : public ::testing::Test {};
using AccumulatorTypes = ::testing::Types<float, double, int64_t>;
TYPED_TEST_SUITE(DeviceGroupSumTest, AccumulatorTypes);

// Every device, in the order named with the highest id first, summed into the first named.
TYPED_TEST(DeviceGroupSumTest, SumsEveryDeviceIntoTheFirst) {
  FEDAGG_SKIP_WITHOUT_GPU();
  const int count = *UsableDeviceCount();
  if (count < 2) GTEST_SKIP() << "needs two or more CUDA devices, found " << count;
  std::vector<int> devices(static_cast<size_t>(count));
  std::iota(devices.rbegin(), devices.rend(), 0);
  absl::StatusOr<std::unique_ptr<DeviceGroup>> group = DeviceGroup::Create(devices);
  ASSERT_TRUE(group.ok()) << group.status();
  constexpr size_t kCount = 1 << 16;
  std::vector<DeviceMemory> memory;
  std::vector<TypeParam*> buffers;
  std::vector<cudaStream_t> streams(devices.size(), nullptr);
  TypeParam expected = 0;
  for (size_t d = 0; d < devices.size(); ++d) {
    memory.push_back(Filled(devices[d], kCount, static_cast<TypeParam>(d + 1)));
    buffers.push_back(static_cast<TypeParam*>(memory.back().get()));
    expected += static_cast<TypeParam>(d + 1);
  }
  ASSERT_TRUE((*group)->template SumIntoFirst<TypeParam>(buffers, kCount, streams).ok());
  for (int device : devices) {
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  EXPECT_EQ(Read<TypeParam>(devices[0], memory[0], kCount), std::vector<TypeParam>(kCount, expected));
  EXPECT_EQ(Read<TypeParam>(devices[1], memory[1], kCount), std::vector<TypeParam>(kCount, TypeParam{2}))
      << "a non-root buffer changed";
}

}  // namespace
}  // namespace fedagg::cuda
