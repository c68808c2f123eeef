// The portable mask expansion (the code a GPU runs) on Thrust's OpenMP system gives the
// very words of the CPU's MaskAccumulator (OpenSSL's ChaCha20), for every sign, field and
// length, ragged last block included.
#include "portable/omp_mask_accumulator.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace fedagg {
namespace {

TEST(OmpMaskAccumulatorTest, GivesTheCpuMasksBitForBit) {
  std::mt19937_64 rng(5);
  std::vector<SignedMaskSeed> seeds(7);
  for (size_t s = 0; s < seeds.size(); ++s) {
    for (uint8_t& b : seeds[s].seed.bytes) b = static_cast<uint8_t>(rng());
    seeds[s].sign = s % 3 == 1 ? -1 : +1;
  }
  for (size_t coordinates : {size_t{1}, size_t{15}, size_t{16}, size_t{1000}, MaskAccumulator::kChunkWords + 9}) {
    for (uint32_t field : {0u, 4u}) {
      std::vector<uint32_t> start(coordinates);
      for (uint32_t& value : start) value = static_cast<uint32_t>(rng());
      std::vector<uint32_t> cpu = start, portable = start;
      MaskAccumulator().Add(seeds, field, absl::MakeSpan(cpu));
      ASSERT_TRUE(AddMasksOnThrustOmp(seeds, field, absl::MakeSpan(portable)).ok());
      EXPECT_EQ(portable, cpu) << coordinates << " coordinates, field " << field;
      EXPECT_NE(portable, start);
    }
  }
}

}  // namespace
}  // namespace fedagg
