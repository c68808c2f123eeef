// The cuSPARSE y += A^T w wrapper against a host computation, in both modes (needs a GPU).
#include "cuda/sparse_spmv.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda/gpu_test_support.h"

namespace fedagg::cuda {
namespace {

// Copies `values` into fresh device memory.
template <typename T>
DeviceMemory Upload(const std::vector<T>& values) {
  absl::StatusOr<DeviceMemory> memory = AllocateDevice(values.size() * sizeof(T) + 1);
  EXPECT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(cudaMemcpy(memory->get(), values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return *std::move(memory);
}

TEST(SparseSpmvTest, TransposedProductAddsWeightedUpdatesInBothModes) {
  FEDAGG_SKIP_WITHOUT_GPU();
  constexpr int32_t kRows = 6, kColumns = 300;
  std::mt19937 rng(7);
  std::vector<int32_t> offsets = {0}, indices;
  std::vector<float> values;
  for (int32_t r = 0; r < kRows; ++r) {
    for (int32_t c = 0; c < kColumns; ++c) {
      if (rng() % 5 != 0) continue;
      indices.push_back(c);
      values.push_back(static_cast<float>(static_cast<int>(rng() % 33) - 16) / 4.0f);
    }
    offsets.push_back(static_cast<int32_t>(indices.size()));
  }
  const std::vector<float> weights = {1, 0.5f, 2, 1.25f, 3, 0.125f};
  const std::vector<float> start(kColumns, 1.0f);
  std::vector<double> expected(start.begin(), start.end());
  for (int32_t r = 0; r < kRows; ++r) {
    for (int32_t k = offsets[r]; k < offsets[r + 1]; ++k) expected[indices[k]] += weights[r] * values[k];
  }
  DeviceMemory d_offsets = Upload(offsets), d_indices = Upload(indices), d_values = Upload(values),
               d_weights = Upload(weights);
  const DeviceCsr a{kRows, kColumns, static_cast<int32_t>(values.size()),
                    static_cast<const int32_t*>(d_offsets.get()), static_cast<const int32_t*>(d_indices.get()),
                    static_cast<const float*>(d_values.get())};
  absl::StatusOr<SparseTransposeMultiplier> multiplier = SparseTransposeMultiplier::Create(nullptr);
  ASSERT_TRUE(multiplier.ok()) << multiplier.status();
  std::vector<float> deterministic_bits;
  for (bool deterministic : {false, true, true}) {
    DeviceMemory y = Upload(start);
    ASSERT_TRUE(multiplier->AccumulateTranspose(a, static_cast<const float*>(d_weights.get()),
                                                static_cast<float*>(y.get()), deterministic)
                    .ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> got(kColumns);
    ASSERT_EQ(cudaMemcpy(got.data(), y.get(), kColumns * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int32_t c = 0; c < kColumns; ++c) {
      EXPECT_NEAR(got[c], expected[c], 1e-5 * std::max(1.0, std::abs(expected[c])))
          << "column " << c << (deterministic ? " (deterministic)" : "");
    }
    if (!deterministic) continue;
    if (deterministic_bits.empty()) {
      deterministic_bits = got;
    } else {
      EXPECT_EQ(got, deterministic_bits) << "the deterministic path gave different bits";
    }
  }
}

}  // namespace
}  // namespace fedagg::cuda
