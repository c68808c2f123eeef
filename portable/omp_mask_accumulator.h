// Secure aggregation's mask expansion on the CPU's cores through Thrust's OpenMP system:
// the portable code the cuda backend's device runs (portable/thrust_mask_accumulator.h),
// so its words are checked against MaskAccumulator's (OpenSSL) without a GPU.
#ifndef FEDAGG_PORTABLE_OMP_MASK_ACCUMULATOR_H_
#define FEDAGG_PORTABLE_OMP_MASK_ACCUMULATOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "service/secagg/mask_expansion.h"

namespace fedagg {

// As MaskAccumulator::Add: total[i] += sign * mask(seed, field)[i] (mod 2^32). A
// MaskAdder (service/core/secure_masks.h): the thrust-omp backend's; it cannot fail.
absl::Status AddMasksOnThrustOmp(absl::Span<const SignedMaskSeed> seeds, uint32_t field, absl::Span<uint32_t> total);

}  // namespace fedagg

#endif  // FEDAGG_PORTABLE_OMP_MASK_ACCUMULATOR_H_
