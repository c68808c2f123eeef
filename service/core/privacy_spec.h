// PrivacySpec: an aggregation's differential privacy as the reduction core applies it —
// the clipping bound every update is held to where it is received, the noise the root
// adds once to the sum, the divisor of a mean, and adaptive clipping's rule for the next
// round's bound (the quantile estimator of Andrew et al., as TensorFlow Federated's
// gaussian_adaptive aggregator states it). docs/SEMANTICS.md, "Differential privacy".
#ifndef FEDAGG_SERVICE_CORE_PRIVACY_SPEC_H_
#define FEDAGG_SERVICE_CORE_PRIVACY_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace fedagg {

struct AdaptiveClipping {
  double target_quantile = 0.5;  // the fraction of updates meant to be left unclipped
  double learning_rate = 0.2;
  double count_stddev = 0;       // of the noised count of unclipped updates
};

struct PrivacySpec {
  double clip_norm = 0;          // C: the L2 bound of a whole update
  double noise_multiplier = 0;   // z: the noise of the whole release (value and count)
  double expected_clients = 0;   // a mean's divisor; 0 when no field is a mean
  std::optional<AdaptiveClipping> adaptive;

  // INVALID_ARGUMENT naming the bad parameter: C not finite and > 0, z negative or not
  // finite, expected_clients negative, a quantile outside (0, 1), a learning rate not > 0,
  // a count noise that leaves the value no noise (2 count_stddev <= z, with z > 0).
  absl::Status Check() const;
  // The noise multiplier of the values: z, or with adaptive clipping the share the count's
  // noise leaves, (z^-2 - (2 count_stddev)^-2)^-1/2 (0 when z is 0).
  double ValueNoiseMultiplier() const;
  // The standard deviation the sum's coordinates get: ValueNoiseMultiplier() * C.
  double ValueNoiseStddev() const { return ValueNoiseMultiplier() * clip_norm; }
  // One line of its parameters, for the spec's canonical form.
  std::string Canonical() const;
};

// Adaptive clipping's report of one round: the noised count of unclipped updates
// (centred: each update counts +-1/2, noised with count_stddev) as a fraction of the
// expected clients, held in [0, 1], and the bound for the next round,
// C * exp(-learning_rate * (fraction - target_quantile)).
// What the root did for a differentially private aggregation, reported with its result.
struct PrivacyReport {
  double clip_norm = 0;
  double noise_stddev = 0;      // of each coordinate of the sum, as drawn
  int64_t clipped_updates = 0;  // exact: for operators, not part of the release
  double unclipped_fraction = 0;  // adaptive clipping: noised
  double next_clip_norm = 0;      // adaptive clipping: the next round's bound
};

struct AdaptiveStep {
  double unclipped_fraction = 0;
  double next_clip_norm = 0;
};
AdaptiveStep NextClipNorm(const PrivacySpec& spec, double noised_centred_unclipped);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_PRIVACY_SPEC_H_
