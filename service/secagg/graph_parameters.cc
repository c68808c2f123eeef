// SecAgg+'s degree and threshold from the adversarial and dropout rates (graph_parameters.h
// says which bounds, and why).
#include "service/secagg/graph_parameters.h"

#include <math.h>  // lgammal_r

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace fedagg {
namespace {

constexpr double kLog2 = 0.69314718055994530942;
constexpr double kNegativeInfinity = -std::numeric_limits<double>::infinity();
// A tail's terms are summed until what is left is below this fraction of the sum.
constexpr double kNegligible = 0x1p-60;

// ln Γ(x) in long double (where it is wider than double: ln 100000! is about 1e6, so
// double leaves about 1e-10 of a difference), through the reentrant lgammal_r: lgamma
// writes the sign to a global, which cohorts formed on several threads would race on.
long double LogGamma(long double x) {
  int sign = 0;
  return ::lgammal_r(x, &sign);
}

double LogChoose(int64_t n, int64_t r) {
  return static_cast<double>(LogGamma(n + 1) - LogGamma(r + 1) - LogGamma(n - r + 1));
}

// ln sum_{x = from..to} P[X = x], X ~ Hypergeometric(population N, successes K, draws k).
// The pmf is log-concave: from its largest term in the range the terms fall outward with
// ratios that keep falling, so once a ratio r < 1 what is left beyond a term is at most
// term * r / (1 - r), and the walk stops where that is negligible.
double LogPmfSum(int64_t N, int64_t K, int64_t k, int64_t from, int64_t to) {
  from = std::max({from, int64_t{0}, k - (N - K)});
  to = std::min({to, k, K});
  if (from > to) return kNegativeInfinity;
  const int64_t peak = std::clamp((k + 1) * (K + 1) / (N + 2), from, to);  // the mode, clamped
  double sum = 1;  // in units of P[X = peak]
  double term = 1;
  for (int64_t x = peak; x < to; ++x) {  // term(x + 1) = term(x) * ratio
    const double ratio = static_cast<double>((K - x) * (k - x)) / static_cast<double>((x + 1) * (N - K - k + x + 1));
    term *= ratio;
    sum += term;
    if (ratio < 1 && term * ratio < (1 - ratio) * sum * kNegligible) break;
  }
  term = 1;
  for (int64_t x = peak; x > from; --x) {  // term(x - 1) = term(x) * ratio
    const double ratio = static_cast<double>(x * (N - K - k + x)) / static_cast<double>((K - x + 1) * (k - x + 1));
    term *= ratio;
    sum += term;
    if (ratio < 1 && term * ratio < (1 - ratio) * sum * kNegligible) break;
  }
  const double log_peak = LogChoose(K, peak) + LogChoose(N - K, k - peak) - LogChoose(N, k);
  return log_peak + std::log(sum);
}

// Below, each tail's bound as the number of neighbours k grows: A and S (graph_parameters.h)
// for k + 1 neighbours are those for k plus one more draw, so each bound is nondecreasing
// in k and grows by at most the neighbours added; the searches start from the last one.

// The smallest a >= from with ln P[X > a] <= log_bound (from at most that a).
int SmallestUpperBound(int population, int successes, int draws, int from, double log_bound) {
  int a = from;
  while (LogHypergeometricTailAbove(population, successes, draws, a) > log_bound) ++a;
  return a;
}

// The largest s <= from with ln P[X < s] <= log_bound (from at least that s).
int LargestLowerBound(int population, int successes, int draws, int from, double log_bound) {
  int s = from;
  while (LogHypergeometricTailBelow(population, successes, draws, s) > log_bound) --s;
  return s;
}

// How many of n clients a rate covers. A rate written in decimal is a hair off in binary
// (0.29 * 100 = 28.999...96): a billionth of a client counts it as meant.
int ClientsAtRate(double rate, int n) {
  return std::min(static_cast<int>(std::floor(rate * n + 1e-9)), n - 1);
}

}  // namespace

double LogHypergeometricTailAbove(int population, int successes, int draws, int a) {
  return LogPmfSum(population, successes, draws, int64_t{a} + 1, draws);
}

double LogHypergeometricTailBelow(int population, int successes, int draws, int s) {
  return LogPmfSum(population, successes, draws, 0, int64_t{s} - 1);
}

double LogHararyDisconnectionBound(int clients, int degree, int bad) {
  if (degree > bad) return kNegativeInfinity;
  const double n = clients, k = degree, b = bad;
  const double window_pairs = std::log(n) + std::log(n - k - 1) - kLog2;
  return window_pairs + static_cast<double>(LogGamma(b + 1) - LogGamma(b - k + 1) + LogGamma(n - k + 1) - LogGamma(n + 1));
}

absl::StatusOr<CohortGraphParameters> GraphParametersFor(int cohort_size, double adversarial_rate,
                                                         double dropout_rate) {
  if (cohort_size < 3 || cohort_size > kGraphParametersMaxCohort) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secure aggregation's graph: a cohort of ", cohort_size, " clients is outside [3, ", kGraphParametersMaxCohort,
        "] (fewer than 3 leave no threshold above half of a client's neighbours)"));
  }
  if (!(adversarial_rate >= 0 && adversarial_rate < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secure aggregation's graph: the adversarial rate ", adversarial_rate,
        " must be in [0, 1): the fraction of a cohort's clients that may collude with the relay and the root"));
  }
  if (!(dropout_rate >= 0 && dropout_rate < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("secure aggregation's graph: the dropout rate ", dropout_rate,
                                                   " must be in [0, 1): the fraction of a cohort's clients that may "
                                                   "drop out or be left out of the sum"));
  }
  const int n = cohort_size;
  const int adversarial = ClientsAtRate(adversarial_rate, n);
  const int dropped = ClientsAtRate(dropout_rate, n);
  const int bad = std::min(adversarial + dropped, n);
  // Each bound over the n clients' neighbourhoods, hence the ln n.
  const double log_security = -(kGraphSecurityBits + 1) * kLog2 - std::log(n);
  const double log_failure = -kGraphFailureBits * kLog2 - std::log(n);
  const double log_connectivity = -(kGraphSecurityBits + 1) * kLog2;

  // t1 and t_high (graph_parameters.h) for `neighbours` neighbours, then the lowest
  // threshold that security allows with `degree` declared, if correctness allows it too.
  int t1 = 0, t_high = 0, last_neighbours = 0;  // with no neighbours, A = S = 0
  const auto threshold_for = [&](int neighbours, int degree) -> int {
    const int others = n - 1;
    t1 = SmallestUpperBound(others, adversarial, neighbours, t1, log_security);
    t_high = LargestLowerBound(others, others - dropped, neighbours,
                               std::min(t_high + neighbours - last_neighbours, neighbours), log_failure);
    last_neighbours = neighbours;
    const int t_low = std::max((neighbours + t1) / 2, degree / 2) + 1;
    return t_low <= t_high ? t_low : 0;
  };
  for (int k = 2; k < n - 1; k += 2) {
    const int threshold = threshold_for(k, k);
    if (threshold != 0 && LogHararyDisconnectionBound(n, k, bad) < log_connectivity) {
      return CohortGraphParameters{k, threshold};
    }
  }
  // The complete graph: connected whatever is removed.
  const int degree = (n - 1) % 2 == 0 ? n - 1 : n;
  if (const int threshold = threshold_for(n - 1, degree); threshold != 0) {
    return CohortGraphParameters{degree, threshold};
  }
  const std::string what =
      absl::StrCat("secure aggregation's graph: no degree keeps a cohort of ", n, " clients with ",
                   adversarial_rate * 100, "% adversarial and ", dropout_rate * 100, "% dropping out secure (2^-",
                   kGraphSecurityBits, ") and its secrets recoverable (2^-", kGraphFailureBits, "): ");
  if (adversarial_rate + 2 * dropout_rate >= 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, "no cohort size can, since the threshold must exceed half of the neighbours plus half of the "
              "adversarial ones, yet at most the surviving ones hold shares; lower the rates so that "
              "adversarial + 2 x dropout < 1"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(what, "give a larger cohort (or lower rates), so that the fractions of adversarial and surviving "
                         "neighbours are closer to their rates"));
}

}  // namespace fedagg
