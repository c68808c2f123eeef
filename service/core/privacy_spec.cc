// PrivacySpec: checks, the value's share of the noise, and adaptive clipping's step.
#include "service/core/privacy_spec.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fedagg {
namespace {
absl::Status Refuse(absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("differential privacy: ", problem));
}
}  // namespace

absl::Status PrivacySpec::Check() const {
  if (!std::isfinite(clip_norm) || clip_norm <= 0) {
    return Refuse(absl::StrCat("clip_norm must be finite and > 0, not ", clip_norm));
  }
  if (!std::isfinite(noise_multiplier) || noise_multiplier < 0) {
    return Refuse(absl::StrCat("noise_multiplier must be finite and >= 0, not ", noise_multiplier));
  }
  if (!std::isfinite(expected_clients) || expected_clients < 0) {
    return Refuse(absl::StrCat("expected_clients must be finite and >= 0, not ", expected_clients));
  }
  if (!adaptive.has_value()) return absl::OkStatus();
  if (!(adaptive->target_quantile > 0 && adaptive->target_quantile < 1)) {
    return Refuse(absl::StrCat("adaptive.target_quantile must lie in (0, 1), not ", adaptive->target_quantile));
  }
  if (!std::isfinite(adaptive->learning_rate) || adaptive->learning_rate <= 0) {
    return Refuse(absl::StrCat("adaptive.learning_rate must be finite and > 0, not ", adaptive->learning_rate));
  }
  if (expected_clients <= 0) {
    return Refuse("adaptive clipping needs expected_clients (> 0): the unclipped fraction is a share of it");
  }
  if (!std::isfinite(adaptive->count_stddev) || adaptive->count_stddev <= 0) {
    return Refuse(absl::StrCat("adaptive.count_stddev must be finite and > 0, not ", adaptive->count_stddev));
  }
  if (noise_multiplier > 0 && 2 * adaptive->count_stddev <= noise_multiplier) {
    return Refuse(absl::StrCat("adaptive.count_stddev ", adaptive->count_stddev, " spends all of noise_multiplier ",
                               noise_multiplier, " on the count (it must exceed z / 2 = ", noise_multiplier / 2,
                               "); raise it or the noise multiplier"));
  }
  return absl::OkStatus();
}

double PrivacySpec::ValueNoiseMultiplier() const {
  if (!adaptive.has_value() || noise_multiplier == 0) return noise_multiplier;
  const double count_multiplier = 2 * adaptive->count_stddev;
  return 1 / std::sqrt(1 / (noise_multiplier * noise_multiplier) - 1 / (count_multiplier * count_multiplier));
}

std::string PrivacySpec::Canonical() const {
  // Every digit: specs that differ in any parameter must not merge their partials.
  std::string line = absl::StrFormat("dp(C=%.17g,z=%.17g,n=%.17g", clip_norm, noise_multiplier, expected_clients);
  if (adaptive.has_value()) {
    absl::StrAppendFormat(&line, ",q=%.17g,lr=%.17g,count_stddev=%.17g", adaptive->target_quantile,
                          adaptive->learning_rate, adaptive->count_stddev);
  }
  return line + ")";
}

AdaptiveStep NextClipNorm(const PrivacySpec& spec, double noised_centred_unclipped) {
  AdaptiveStep step;
  step.unclipped_fraction = std::clamp(noised_centred_unclipped / spec.expected_clients + 0.5, 0.0, 1.0);
  step.next_clip_norm =
      spec.clip_norm * std::exp(-spec.adaptive->learning_rate * (step.unclipped_fraction - spec.adaptive->target_quantile));
  return step;
}

}  // namespace fedagg
