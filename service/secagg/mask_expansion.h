// Secure aggregation's masks: each mask seed (32 bytes: a client's self-mask seed, or the
// seed two clients agree on) expands, per field, into one 32-bit word per coordinate —
// ChaCha20's keystream under the seed as key, the field's index as nonce, word i of the
// stream for coordinate i (RFC 8439: block i / 16, word i % 16). Masks are added modulo
// 2^32; a field with a smaller modulus 2^b keeps the low b bits of the sum.
//
// MaskAccumulator adds or subtracts the masks of many seeds into one vector: the root's
// bulk work when it unmasks (a survivor's self mask, a dropped client's pairwise masks),
// here on every core through OpenSSL's ChaCha20. portable/chacha20_block.h computes the
// same words on a device.
#ifndef FEDAGG_SERVICE_SECAGG_MASK_EXPANSION_H_
#define FEDAGG_SERVICE_SECAGG_MASK_EXPANSION_H_

#include <cstdint>

#include "absl/types/span.h"
#include "service/core/secure_masks.h"
#include "service/core/thread_pool.h"

namespace fedagg {

class MaskAccumulator {
 public:
  // Coordinates each task expands at once: a multiple of ChaCha20's 16-word block.
  static constexpr size_t kChunkWords = size_t{1} << 15;

  // `pool` (optional) spreads the coordinates over its threads.
  explicit MaskAccumulator(ThreadPool* pool = nullptr) : pool_(pool) {}

  // total[i] += sign * mask(seed, field)[i] (mod 2^32), for every seed.
  void Add(absl::Span<const SignedMaskSeed> seeds, uint32_t field, absl::Span<uint32_t> total) const;

 private:
  ThreadPool* pool_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_SECAGG_MASK_EXPANSION_H_
