// SecAgg+'s degree and threshold from the adversarial and dropout rates: the hypergeometric
// tails against exact counts (small populations) and a full long-double sum (100,000), the
// disconnection bound against every removal from small rings, the search against a
// from-scratch one, monotonicity in the rates, refusals, and a Monte Carlo check that the
// chosen graph keeps its promises over random orders, adversaries and dropouts.
#include "service/secagg/graph_parameters.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/secagg/neighbour_graph.h"

namespace fedagg {
namespace {

// Pascal's triangle up to 60: every entry, and every sum of products below, fits in 64 bits.
std::vector<std::vector<uint64_t>> Binomials(int max) {
  std::vector<std::vector<uint64_t>> c(max + 1, std::vector<uint64_t>(max + 1, 0));
  for (int n = 0; n <= max; ++n) {
    c[n][0] = 1;
    for (int r = 1; r <= n; ++r) c[n][r] = c[n - 1][r - 1] + c[n - 1][r];
  }
  return c;
}

void ExpectLogProbability(double log_actual, long double expected, const std::string& where) {
  if (expected == 0) {
    EXPECT_EQ(log_actual, -std::numeric_limits<double>::infinity()) << where;
  } else {
    EXPECT_NEAR(log_actual, static_cast<double>(std::log(expected)), 1e-12) << where;
  }
}

TEST(GraphParametersTest, TailsMatchExactCountsForSmallPopulations) {
  const std::vector<std::vector<uint64_t>> c = Binomials(60);
  for (int n : {1, 2, 3, 5, 8, 13, 21, 34, 60}) {
    for (int successes = 0; successes <= n; ++successes) {
      for (int draws = 0; draws <= n; ++draws) {
        // count[x]: the draws with x successes; they add up to c[n][draws].
        std::vector<uint64_t> count(draws + 1, 0);
        for (int x = 0; x <= draws; ++x) {
          if (x <= successes && draws - x <= n - successes) count[x] = c[successes][x] * c[n - successes][draws - x];
        }
        const long double all = static_cast<long double>(c[n][draws]);
        for (int a = -1; a <= draws + 1; ++a) {
          uint64_t above = 0, below = 0;
          for (int x = 0; x <= draws; ++x) {
            if (x > a) above += count[x];
            if (x < a) below += count[x];
          }
          const std::string where = "N=" + std::to_string(n) + " K=" + std::to_string(successes) +
                                    " k=" + std::to_string(draws) + " a=" + std::to_string(a);
          ExpectLogProbability(LogHypergeometricTailAbove(n, successes, draws, a), above / all, where + " above");
          ExpectLogProbability(LogHypergeometricTailBelow(n, successes, draws, a), below / all, where + " below");
        }
      }
    }
  }
}

// ln P[X = x] for every x in the support, each from lgammal, summed in long double: no
// walk, no cut-off.
long double ReferenceLogTail(int n, int successes, int draws, int from, int to) {
  const auto log_choose = [](long double a, long double b) {
    return std::lgamma(a + 1) - std::lgamma(b + 1) - std::lgamma(a - b + 1);
  };
  from = std::max({from, 0, draws - (n - successes)});
  to = std::min({to, draws, successes});
  std::vector<long double> logs;
  for (int x = from; x <= to; ++x) {
    logs.push_back(log_choose(successes, x) + log_choose(n - successes, draws - x) - log_choose(n, draws));
  }
  const long double top = *std::max_element(logs.begin(), logs.end());
  long double sum = 0;
  for (long double l : logs) sum += std::exp(l - top);
  return top + std::log(sum);
}

TEST(GraphParametersTest, TailsAtLargePopulationsMatchAFullSum) {
  struct Case {
    int n, successes, draws;
  };
  for (const Case& c : {Case{99999, 5000, 900}, Case{99999, 66700, 900}, Case{99999, 33300, 20000},
                        Case{99999, 50000, 99000}, Case{100000, 10, 50000}, Case{9999, 500, 750}}) {
    const double mean = static_cast<double>(c.draws) * c.successes / c.n;
    const double spread = std::sqrt(mean) + 1;
    for (double z : {-12.0, -8.0, -3.0, 0.0, 2.0, 6.0, 9.0, 14.0}) {
      const int a = static_cast<int>(std::lround(mean + z * spread));
      const std::string where = "N=" + std::to_string(c.n) + " K=" + std::to_string(c.successes) +
                                " k=" + std::to_string(c.draws) + " a=" + std::to_string(a);
      if (a + 1 <= std::min(c.draws, c.successes)) {
        EXPECT_NEAR(LogHypergeometricTailAbove(c.n, c.successes, c.draws, a),
                    static_cast<double>(ReferenceLogTail(c.n, c.successes, c.draws, a + 1, c.draws)), 1e-10)
            << where;
      }
      if (a - 1 >= std::max(0, c.draws - (c.n - c.successes))) {
        EXPECT_NEAR(LogHypergeometricTailBelow(c.n, c.successes, c.draws, a),
                    static_cast<double>(ReferenceLogTail(c.n, c.successes, c.draws, 0, a - 1)), 1e-10)
            << where;
      }
    }
  }
}

// H(n, k) over positions 0..n-1 of a ring, with the positions in `removed` taken out:
// are the rest connected?
bool RingRestConnected(int n, int k, const std::vector<char>& removed) {
  std::vector<int> rest;
  for (int p = 0; p < n; ++p) {
    if (!removed[p]) rest.push_back(p);
  }
  if (rest.size() <= 1) return true;
  std::vector<char> seen(static_cast<size_t>(n), 0);
  std::vector<int> stack = {rest[0]};
  seen[static_cast<size_t>(rest[0])] = 1;
  size_t reached = 1;
  while (!stack.empty()) {
    const int p = stack.back();
    stack.pop_back();
    for (int step = -k / 2; step <= k / 2; ++step) {
      const size_t q = static_cast<size_t>((p + step + n) % n);  // |step| < n
      if (step == 0 || removed[q] || seen[q]) continue;
      seen[q] = 1;
      ++reached;
      stack.push_back(static_cast<int>(q));
    }
  }
  return reached == rest.size();
}

TEST(GraphParametersTest, DisconnectionBoundCoversEveryRemovalFromSmallRings) {
  for (int n = 5; n <= 14; ++n) {
    for (int k = 2; k <= n - 2; k += 2) {
      std::vector<int> removals(n + 1, 0), disconnected(n + 1, 0);
      for (uint32_t set = 0; set < (1u << n); ++set) {
        std::vector<char> removed(static_cast<size_t>(n));
        for (int p = 0; p < n; ++p) removed[p] = (set >> p) & 1;
        const int bad = std::popcount(set);
        ++removals[bad];
        if (!RingRestConnected(n, k, removed)) ++disconnected[bad];
      }
      for (int bad = 0; bad <= n; ++bad) {
        const double exact = static_cast<double>(disconnected[bad]) / removals[bad];
        const double bound = std::exp(LogHararyDisconnectionBound(n, k, bad));
        EXPECT_LE(exact, bound * (1 + 1e-12)) << "n=" << n << " k=" << k << " bad=" << bad;
        if (bad < k) {
          EXPECT_EQ(bound, 0) << "n=" << n << " k=" << k << " bad=" << bad;
        }
      }
    }
  }
}

int CountAtRate(double rate, int n) { return static_cast<int>(std::floor(rate * n + 1e-9)); }

// The rules of graph_parameters.h, each bound found from scratch for each degree.
absl::StatusOr<CohortGraphParameters> FromScratch(int n, double gamma, double delta) {
  const int adversarial = CountAtRate(gamma, n), dropped = CountAtRate(delta, n);
  const double log_security = -41 * std::log(2.0) - std::log(n);
  const double log_failure = -20 * std::log(2.0) - std::log(n);
  const auto threshold = [&](int neighbours, int degree) {
    int t1 = 0;
    while (LogHypergeometricTailAbove(n - 1, adversarial, neighbours, t1) > log_security) ++t1;
    int t_high = neighbours;
    while (LogHypergeometricTailBelow(n - 1, n - 1 - dropped, neighbours, t_high) > log_failure) --t_high;
    const int t_low = std::max((neighbours + t1) / 2, degree / 2) + 1;
    return t_low <= t_high ? t_low : 0;
  };
  for (int k = 2; k < n - 1; k += 2) {
    if (LogHararyDisconnectionBound(n, k, std::min(adversarial + dropped, n)) >= -41 * std::log(2.0)) continue;
    if (const int t = threshold(k, k); t != 0) return CohortGraphParameters{k, t};
  }
  const int degree = n % 2 == 0 ? n : n - 1;
  if (const int t = threshold(n - 1, degree); t != 0) return CohortGraphParameters{degree, t};
  return absl::FailedPreconditionError("none");
}

TEST(GraphParametersTest, TheSearchFindsTheSmallestDegreeMeetingTheBounds) {
  for (int n : {3, 4, 5, 6, 7, 8, 10, 16, 33, 64, 101, 250, 600}) {
    for (double gamma : {0.0, 0.02, 0.1, 0.2, 0.3}) {
      for (double delta : {0.0, 0.05, 0.15, 0.3, 0.4}) {
        const absl::StatusOr<CohortGraphParameters> got = GraphParametersFor(n, gamma, delta);
        const absl::StatusOr<CohortGraphParameters> want = FromScratch(n, gamma, delta);
        const std::string where =
            "n=" + std::to_string(n) + " gamma=" + std::to_string(gamma) + " delta=" + std::to_string(delta);
        ASSERT_EQ(got.ok(), want.ok()) << where << ": " << got.status();
        if (!got.ok()) {
          EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << where;
          continue;
        }
        EXPECT_EQ(got->degree, want->degree) << where;
        EXPECT_EQ(got->threshold, want->threshold) << where;
        // What neighbour_graph.h and CheckSecureAggregation accept.
        const int neighbours = std::min(got->degree, n - 1);
        EXPECT_TRUE(got->degree >= 2 && got->degree % 2 == 0) << where;
        EXPECT_GT(2 * got->threshold, got->degree) << where;
        EXPECT_LE(got->threshold, neighbours) << where;
        EXPECT_GE(got->threshold, 2) << where;
      }
    }
  }
}

TEST(GraphParametersTest, MoreAdversariesOrDropoutsNeverLowerTheDegree) {
  for (int n : {100, 1000}) {
    const auto degree = [n](int gamma_step, int delta_step) {
      const absl::StatusOr<CohortGraphParameters> p = GraphParametersFor(n, 0.02 * gamma_step, 0.03 * delta_step);
      return p.ok() ? p->degree : std::numeric_limits<int>::max();  // refused: above every degree
    };
    for (int g = 0; g < 16; ++g) {
      for (int d = 0; d < 16; ++d) {
        EXPECT_LE(degree(g, d), degree(g + 1, d)) << "n=" << n << " gamma step " << g << " delta step " << d;
        EXPECT_LE(degree(g, d), degree(g, d + 1)) << "n=" << n << " gamma step " << g << " delta step " << d;
      }
    }
  }
}

TEST(GraphParametersTest, KnownPoints) {
  // Nobody adversarial, nobody dropping: a ring, every neighbour needed.
  for (int n : {3, 4, 100, 100000}) {
    const absl::StatusOr<CohortGraphParameters> p = GraphParametersFor(n, 0, 0);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->degree, 2) << n;
    EXPECT_EQ(p->threshold, 2) << n;
  }
  // A cohort of 1,000, 5% adversarial, a third dropping: below the complete graph, and at
  // least what connectivity alone asks with 50 + 330 removed.
  const absl::StatusOr<CohortGraphParameters> p = GraphParametersFor(1000, 0.05, 0.33);
  ASSERT_TRUE(p.ok()) << p.status();
  int connected = 2;
  while (LogHararyDisconnectionBound(1000, connected, 380) >= -41 * std::log(2.0)) connected += 2;
  EXPECT_GE(p->degree, connected);
  EXPECT_LT(p->degree, 999);
  RecordProperty("connectivity_degree_1000_0.05_0.33", connected);
  RecordProperty("degree_1000_0.05_0.33", p->degree);
  RecordProperty("threshold_1000_0.05_0.33", p->threshold);
  // 10 clients, 2 adversarial, 3 dropping: only the complete graph serves; its 9
  // neighbours are declared as the even degree 10, and t = 6 = 9 - 3 > (9 + 2) / 2.
  const absl::StatusOr<CohortGraphParameters> complete = GraphParametersFor(10, 0.2, 0.3);
  ASSERT_TRUE(complete.ok()) << complete.status();
  EXPECT_EQ(complete->degree, 10);
  EXPECT_EQ(complete->threshold, 6);
}

TEST(GraphParametersTest, Refusals) {
  for (int n : {-1, 0, 1, 2, kGraphParametersMaxCohort + 1}) {
    EXPECT_EQ(GraphParametersFor(n, 0, 0).status().code(), absl::StatusCode::kInvalidArgument) << n;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (double rate : {-0.01, 1.0, 1.5, nan, inf, -inf}) {
    EXPECT_EQ(GraphParametersFor(100, rate, 0).status().code(), absl::StatusCode::kInvalidArgument) << rate;
    EXPECT_EQ(GraphParametersFor(100, 0, rate).status().code(), absl::StatusCode::kInvalidArgument) << rate;
  }
  // No cohort size serves 30% adversarial with 35% dropping out.
  const absl::Status hopeless = GraphParametersFor(10000, 0.3, 0.35).status();
  EXPECT_EQ(hopeless.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(hopeless.message().find("adversarial + 2 x dropout < 1"), absl::string_view::npos) << hopeless;
  // A larger cohort would: 8 clients with 40% dropping out cannot, 20 can.
  const absl::Status small = GraphParametersFor(8, 0, 0.4).status();
  EXPECT_EQ(small.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(small.message().find("give a larger cohort"), absl::string_view::npos) << small;
  EXPECT_TRUE(GraphParametersFor(20, 0, 0.4).ok());
}

// Over 2,000 random orders, each with 5% of the cohort adversarial and 20% dropped (disjoint:
// the worst case), the chosen graph keeps all three promises for every client.
TEST(GraphParametersTest, MonteCarloOrdersKeepThePromises) {
  constexpr int kClients = 200;
  const absl::StatusOr<CohortGraphParameters> p = GraphParametersFor(kClients, 0.05, 0.2);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_LT(p->degree, kClients - 1);  // a Harary graph, not the complete one
  const int k = p->degree, t = p->threshold;
  std::mt19937_64 random(20240611);
  std::vector<int> clients(kClients);
  std::iota(clients.begin(), clients.end(), 0);
  int fewest_survivors = k, most_adversarial = 0;
  for (int sample = 0; sample < 2000; ++sample) {
    MaskSeed seed;
    for (uint8_t& byte : seed.bytes) byte = static_cast<uint8_t>(random());
    absl::StatusOr<NeighbourGraph> graph = NeighbourGraph::Harary(kClients, k, seed);
    ASSERT_TRUE(graph.ok()) << graph.status();
    std::shuffle(clients.begin(), clients.end(), random);
    std::vector<char> adversarial(kClients, 0), dropped(kClients, 0);
    for (int i = 0; i < 10; ++i) adversarial[clients[i]] = 1;
    for (int i = 10; i < 50; ++i) dropped[clients[i]] = 1;
    for (int c = 0; c < kClients; ++c) {
      int survivors = 0, adversaries = 0;
      for (int v : graph->NeighboursOf(c)) {
        survivors += !dropped[v];
        adversaries += adversarial[v];
      }
      fewest_survivors = std::min(fewest_survivors, survivors);
      ASSERT_GE(survivors, t) << "sample " << sample << ", client " << c;  // its secrets recoverable
      if (!adversarial[c]) {
        most_adversarial = std::max(most_adversarial, adversaries);
        ASSERT_GT(2 * t, k + adversaries) << "sample " << sample << ", client " << c;  // never both secrets
      }
    }
    // The honest survivors are connected.
    std::vector<char> seen(kClients, 0);
    int start = 0;
    while (adversarial[start] || dropped[start]) ++start;
    std::vector<int> stack = {start};
    seen[start] = 1;
    int reached = 1;
    while (!stack.empty()) {
      const int c = stack.back();
      stack.pop_back();
      for (int v : graph->NeighboursOf(c)) {
        if (seen[v] || adversarial[v] || dropped[v]) continue;
        seen[v] = 1;
        ++reached;
        stack.push_back(v);
      }
    }
    ASSERT_EQ(reached, kClients - 50) << "sample " << sample;
  }
  RecordProperty("fewest_surviving_neighbours", fewest_survivors);
  RecordProperty("most_adversarial_neighbours", most_adversarial);
}

}  // namespace
}  // namespace fedagg
