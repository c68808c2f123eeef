// Secure aggregation's mask expansion on the current CUDA device: the portable code of
// portable/thrust_mask_accumulator.h compiled by nvcc, one ChaCha20 block a work item,
// bit-identical to the CPU's MaskAccumulator. The cuda backend offers it as its
// mask_adder (accumulator_factory.h), so a secure aggregation's root unmasks on its first
// device; the sum goes to the device and back, one field at a time.
#ifndef FEDAGG_CUDA_DEVICE_MASKS_H_
#define FEDAGG_CUDA_DEVICE_MASKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "service/secagg/mask_expansion.h"

namespace fedagg::cuda {

// As MaskAccumulator::Add: total[i] += sign * mask(seed, field)[i] (mod 2^32), on CUDA
// device `device` (the calling thread's current device is as it was afterwards);
// RESOURCE_EXHAUSTED when its memory cannot hold the seeds and the sum.
absl::Status AddMasksOnDevice(int device, absl::Span<const SignedMaskSeed> seeds, uint32_t field,
                              absl::Span<uint32_t> total);

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_DEVICE_MASKS_H_
