// ReferenceSum for tests: the float64 nearest to the exact sum of float64 values,
// by Shewchuk's non-overlapping expansions (the algorithm behind Python's math.fsum),
// written independently of service/core/exact_sums.h so that it can check it.
#ifndef FEDAGG_TESTS_CORE_CORRECTLY_ROUNDED_SUM_H_
#define FEDAGG_TESTS_CORE_CORRECTLY_ROUNDED_SUM_H_

#include <cmath>
#include <utility>
#include <vector>

namespace fedagg::testing {

// The correctly rounded sum of `values` (ties to even); no intermediate may overflow.
inline double ReferenceSum(const std::vector<double>& values) {
  std::vector<double> partials;
  for (double x : values) {
    size_t kept = 0;
    for (double y : partials) {
      if (std::abs(x) < std::abs(y)) std::swap(x, y);
      const double hi = x + y;
      const double lo = y - (hi - x);
      if (lo != 0) partials[kept++] = lo;
      x = hi;
    }
    partials.resize(kept);
    partials.push_back(x);
  }
  if (partials.empty()) return 0;
  size_t n = partials.size() - 1;
  double hi = partials[n], lo = 0;
  while (n > 0) {
    const double x = hi, y = partials[--n];
    hi = x + y;
    lo = y - (hi - x);
    if (lo != 0) break;
  }
  // Half-way cases: the partials below decide which way a tie goes.
  if (n > 0 && ((lo < 0 && partials[n - 1] < 0) || (lo > 0 && partials[n - 1] > 0))) {
    const double y = lo * 2, x = hi + y;
    if (y == x - hi) hi = x;
  }
  return hi;
}

}  // namespace fedagg::testing

#endif  // FEDAGG_TESTS_CORE_CORRECTLY_ROUNDED_SUM_H_
