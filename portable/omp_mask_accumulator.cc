// The portable mask expansion instantiated for Thrust's OpenMP system.
#include "portable/omp_mask_accumulator.h"

#include <thrust/system/omp/execution_policy.h>

#include <vector>

#include "portable/thrust_mask_accumulator.h"

namespace fedagg {

absl::Status AddMasksOnThrustOmp(absl::Span<const SignedMaskSeed> seeds, uint32_t field, absl::Span<uint32_t> total) {
  const std::vector<portable::SignedChaCha20Key> keys = portable::SignedChaCha20Keys(seeds);
  portable::AddSeedMasks(thrust::omp::par, keys.data(), keys.size(), field, total.data(), total.size());
  return absl::OkStatus();
}

}  // namespace fedagg
