// CudaDeviceMonitor: one reading per device on a GPU machine; UNAVAILABLE (not a crash,
// not an empty reading) on one without a driver or device.
#include "cuda/cuda_device_monitor.h"

#include <cuda_runtime_api.h>

#include "gtest/gtest.h"
#include "tests/cuda/gpu_test_support.h"

namespace fedagg::cuda {
namespace {

TEST(CudaDeviceMonitorTest, UnavailableWithoutADevice) {
  if (UsableDeviceCount().ok()) GTEST_SKIP() << "this machine has a CUDA device";
  absl::StatusOr<std::vector<DeviceMemoryReading>> readings = CudaDeviceMonitor(std::vector<int>{0}).ReadMemory();
  ASSERT_FALSE(readings.ok());
  EXPECT_EQ(readings.status().code(), absl::StatusCode::kUnavailable) << readings.status();
  EXPECT_FALSE(readings.status().message().empty());
}

TEST(CudaDeviceMonitorTest, ReadsEveryDeviceAndKeepsTheCurrentOne) {
  FEDAGG_SKIP_WITHOUT_GPU();
  const int devices = *UsableDeviceCount();
  std::vector<int> indices;
  for (int d = 0; d < devices; ++d) indices.push_back(d);
  const int current = devices - 1;
  ASSERT_EQ(cudaSetDevice(current), cudaSuccess);
  absl::StatusOr<std::vector<DeviceMemoryReading>> readings = CudaDeviceMonitor(indices).ReadMemory();
  ASSERT_TRUE(readings.ok()) << readings.status();
  ASSERT_EQ(readings->size(), indices.size());
  for (int d = 0; d < devices; ++d) {
    EXPECT_EQ((*readings)[d].device, d);
    EXPECT_GT((*readings)[d].total_bytes, 0u);
    EXPECT_LE((*readings)[d].used_bytes, (*readings)[d].total_bytes);
  }
  int after = -1;
  ASSERT_EQ(cudaGetDevice(&after), cudaSuccess);
  EXPECT_EQ(after, current);
}

TEST(CudaDeviceMonitorTest, AnInvalidDeviceIsAnError) {
  FEDAGG_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::vector<DeviceMemoryReading>> readings =
      CudaDeviceMonitor(std::vector<int>{*UsableDeviceCount()}).ReadMemory();  // one past the last device
  ASSERT_FALSE(readings.ok());
  EXPECT_NE(readings.status().message().find("cudaSetDevice"), std::string::npos) << readings.status();
  // Reported in the Status, and so cleared: the next launch on this thread must not see it.
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

}  // namespace
}  // namespace fedagg::cuda
