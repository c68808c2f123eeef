// The random Hadamard rotation of quantized fields and its inverse.
#include "service/core/rotation.h"

#include <cmath>
#include <vector>

#include "service/core/cpu_kernels.h"

namespace fedagg {
namespace {

// The unnormalized fast Walsh-Hadamard transform of each run of `run` values of the
// first `whole` (a multiple of it), in place, a run at a time (while it stays in cache).
void TransformRuns(double* x, int64_t whole, int64_t run) {
  for (int64_t first = 0; first < whole; first += run) {
    for (int64_t h = 1; h < run; h *= 2) {
      for (int64_t group = first; group < first + run; group += 2 * h) {
        for (int64_t i = group; i < group + h; ++i) portable::HadamardButterfly(x, i, h);
      }
    }
  }
}

}  // namespace

void Rotate(const ValueEncoding& encoding, absl::Span<double> values) {
  if (!encoding.rotated()) return;
  const int64_t run = encoding.rotation;
  const double norm = 1.0 / std::sqrt(static_cast<double>(run));
  const int64_t whole = static_cast<int64_t>(values.size()) / run * run;
  for (int64_t i = 0; i < whole; ++i) {
    if (RotationSignNegative(encoding.rotation_seed, i)) values[i] = -values[i];
  }
  TransformRuns(values.data(), whole, run);
  for (int64_t i = 0; i < whole; ++i) values[i] *= norm;
}

void Unrotate(const ValueEncoding& encoding, absl::Span<double> values) {
  if (!encoding.rotated()) return;
  const int64_t run = encoding.rotation;
  const double norm = 1.0 / std::sqrt(static_cast<double>(run));
  const int64_t whole = static_cast<int64_t>(values.size()) / run * run;
  TransformRuns(values.data(), whole, run);
  for (int64_t i = 0; i < whole; ++i) {
    values[i] = portable::UnrotatedValue(values[i], norm, encoding.rotation_seed, i);
  }
}

void UnrotateResult(const ValueEncoding& encoding, Tensor& result) {
  if (!encoding.rotated()) return;
  cpu::DispatchDType(result.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      const absl::Span<T> values = result.mutable_values<T>();
      std::vector<double> wide(values.begin(), values.end());
      Unrotate(encoding, absl::MakeSpan(wide));
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<T>(wide[i]);
    }
  });
}

}  // namespace fedagg
