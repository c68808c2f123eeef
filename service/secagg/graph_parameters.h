// SecAgg+'s degree and threshold from a threat model (Bell et al., CCS 2020, worked out
// here for fedagg): for a cohort of n clients of which a fraction gamma may collude with
// the relay and the root and a fraction delta may drop out, the smallest Harary graph
// (neighbour_graph.h) and its Shamir threshold t such that, over the graph's random order,
//
//   security (all but 2^-40): the adversary learns nothing but the sum of the honest
//     clients in it, and
//   correctness (all but 2^-20): every secret the root needs has t surviving shareholders.
//
// With Na = floor(gamma n) adversarial and Nd = floor(delta n) dropped clients, a client's
// k neighbours are a uniform k-subset of the other n - 1, so (each a union bound over the
// n clients; each distribution is the exact one, population n - 1, which is a little
// more conservative than population n):
//
//  1. Connectivity (2^-41): removing the B = min(Na + Nd, n) bad clients leaves the rest
//     connected. Two survivors are cut apart only by k/2 consecutive bad clients on each
//     of the two arcs of the ring between them, so with n (n - k - 1) / 2 pairs of such
//     windows, each all bad with probability B!/(B-k)! * (n-k)!/n! (0 when k > B):
//     LogHararyDisconnectionBound(n, k, B) < -41 ln 2.
//  2. Security (2^-41): A ~ Hypergeometric(n - 1, Na, k) adversarial neighbours; t1 is the
//     smallest a with P[A > a] <= 2^-41 / n. The relay may lie about who dropped, telling
//     some honest neighbours of a client that it is in the sum (they reveal shares of its
//     self-mask seed) and the others that it is not (shares of its mask key); the
//     adversary holds both shares of its A neighbours, so it gets both secrets when the
//     k - A honest ones split into two groups each reaching t - A, i.e. when k + A >= 2t.
//     Enforced: 2t > k + t1, i.e. t >= floor((k + t1) / 2) + 1 (which implies t > t1 and
//     t > k / 2).
//  3. Correctness (2^-20): S ~ Hypergeometric(n - 1, n - 1 - Nd, k) surviving neighbours;
//     t_high is the largest s with P[S < s] <= 2^-20 / n, and t <= t_high.
//
// The degree is the smallest even k in [2, n - 1) meeting all three, with t the lowest
// threshold that 2 allows; else the complete graph (n - 1 neighbours, declared as the even
// degree n - 1 or n that neighbour_graph.h accepts; t also above half that declared
// degree, as CheckSecureAggregation asks), where 1 always holds. Adversarial clients count
// as survivors for 3: delta must cover those that may withhold their shares, and every
// client the relay leaves out of the sum. For large n this needs gamma + 2 delta < 1.
#ifndef FEDAGG_SERVICE_SECAGG_GRAPH_PARAMETERS_H_
#define FEDAGG_SERVICE_SECAGG_GRAPH_PARAMETERS_H_

#include "absl/status/statusor.h"

namespace fedagg {

struct CohortGraphParameters {
  int degree = 0;     // even, >= 2 (SecureCohortOptions::degree): min(degree, n - 1) neighbours
  int threshold = 0;  // in (degree / 2, min(degree, n - 1)]
};

inline constexpr int kGraphParametersMaxCohort = 100000;
inline constexpr int kGraphSecurityBits = 40;
inline constexpr int kGraphFailureBits = 20;

// The degree and threshold for a cohort of `cohort_size` clients in [3,
// kGraphParametersMaxCohort], `adversarial_rate` (gamma) and `dropout_rate` (delta) each in
// [0, 1): INVALID_ARGUMENT outside those; FAILED_PRECONDITION, saying what to change, when
// even the complete graph misses the bounds. Every even degree up to the answer is tried:
// about 0.3 s (optimized) for a cohort of 100,000 that no degree serves.
absl::StatusOr<CohortGraphParameters> GraphParametersFor(int cohort_size, double adversarial_rate,
                                                         double dropout_rate);

// For X ~ Hypergeometric(population, successes, draws) (0 <= successes, draws <=
// population): ln P[X > a] and ln P[X < s]; -infinity for an empty tail. Summed from the
// tail's largest term outward; within 1e-10 of the exact log for populations up to 100,000
// (with an 80-bit long double; about 1e-9 where long double is double).
double LogHypergeometricTailAbove(int population, int successes, int draws, int a);
double LogHypergeometricTailBelow(int population, int successes, int draws, int s);

// ln of the union bound in 1 on the probability that H(clients, degree) over a uniformly
// random order is disconnected once `bad` clients are removed (degree even, in [2,
// clients - 2]); -infinity when degree > bad.
double LogHararyDisconnectionBound(int clients, int degree, int bad);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_SECAGG_GRAPH_PARAMETERS_H_
