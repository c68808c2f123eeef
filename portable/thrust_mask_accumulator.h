// Secure aggregation's mask expansion on a Thrust system: the masks of many seeds added
// into one vector of 32-bit words, each ChaCha20 block (16 coordinates) one work item that
// runs every seed's block function (portable/chacha20_block.h) and adds or subtracts its
// words. Compiled by nvcc for the cuda backend's device (cuda/device_masks.cu) and by the
// host compiler for Thrust's OpenMP system (portable/omp_mask_accumulator.cc), where
// tests/portable checks it against the CPU's MaskAccumulator (OpenSSL's ChaCha20): the
// same words, so a root's unmasking gives the same sum on either.
#ifndef FEDAGG_PORTABLE_THRUST_MASK_ACCUMULATOR_H_
#define FEDAGG_PORTABLE_THRUST_MASK_ACCUMULATOR_H_

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/types/span.h"
#include "portable/chacha20_block.h"
#include "service/core/secure_masks.h"

namespace fedagg::portable {

struct SignedChaCha20Key {
  ChaCha20Key key;
  int32_t sign;  // +1: the mask is added; -1: subtracted
};

// The seeds as the block function takes them.
inline std::vector<SignedChaCha20Key> SignedChaCha20Keys(absl::Span<const SignedMaskSeed> seeds) {
  std::vector<SignedChaCha20Key> keys(seeds.size());
  for (size_t s = 0; s < seeds.size(); ++s) {
    std::memcpy(keys[s].key.words, seeds[s].seed.bytes.data(), sizeof(keys[s].key.words));
    keys[s].sign = seeds[s].sign >= 0 ? 1 : -1;
  }
  return keys;
}

// total[16 b .. 16 b + 15] += Σ_s sign_s · ChaCha20(key_s, counter b, nonce (field, 0, 0)).
struct AddMaskBlock {
  const SignedChaCha20Key* seeds;
  size_t seed_count;
  uint32_t field;
  uint32_t* total;
  size_t coordinates;

  FEDAGG_HOST_DEVICE void operator()(size_t block) const {
    const uint32_t nonce[3] = {field, 0, 0};
    const size_t first = block * 16;
    const size_t words = coordinates - first < 16 ? coordinates - first : 16;
    uint32_t sum[16];
    for (size_t w = 0; w < 16; ++w) sum[w] = w < words ? total[first + w] : 0;
    for (size_t s = 0; s < seed_count; ++s) {
      uint32_t stream[16];
      ChaCha20Block(seeds[s].key, static_cast<uint32_t>(block), nonce, stream);
      if (seeds[s].sign >= 0) {
        for (int w = 0; w < 16; ++w) sum[w] += stream[w];
      } else {
        for (int w = 0; w < 16; ++w) sum[w] -= stream[w];
      }
    }
    for (size_t w = 0; w < words; ++w) total[first + w] = sum[w];
  }
};

// `seeds` and `total` are in the system's memory (device memory for CUDA).
template <typename ExecutionPolicy>
void AddSeedMasks(const ExecutionPolicy& policy, const SignedChaCha20Key* seeds, size_t seed_count, uint32_t field,
                  uint32_t* total, size_t coordinates) {
  const size_t blocks = (coordinates + 15) / 16;
  thrust::for_each(policy, thrust::counting_iterator<size_t>(0), thrust::counting_iterator<size_t>(blocks),
                   AddMaskBlock{seeds, seed_count, field, total, coordinates});
}

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_THRUST_MASK_ACCUMULATOR_H_
