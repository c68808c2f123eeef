// The portable mask expansion instantiated for Thrust's OpenMP system.
#include "portable/omp_mask_accumulator.h"

#include <thrust/system/omp/execution_policy.h>

#include <cstring>
#include <vector>

#include "portable/thrust_mask_accumulator.h"

namespace fedagg {

void AddMasksOnThrustOmp(absl::Span<const SignedMaskSeed> seeds, uint32_t field, absl::Span<uint32_t> total) {
  std::vector<portable::SignedChaCha20Key> keys(seeds.size());
  for (size_t s = 0; s < seeds.size(); ++s) {
    std::memcpy(keys[s].key.words, seeds[s].seed.bytes.data(), sizeof(keys[s].key.words));
    keys[s].sign = seeds[s].sign >= 0 ? 1 : -1;
  }
  portable::AddSeedMasks(thrust::omp::par, keys.data(), keys.size(), field, total.data(), total.size());
}

}  // namespace fedagg
