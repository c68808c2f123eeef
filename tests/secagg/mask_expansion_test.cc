// MaskAccumulator: the mask of a seed is ChaCha20's keystream word by word (the portable
// block function gives the same words), signs cancel, and the result does not depend on
// the threads it is spread over.
#include "service/secagg/mask_expansion.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "portable/chacha20_block.h"

namespace fedagg {
namespace {

MaskSeed RandomSeed(std::mt19937_64& rng) {
  MaskSeed seed;
  for (uint8_t& b : seed.bytes) b = static_cast<uint8_t>(rng());
  return seed;
}

TEST(MaskExpansionTest, EachWordIsTheChaCha20KeystreamWordOfItsCoordinate) {
  std::mt19937_64 rng(1);
  const MaskSeed seed = RandomSeed(rng);
  const size_t n = MaskAccumulator::kChunkWords * 2 + 37;  // several chunks and a ragged end
  std::vector<uint32_t> mask(n, 0);
  MaskAccumulator().Add({{seed, +1}}, /*field=*/3, absl::MakeSpan(mask));
  ChaCha20Key key;
  std::memcpy(key.words, seed.bytes.data(), 32);
  const uint32_t nonce[3] = {3, 0, 0};
  for (size_t i : {size_t{0}, size_t{15}, size_t{16}, MaskAccumulator::kChunkWords - 1, MaskAccumulator::kChunkWords,
                   n - 1}) {
    uint32_t block[16];
    ChaCha20Block(key, static_cast<uint32_t>(i / 16), nonce, block);
    EXPECT_EQ(mask[i], block[i % 16]) << "coordinate " << i;
  }
}

TEST(MaskExpansionTest, FieldsHaveDifferentMasksAndSignsCancel) {
  std::mt19937_64 rng(2);
  const MaskSeed a = RandomSeed(rng), b = RandomSeed(rng);
  std::vector<uint32_t> field0(1000, 5), field1(1000, 5);
  MaskAccumulator().Add({{a, +1}, {b, -1}}, 0, absl::MakeSpan(field0));
  MaskAccumulator().Add({{a, +1}, {b, -1}}, 1, absl::MakeSpan(field1));
  EXPECT_NE(field0, field1);
  MaskAccumulator().Add({{b, +1}, {a, -1}}, 0, absl::MakeSpan(field0));
  EXPECT_EQ(field0, std::vector<uint32_t>(1000, 5));
}

TEST(MaskExpansionTest, ThreadsDoNotChangeTheSum) {
  std::mt19937_64 rng(3);
  std::vector<SignedMaskSeed> seeds;
  for (int s = 0; s < 9; ++s) seeds.push_back({RandomSeed(rng), s % 3 == 0 ? -1 : +1});
  const size_t n = MaskAccumulator::kChunkWords * 5 + 3;
  std::vector<uint32_t> alone(n, 1), spread(n, 1);
  MaskAccumulator().Add(seeds, 0, absl::MakeSpan(alone));
  ThreadPool pool(4);
  MaskAccumulator(&pool).Add(seeds, 0, absl::MakeSpan(spread));
  EXPECT_EQ(alone, spread);
}

}  // namespace
}  // namespace fedagg
