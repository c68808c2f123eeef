// SecAgg+'s Harary graph over a seeded random order of the cohort.
#include "service/secagg/neighbour_graph.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "service/core/keyed_random.h"

namespace fedagg {

absl::StatusOr<NeighbourGraph> NeighbourGraph::Harary(int clients, int degree, const MaskSeed& order_seed) {
  if (clients < 2) return absl::InvalidArgumentError(absl::StrCat("a cohort of ", clients, " client(s) has no neighbours"));
  if (degree < 2 || degree % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the neighbour degree must be even and at least 2; got ", degree));
  }
  NeighbourGraph graph;
  graph.neighbours_.resize(static_cast<size_t>(clients));
  if (degree >= clients - 1) {
    graph.degree_ = clients - 1;
    for (int a = 0; a < clients; ++a) {
      for (int b = 0; b < clients; ++b) {
        if (a != b) graph.neighbours_[a].push_back(b);
      }
    }
    return graph;
  }
  graph.degree_ = degree;
  // The order: a Fisher-Yates shuffle drawn from the seed's ChaCha20 stream.
  NoiseKey key;
  key.bytes = order_seed.bytes;
  KeyedRandom random(key, /*stream=*/0x67726170, /*substream=*/0);  // "grap"
  std::vector<int> order(static_cast<size_t>(clients));
  std::iota(order.begin(), order.end(), 0);
  for (int i = clients - 1; i > 0; --i) {
    const int j = static_cast<int>(random.Below(static_cast<uint128>(i) + 1));
    std::swap(order[i], order[j]);
  }
  for (int position = 0; position < clients; ++position) {
    for (int step = 1; step <= degree / 2; ++step) {
      const int a = order[position];
      const int b = order[(position + step) % clients];
      graph.neighbours_[a].push_back(b);
      graph.neighbours_[b].push_back(a);
    }
  }
  for (std::vector<int>& list : graph.neighbours_) std::sort(list.begin(), list.end());
  return graph;
}

bool NeighbourGraph::AreNeighbours(int a, int b) const {
  const std::vector<int>& list = neighbours_[a];
  return std::binary_search(list.begin(), list.end(), b);
}

}  // namespace fedagg
