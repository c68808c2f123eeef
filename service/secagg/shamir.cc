// Shamir sharing over GF(2^61 - 1): limbs, polynomials, Lagrange interpolation at zero.
#include "service/secagg/shamir.h"

#include <openssl/rand.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace fedagg {
namespace {

using uint128 = unsigned __int128;
constexpr size_t kLimbBytes = 7;  // 56 bits: every limb is below the prime

uint64_t Reduce(uint128 x) {
  // x mod 2^61 - 1, for x < 2^122: fold the high bits onto the low ones twice.
  uint64_t r = static_cast<uint64_t>(x & kShamirPrime) + static_cast<uint64_t>(x >> 61);
  r = (r & kShamirPrime) + (r >> 61);
  return r >= kShamirPrime ? r - kShamirPrime : r;
}
uint64_t Add(uint64_t a, uint64_t b) { return Reduce(uint128{a} + b); }
uint64_t Sub(uint64_t a, uint64_t b) { return Add(a, kShamirPrime - b); }
uint64_t Mul(uint64_t a, uint64_t b) { return Reduce(uint128{a} * b); }
uint64_t Inverse(uint64_t a) {  // a^(p-2), a != 0
  uint64_t result = 1, base = a, exponent = kShamirPrime - 2;
  while (exponent > 0) {
    if (exponent & 1) result = Mul(result, base);
    base = Mul(base, base);
    exponent >>= 1;
  }
  return result;
}

size_t LimbsOf(size_t bytes) { return (bytes + kLimbBytes - 1) / kLimbBytes; }

// A uniform field element from the secure source, by rejection.
absl::StatusOr<uint64_t> RandomElement() {
  for (;;) {
    uint64_t draw = 0;
    if (RAND_bytes(reinterpret_cast<uint8_t*>(&draw), sizeof(draw)) != 1) {
      return absl::InternalError("the system's secure random source (OpenSSL RAND_bytes) failed; no shares were made");
    }
    draw &= kShamirPrime;  // 61 bits
    if (draw < kShamirPrime) return draw;
  }
}

// The Lagrange weights w_j of the points xs at x: the polynomial through (x_j, y_j) takes
// the value sum_j w_j y_j at x. One set serves every limb of a secret.
std::vector<uint64_t> LagrangeWeights(absl::Span<const uint64_t> xs, uint64_t x) {
  std::vector<uint64_t> weights(xs.size());
  for (size_t j = 0; j < xs.size(); ++j) {
    uint64_t numerator = 1, denominator = 1;
    for (size_t m = 0; m < xs.size(); ++m) {
      if (m == j) continue;
      numerator = Mul(numerator, Sub(x, xs[m]));
      denominator = Mul(denominator, Sub(xs[j], xs[m]));
    }
    weights[j] = Mul(numerator, Inverse(denominator));
  }
  return weights;
}

uint64_t Weighted(absl::Span<const uint64_t> weights, absl::Span<const ShamirShare> shares, size_t limb) {
  uint64_t value = 0;
  for (size_t j = 0; j < weights.size(); ++j) value = Add(value, Mul(weights[j], shares[j].y[limb]));
  return value;
}

}  // namespace

