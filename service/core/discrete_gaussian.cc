// DiscreteGaussian: the exact sampler (discrete Laplace proposals, rejection).
#include "service/core/discrete_gaussian.h"

#include <algorithm>
#include <cmath>


namespace fedagg {
namespace {
// floor(sqrt(n)) exactly.
uint64_t IntegerSquareRoot(uint64_t n) {
  uint64_t root = static_cast<uint64_t>(std::sqrt(static_cast<double>(n)));
  while (static_cast<uint128>(root) * root > n) --root;
  while (static_cast<uint128>(root + 1) * (root + 1) <= n) ++root;
  return root;
}
// Proposals this far out are drawn again: their chance is below 2^-1000, and it keeps the
// acceptance test's rationals within 128 bits.
constexpr uint64_t kMaxMagnitude = uint64_t{1} << 36;
}  // namespace

DiscreteGaussian::DiscreteGaussian(uint64_t variance)
    : variance_(std::clamp<uint64_t>(variance, 1, kMaxVariance)), t_(IntegerSquareRoot(variance_) + 1) {}

bool DiscreteGaussian::BernoulliExp(KeyedRandom& random, uint128 numerator, uint128 denominator) {
  // exp(-g) for g > 1 is exp(-1) to the floor(g), times exp(-(g - floor(g))).
  while (numerator > denominator) {
    if (!BernoulliExp(random, 1, 1)) return false;
    numerator -= denominator;
  }
  // g <= 1: the first k with a failed Bernoulli(g / k) trial is odd with probability exp(-g).
  uint64_t k = 1;
  while (k < 64 && random.Below(denominator * k) < numerator) ++k;
  return k % 2 == 1;
}

int64_t DiscreteGaussian::Sample(KeyedRandom& random) const {
  for (;;) {
    // A discrete Laplace proposal of scale t: U uniform below t, kept with exp(-U/t), plus
    // t times a geometric count of exp(-1) successes.
    const uint64_t u = static_cast<uint64_t>(random.Below(t_));
    if (!BernoulliExp(random, u, t_)) continue;
    uint64_t v = 0;
    while (BernoulliExp(random, 1, 1)) ++v;
    if (v > kMaxMagnitude / t_) continue;
    const uint64_t x = u + t_ * v;
    const bool negative = random.NextBit();
    if (negative && x == 0) continue;
    // Kept with exp(-(x - sigma^2/t)^2 / (2 sigma^2)) = exp(-(x t - sigma^2)^2 / (2 sigma^2 t^2)).
    const uint128 xt = static_cast<uint128>(x) * t_;
    const uint128 gap = xt >= variance_ ? xt - variance_ : variance_ - xt;
    if (BernoulliExp(random, gap * gap, static_cast<uint128>(2) * variance_ * t_ * t_)) {
      return negative ? -static_cast<int64_t>(x) : static_cast<int64_t>(x);
    }
  }
}

}  // namespace fedagg
