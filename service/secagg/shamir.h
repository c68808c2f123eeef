// Shamir's secret sharing over the prime field GF(2^61 - 1), for secure aggregation's
// seeds and keys: a secret of any length is cut into 7-byte limbs (each below the prime),
// each limb the constant term of its own random polynomial of degree threshold - 1; share
// x holds every polynomial's value at x. Any `threshold` shares give the secret back;
// fewer say nothing about it. Coefficients come from the system's secure source.
#ifndef FEDAGG_SERVICE_SECAGG_SHAMIR_H_
#define FEDAGG_SERVICE_SECAGG_SHAMIR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fedagg {

struct ShamirShare {
  uint32_t x = 0;               // 1, 2, ...: the share's point
  std::vector<uint64_t> y;      // one value per limb of the secret
  bool operator==(const ShamirShare&) const = default;
};

inline constexpr uint64_t kShamirPrime = (uint64_t{1} << 61) - 1;

// The shares of `secret` at `points` (distinct, non-zero), one each; INVALID_ARGUMENT
// unless 1 <= threshold <= points.size(); INTERNAL when the secure source fails.
absl::StatusOr<std::vector<ShamirShare>> ShareSecret(absl::Span<const uint8_t> secret, int threshold,
                                                     absl::Span<const uint32_t> points);

// The secret of `secret_bytes` bytes from at least `threshold` shares with distinct points,
// made of the first `threshold`. When more are given, the next one must lie on the same
// polynomials: a share changed on its way (or shares of different secrets) is then
// DATA_LOSS, never a wrong secret. INVALID_ARGUMENT for too few shares, repeated
// or zero points, or shares of the wrong length.
absl::StatusOr<std::vector<uint8_t>> RecoverSecret(absl::Span<const ShamirShare> shares, int threshold,
                                                   size_t secret_bytes);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_SECAGG_SHAMIR_H_
