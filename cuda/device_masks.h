// Secure aggregation's mask expansion on the current CUDA device: the portable code of
// portable/thrust_mask_accumulator.h compiled by nvcc, one ChaCha20 block a work item,
// bit-identical to the CPU's MaskAccumulator. The sum goes to the device and back here;
// the root's unmasking keeps it on the host for now (nothing calls this in the service
// yet: docs/ARCHITECTURE.md, "Not built yet").
#ifndef FEDAGG_CUDA_DEVICE_MASKS_H_
#define FEDAGG_CUDA_DEVICE_MASKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "service/secagg/mask_expansion.h"

namespace fedagg::cuda {

// As MaskAccumulator::Add: total[i] += sign * mask(seed, field)[i] (mod 2^32), on the
// device; RESOURCE_EXHAUSTED when its memory cannot hold the seeds and the sum.
absl::Status AddMasksOnDevice(absl::Span<const SignedMaskSeed> seeds, uint32_t field, absl::Span<uint32_t> total);

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_DEVICE_MASKS_H_
