// The cuSPARSE y += Aᵀx wrapper against a host computation, for float32 and float64 with
// 32-bit indices in both modes and 64-bit indices in the transposed product (needs a
// GPU); and CudaSystem's SpMV, through the per-thread multiplier.
#include "cuda/sparse_spmv.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cuda/device_spmv.h"
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

template <typename T>
std::vector<T> Download(const DeviceMemory& memory, size_t size) {
  std::vector<T> values(size);
  EXPECT_EQ(cudaMemcpy(values.data(), memory.get(), size * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return values;
}

// A random [6, 300] CSR batch on the host and the device, its weights, and the expected
// y = start + Aᵀw.
template <typename Index, typename T>
struct Problem {
  static constexpr int64_t kRows = 6, kColumns = 300;
  std::vector<Index> offsets = {0}, indices;
  std::vector<T> values;
  const std::vector<T> weights = {1, 0.5, 2, 1.25, 3, 0.125};
  const std::vector<T> start = std::vector<T>(kColumns, T{1});
  std::vector<double> expected;
  DeviceMemory d_offsets, d_indices, d_values, d_weights;

  Problem() {
    std::mt19937 rng(7);
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t c = 0; c < kColumns; ++c) {
        if (rng() % 5 != 0) continue;
        indices.push_back(static_cast<Index>(c));
        values.push_back(static_cast<T>(static_cast<int>(rng() % 33) - 16) / T{4});
      }
      offsets.push_back(static_cast<Index>(indices.size()));
    }
    expected.assign(start.begin(), start.end());
    for (int64_t r = 0; r < kRows; ++r) {
      for (Index k = offsets[r]; k < offsets[r + 1]; ++k) expected[indices[k]] += weights[r] * values[k];
    }
    d_offsets = Upload(offsets);
    d_indices = Upload(indices);
    d_values = Upload(values);
    d_weights = Upload(weights);
  }
  DeviceCsr<Index, T> Matrix() const {
    return DeviceCsr<Index, T>{kRows, kColumns, static_cast<int64_t>(values.size()),
                               static_cast<const Index*>(d_offsets.get()),
                               static_cast<const Index*>(d_indices.get()), static_cast<const T*>(d_values.get())};
  }
  const T* Weights() const { return static_cast<const T*>(d_weights.get()); }
  void ExpectProduct(const std::vector<T>& got, const char* what) const {
    for (int64_t c = 0; c < kColumns; ++c) {
      EXPECT_NEAR(got[c], expected[c], 1e-5 * std::max(1.0, std::abs(expected[c]))) << "column " << c << " " << what;
    }
  }
};

template <typename T>
class SparseSpmvTest : public ::testing::Test {};
using ValueTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SparseSpmvTest, ValueTypes);

TYPED_TEST(SparseSpmvTest, TransposedProductAddsWeightedUpdatesInBothModes) {
  FEDAGG_SKIP_WITHOUT_GPU();
  const Problem<int32_t, TypeParam> p;
  absl::StatusOr<SparseTransposeMultiplier> multiplier = SparseTransposeMultiplier::Create(nullptr);
  ASSERT_TRUE(multiplier.ok()) << multiplier.status();
  std::vector<TypeParam> deterministic_bits;
  for (bool deterministic : {false, true, true}) {
    DeviceMemory y = Upload(p.start);
    ASSERT_TRUE(multiplier->AccumulateTranspose(p.Matrix(), p.Weights(), static_cast<TypeParam*>(y.get()),
                                                deterministic)
                    .ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<TypeParam> got = Download<TypeParam>(y, p.kColumns);
    p.ExpectProduct(got, deterministic ? "(deterministic)" : "");
    if (!deterministic) continue;
    if (deterministic_bits.empty()) {
      deterministic_bits = got;
    } else {
      EXPECT_EQ(got, deterministic_bits) << "the deterministic path gave different bits";
    }
  }
}

TYPED_TEST(SparseSpmvTest, WideIndicesTakeTheTransposedProductOnly) {
  FEDAGG_SKIP_WITHOUT_GPU();
  const Problem<int64_t, TypeParam> p;
  absl::StatusOr<SparseTransposeMultiplier> multiplier = SparseTransposeMultiplier::Create(nullptr);
  ASSERT_TRUE(multiplier.ok()) << multiplier.status();
  DeviceMemory y = Upload(p.start);
  TypeParam* out = static_cast<TypeParam*>(y.get());
  ASSERT_TRUE(multiplier->AccumulateTranspose(p.Matrix(), p.Weights(), out, /*deterministic=*/false).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  p.ExpectProduct(Download<TypeParam>(y, p.kColumns), "(64-bit indices)");
  EXPECT_EQ(multiplier->AccumulateTranspose(p.Matrix(), p.Weights(), out, /*deterministic=*/true).code(),
            absl::StatusCode::kInvalidArgument);
}

TYPED_TEST(SparseSpmvTest, ReducerSpmvUsesTheThreadsMultiplier) {
  FEDAGG_SKIP_WITHOUT_GPU();
  const Problem<int32_t, TypeParam> p;
  DeviceMemory y = Upload(p.start);
  for (int call = 0; call < 2; ++call) {  // the second call reuses the thread's handle
    const portable::Outcome done =
        SpmvTransposeOnDevice(p.Matrix(), p.Weights(), static_cast<TypeParam*>(y.get()));
    ASSERT_TRUE(done.ok()) << done.message;
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<TypeParam> got = Download<TypeParam>(y, p.kColumns);
  for (int64_t c = 0; c < p.kColumns; ++c) {
    const double twice = 2 * p.expected[c] - p.start[c];
    EXPECT_NEAR(got[c], twice, 1e-5 * std::max(1.0, std::abs(twice))) << "column " << c;
  }
}

}  // namespace
}  // namespace fedagg::cuda
