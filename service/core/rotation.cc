// The random Hadamard rotation of quantized fields and its inverse.
#include "service/core/rotation.h"

#include <cmath>
#include <vector>

#include "service/core/cpu_kernels.h"

namespace fedagg {
namespace {

// The unnormalized fast Walsh-Hadamard transform of one run, in place: at each stage,
// the pairs (j, j + h) of each group of 2h become (a + b, a - b).
void Hadamard(double* x, int64_t n) {
  for (int64_t h = 1; h < n; h *= 2) {
    for (int64_t i = 0; i < n; i += 2 * h) {
      for (int64_t j = i; j < i + h; ++j) {
        const double a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
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
  for (int64_t first = 0; first < whole; first += run) {
    double* x = values.data() + first;
    Hadamard(x, run);
    for (int64_t j = 0; j < run; ++j) x[j] *= norm;
  }
}

void Unrotate(const ValueEncoding& encoding, absl::Span<double> values) {
  if (!encoding.rotated()) return;
  const int64_t run = encoding.rotation;
  const double norm = 1.0 / std::sqrt(static_cast<double>(run));
  const int64_t whole = static_cast<int64_t>(values.size()) / run * run;
  for (int64_t first = 0; first < whole; first += run) {
    double* x = values.data() + first;
    Hadamard(x, run);
    for (int64_t j = 0; j < run; ++j) x[j] *= norm;
  }
  for (int64_t i = 0; i < whole; ++i) {
    if (RotationSignNegative(encoding.rotation_seed, i)) values[i] = -values[i];
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