absl::StatusOr<std::vector<ShamirShare>> ShareSecret(absl::Span<const uint8_t> secret, int threshold,
                                                     absl::Span<const uint32_t> points) {
  if (threshold < 1 || points.size() < static_cast<size_t>(threshold)) {
    return absl::InvalidArgumentError(absl::StrCat("Shamir sharing needs 1 <= threshold <= shares; got threshold ",
                                                   threshold, " of ", points.size(), " shares"));
  }
  std::set<uint32_t> distinct;
  for (uint32_t x : points) {
    if (x == 0 || x >= kShamirPrime || !distinct.insert(x).second) {
      return absl::InvalidArgumentError(absl::StrCat("share point ", x, " is zero or given twice"));
    }
  }
  const size_t limbs = LimbsOf(secret.size());
  std::vector<ShamirShare> shares(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    shares[i].x = points[i];
    shares[i].y.assign(limbs, 0);
  }
  std::vector<uint64_t> coefficients(static_cast<size_t>(threshold));
  for (size_t limb = 0; limb < limbs; ++limb) {
    uint64_t constant = 0;
    for (size_t b = 0; b < kLimbBytes && limb * kLimbBytes + b < secret.size(); ++b) {
      constant |= uint64_t{secret[limb * kLimbBytes + b]} << (8 * b);
    }
    coefficients[0] = constant;
    for (int j = 1; j < threshold; ++j) {
      absl::StatusOr<uint64_t> random = RandomElement();
      if (!random.ok()) return random.status();
      coefficients[j] = *random;
    }
    for (ShamirShare& share : shares) {  // Horner
      uint64_t value = 0;
      for (int j = threshold - 1; j >= 0; --j) value = Add(Mul(value, share.x), coefficients[j]);
      share.y[limb] = value;
    }
  }
  return shares;
}

absl::StatusOr<std::vector<uint8_t>> RecoverSecret(absl::Span<const ShamirShare> shares, int threshold,
                                                   size_t secret_bytes) {
  if (threshold < 1 || shares.size() < static_cast<size_t>(threshold)) {
    return absl::InvalidArgumentError(absl::StrCat("recovering a secret needs ", threshold, " shares; got ",
                                                   shares.size()));
  }
  const size_t limbs = LimbsOf(secret_bytes);
  std::set<uint32_t> points;
  for (const ShamirShare& share : shares) {
    if (share.x == 0 || !points.insert(share.x).second) {
      return absl::InvalidArgumentError(absl::StrCat("share point ", share.x, " is zero or given twice"));
    }
    if (share.y.size() != limbs) {
      return absl::InvalidArgumentError(absl::StrCat("a share holds ", share.y.size(), " values; a ", secret_bytes,
                                                     "-byte secret has ", limbs));
    }
    for (uint64_t y : share.y) {
      if (y >= kShamirPrime) return absl::DataLossError("a share value is not an element of the field");
    }
  }
  std::vector<uint64_t> xs(static_cast<size_t>(threshold));
  for (int j = 0; j < threshold; ++j) xs[j] = shares[j].x;
  const absl::Span<const ShamirShare> basis = shares.first(static_cast<size_t>(threshold));
  // A share beyond the threshold must lie on the basis's polynomials: one wrong share in
  // the basis moves them off it (but for a chance of 1 in 2^61 per limb), and one outside
  // it is not used. One check finds any wrong share the secret would be made of.
  for (size_t extra = static_cast<size_t>(threshold); extra < std::min(shares.size(), basis.size() + 1); ++extra) {
    const std::vector<uint64_t> at_extra = LagrangeWeights(xs, shares[extra].x);
    for (size_t limb = 0; limb < limbs; ++limb) {
      if (Weighted(at_extra, basis, limb) != shares[extra].y[limb]) {
        return absl::DataLossError(absl::StrCat("the shares do not agree (share at point ", shares[extra].x,
                                                " is off the others' polynomial): one was changed, or they "
                                                "belong to different secrets"));
      }
    }
  }
  const std::vector<uint64_t> at_zero = LagrangeWeights(xs, 0);
  std::vector<uint8_t> secret(secret_bytes, 0);
  for (size_t limb = 0; limb < limbs; ++limb) {
    const uint64_t constant = Weighted(at_zero, basis, limb);
    const size_t bytes_here = std::min(kLimbBytes, secret_bytes - limb * kLimbBytes);
    if ((constant >> (8 * bytes_here)) != 0) {
      return absl::DataLossError("the shares give a value longer than the secret: one was changed");
    }
    for (size_t b = 0; b < bytes_here; ++b) secret[limb * kLimbBytes + b] = static_cast<uint8_t>(constant >> (8 * b));
  }
  return secret;
}

}  // namespace fedagg
