// Secure aggregation's masks expanded on a CUDA device equal the CPU's (needs a GPU).
#include "cuda/device_masks.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda/gpu_test_support.h"

namespace fedagg::cuda {
namespace {

TEST(DeviceMasksTest, GiveTheCpuMasksBitForBit) {
  FEDAGG_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(9);
  std::vector<SignedMaskSeed> seeds(33);
  for (size_t s = 0; s < seeds.size(); ++s) {
    for (uint8_t& b : seeds[s].seed.bytes) b = static_cast<uint8_t>(rng());
    seeds[s].sign = s % 2 == 0 ? +1 : -1;
  }
  std::vector<uint32_t> start((size_t{1} << 20) + 7);
  for (uint32_t& value : start) value = static_cast<uint32_t>(rng());
  std::vector<uint32_t> cpu = start, device = start;
  MaskAccumulator().Add(seeds, 2, absl::MakeSpan(cpu));
  ASSERT_TRUE(AddMasksOnDevice(0, seeds, 2, absl::MakeSpan(device)).ok());
  EXPECT_EQ(device, cpu);
}

}  // namespace
}  // namespace fedagg::cuda
