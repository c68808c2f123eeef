// NeighbourGraph: whom each client of a cohort (a leaf node's clients in one secure
// aggregation) shares masks and secrets with, as in SecAgg+ (Bell et al., CCS 2020): a
// Harary graph H(k, n) — each client linked to the k/2 clients before and after it around
// a ring — over a random order of the cohort, so each client has k neighbours, not n - 1,
// and the work and messages per client grow with k. The order comes from a seed the root
// draws, so every party computes the same graph; k >= n - 1 is the complete graph
// (classic SecAgg).
#ifndef FEDAGG_SERVICE_SECAGG_NEIGHBOUR_GRAPH_H_
#define FEDAGG_SERVICE_SECAGG_NEIGHBOUR_GRAPH_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/secagg/mask_expansion.h"

namespace fedagg {

class NeighbourGraph {
 public:
  // `clients` >= 2; `degree` even and >= 2 (capped at clients - 1).
  static absl::StatusOr<NeighbourGraph> Harary(int clients, int degree, const MaskSeed& order_seed);

  int clients() const { return static_cast<int>(neighbours_.size()); }
  int degree() const { return degree_; }
  // Client `client`'s neighbours, ascending.
  absl::Span<const int> NeighboursOf(int client) const { return neighbours_[client]; }
  bool AreNeighbours(int a, int b) const;

 private:
  int degree_ = 0;
  std::vector<std::vector<int>> neighbours_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_SECAGG_NEIGHBOUR_GRAPH_H_
