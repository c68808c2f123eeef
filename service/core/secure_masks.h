// Secure aggregation's masks as a reduction backend sees them: the seeds whose keystreams
// (service/secagg/mask_expansion.h) the root adds to or takes from a field's sum when it
// unmasks, and MaskAdder, the function that expands and adds them where the backend
// computes (the host's cores, or a device: AccumulatorFactory::mask_adder).
#ifndef FEDAGG_SERVICE_CORE_SECURE_MASKS_H_
#define FEDAGG_SERVICE_CORE_SECURE_MASKS_H_

#include <array>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace fedagg {

struct MaskSeed {
  std::array<uint8_t, 32> bytes{};
};

// A seed whose mask is added (+1) or subtracted (-1).
struct SignedMaskSeed {
  MaskSeed seed;
  int sign = 1;
};

// total[i] += sign * mask(seed, field)[i] (mod 2^32) for every seed: the words of
// MaskAccumulator (OpenSSL's ChaCha20), wherever they are computed.
using MaskAdder =
    std::function<absl::Status(absl::Span<const SignedMaskSeed> seeds, uint32_t field, absl::Span<uint32_t> total)>;

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_SECURE_MASKS_H_
