// The dense batched-sum kernel against a host computation (needs a GPU).
#include "cuda/dense_sum_kernel.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda/gpu_test_support.h"

namespace fedagg::cuda {
namespace {

TEST(DenseSumKernelTest, WeightedColumnSumsMatchHost) {
  FEDAGG_SKIP_WITHOUT_GPU();
  constexpr int64_t kRows = 5, kColumns = 1000;
  std::vector<float> batch(kRows * kColumns), weights = {1, 2, 0.5f, 3, 1};
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<float>(i % 17) - 8.0f;
  std::vector<float> expected(kColumns, 1.0f);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < kColumns; ++j) expected[j] += weights[r] * batch[r * kColumns + j];

  float *d_acc = nullptr, *d_batch = nullptr, *d_weights = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_acc), kColumns * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_batch), batch.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_weights), weights.size() * sizeof(float)), cudaSuccess);
  std::vector<float> ones(kColumns, 1.0f);
  cudaMemcpy(d_acc, ones.data(), kColumns * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(d_batch, batch.data(), batch.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(d_weights, weights.data(), weights.size() * sizeof(float), cudaMemcpyHostToDevice);
  ASSERT_TRUE(LaunchDenseSum(d_acc, d_batch, d_weights, kRows, kColumns, nullptr).ok());
  std::vector<float> got(kColumns);
  ASSERT_EQ(cudaMemcpy(got.data(), d_acc, kColumns * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(d_acc);
  cudaFree(d_batch);
  cudaFree(d_weights);
  for (int64_t j = 0; j < kColumns; ++j) EXPECT_FLOAT_EQ(got[j], expected[j]) << "column " << j;
}

// A failed runtime call leaves its error in the thread's last-error slot; the launch after
// it must report only its own (on a GPU, this failed when the test ran right after
// CudaDeviceMonitorTest.AnInvalidDeviceIsAnError).
TEST(DenseSumKernelTest, AnEarlierCallsErrorDoesNotFailTheLaunch) {
  FEDAGG_SKIP_WITHOUT_GPU();
  ASSERT_NE(cudaSetDevice(*UsableDeviceCount()), cudaSuccess);  // one past the last device
  ASSERT_NE(cudaPeekAtLastError(), cudaSuccess);
  float* d_data = nullptr;  // the accumulator, then the batch of one row
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_data), 2 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const absl::Status launched = LaunchDenseSum(d_data, d_data + 1, nullptr, 1, 1, nullptr);
  EXPECT_TRUE(launched.ok()) << launched;
  cudaFree(d_data);
}

}  // namespace
}  // namespace fedagg::cuda
