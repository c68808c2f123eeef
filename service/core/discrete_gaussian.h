// DiscreteGaussian: exact samples of the discrete Gaussian distribution on the integers,
// P(x) proportional to exp(-x^2 / (2 sigma^2)), with sigma^2 an integer — the sampler of
// Canonne, Kamath and Steinke ("The Discrete Gaussian for Differential Privacy", 2020,
// Algorithm 3), in integer arithmetic only: no floating-point number touches the noise,
// so its low bits cannot betray the value it hides (the attack on floating-point
// Gaussian noise). Bernoulli(exp(-n/d)) trials use exact rationals of 128 bits.
#ifndef FEDAGG_SERVICE_CORE_DISCRETE_GAUSSIAN_H_
#define FEDAGG_SERVICE_CORE_DISCRETE_GAUSSIAN_H_

#include <cstdint>

#include "service/core/keyed_random.h"

namespace fedagg {

class DiscreteGaussian {
 public:
  // Up to 2^54: the sampler's rationals then fit 128 bits.
  static constexpr uint64_t kMaxVariance = uint64_t{1} << 54;

  // `variance` in [1, kMaxVariance] (held to that range).
  explicit DiscreteGaussian(uint64_t variance);
  int64_t Sample(KeyedRandom& random) const;

  // Bernoulli(exp(-numerator / denominator)), exactly; 0 < denominator < 2^110.
  static bool BernoulliExp(KeyedRandom& random, uint128 numerator, uint128 denominator);

 private:
  uint64_t variance_;  // sigma^2
  uint64_t t_;         // floor(sigma) + 1: the discrete Laplace proposal's scale
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_DISCRETE_GAUSSIAN_H_
