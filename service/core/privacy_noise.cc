// Privacy noise: discrete Gaussian noise on a grid, once, at the root.
#include "service/core/privacy_noise.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "service/core/discrete_gaussian.h"
#include "service/core/thread_pool.h"

namespace fedagg {
namespace {

// Coordinates noised from one keyed stream: the unit of parallel work.
constexpr int64_t kBlock = 1 << 16;
// The grid step is sigma / 2^26 rounded down to a power of two: the snapping moves a sum
// by at most half a step, 2^-27 sigma, and the variance in steps stays within 2^54.
constexpr int kGridBits = 26;
// The stream of the adaptive count, after those of the fields.
constexpr uint32_t kCountStream = 0xffffffffu;

struct Grid {
  double step = 0;        // g
  uint64_t variance = 0;  // in steps squared: ceil((sigma / g)^2)
  double stddev() const { return std::sqrt(static_cast<double>(variance)) * step; }
};

// sigma > 0 and finite.
Grid GridFor(double sigma) {
  Grid grid;
  grid.step = std::ldexp(1.0, std::ilogb(sigma) - kGridBits);
  const double steps = sigma / grid.step;  // exact: a power-of-two scaling, in [2^26, 2^27)
  const double squared = steps * steps;
  const double below = std::fma(steps, steps, -squared);  // the rounding's exact remainder
  grid.variance = static_cast<uint64_t>(std::ceil(squared));
  if (squared == std::ceil(squared) && below > 0) ++grid.variance;
  return grid;
}

// `value` moved by discrete Gaussian noise on `grid`; false when it is off the grid's range.
bool Noised(double value, const Grid& grid, const DiscreteGaussian& gaussian, KeyedRandom& random, double* noised) {
  const double steps = std::nearbyint(value / grid.step);
  if (!(std::fabs(steps) < 0x1p52)) return false;
  *noised = (steps + static_cast<double>(gaussian.Sample(random))) * grid.step;
  return true;
}

// Noises `values` (grid.variance 0: none; clipping alone) and divides them by `divisor`.
template <typename T>
absl::Status NoiseValues(absl::Span<T> values, uint32_t field, const Grid& grid, const NoiseKey& key,
                         double divisor, const std::string& path) {
  if (grid.variance == 0) {
    for (T& value : values) value = static_cast<T>(value / divisor);
    return absl::OkStatus();
  }
  const DiscreteGaussian gaussian(grid.variance);
  const int64_t n = static_cast<int64_t>(values.size());
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::atomic<bool> off_grid{false};
  ThreadPool::Default().ParallelFor(blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t block = first; block < last; ++block) {
      KeyedRandom random(key, field, static_cast<uint64_t>(block));
      for (int64_t i = block * kBlock; i < std::min(n, (block + 1) * kBlock); ++i) {
        double noised = 0;
        if (!Noised(static_cast<double>(values[i]), grid, gaussian, random, &noised)) {
          off_grid = true;
          return;
        }
        values[i] = static_cast<T>(noised / divisor);
      }
    }
  });
  if (off_grid) {
    return absl::FailedPreconditionError(absl::StrCat(
        "field '", path, "': a coordinate of its sum is not finite or beyond 2^52 noise grid steps of ", grid.step,
        "; the sum cannot be noised (is the clip norm or the noise multiplier far too small for it?)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AddPrivacyNoise(const ReductionSpec& spec, const NoiseKey& key, int64_t clipped_updates,
                             AggregateResult& result) {
  const PrivacySpec& privacy = *spec.options().privacy;
  const double sigma = privacy.ValueNoiseStddev();
  PrivacyReport report;
  report.clip_norm = privacy.clip_norm;
  report.clipped_updates = clipped_updates;
  const Grid grid = sigma > 0 ? GridFor(sigma) : Grid{};
  report.noise_stddev = sigma > 0 ? grid.stddev() : 0;
  for (size_t f = 0; f < result.fields.size(); ++f) {
    const FieldSpec& field = spec.fields()[f];
    ReportedField& reported = result.fields[f];
    reported.intrinsic = field.declared_intrinsic;
    const double divisor = field.private_mean ? privacy.expected_clients : 1.0;
    const uint32_t stream = static_cast<uint32_t>(f);
    absl::Status noised = reported.value.dtype == DType::kFloat64
                              ? NoiseValues(reported.value.mutable_values<double>(), stream, grid, key, divisor, field.path)
                              : NoiseValues(reported.value.mutable_values<float>(), stream, grid, key, divisor, field.path);
    if (!noised.ok()) return noised;
  }
  if (privacy.adaptive.has_value()) {
    const double unclipped = static_cast<double>(result.contributions - clipped_updates);
    double centred = unclipped - 0.5 * static_cast<double>(result.contributions);
    const Grid count_grid = GridFor(privacy.adaptive->count_stddev);
    KeyedRandom random(key, kCountStream, 0);
    if (!Noised(centred, count_grid, DiscreteGaussian(count_grid.variance), random, &centred)) {
      return absl::FailedPreconditionError("the count of unclipped updates is beyond the count noise's grid");
    }
    const AdaptiveStep step = NextClipNorm(privacy, centred);
    report.unclipped_fraction = step.unclipped_fraction;
    report.next_clip_norm = step.next_clip_norm;
  }
  result.privacy = report;
  return absl::OkStatus();
}

}  // namespace fedagg
