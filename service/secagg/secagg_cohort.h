// What every party of one secure-aggregation cohort knows, and the messages they pass
// (docs/SEMANTICS.md, "Secure aggregation"): a cohort is the clients of one leaf node in
// one aggregation, indexed 0..n-1 in the roster the root hands out after they advertised
// their keys. The leaf relays the messages and adds the masked inputs modulo 2^32; only
// the root, holding the key the unmasking shares are sealed to, removes the masks.
//
// Stages: 0 advertise keys (AdvertisedKeys) -> 1 share keys (SharedKeys, one sealed per
// neighbour) -> 2 masked input (a vector per field) -> 3 unmasking (UnmaskingShares,
// sealed to the root). Between stages the leaf says who went on: `shared` (sent their
// shares in stage 1) and `masked` (their masked input is in the sum).
#ifndef FEDAGG_SERVICE_SECAGG_SECAGG_COHORT_H_
#define FEDAGG_SERVICE_SECAGG_SECAGG_COHORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "service/secagg/key_agreement.h"
#include "service/secagg/neighbour_graph.h"

namespace fedagg {

struct AdvertisedKeys {
  Key32 channel_public_key{};  // shares travel under keys agreed from it
  Key32 mask_public_key{};     // pairwise masks are seeded from it
};

struct SecAggCohort {
  // Binds every derived key and sealed message to one aggregation (its id and incarnation).
  std::string context;
  int threshold = 0;              // shares needed to recover a client's secrets
  NeighbourGraph graph;
  std::vector<AdvertisedKeys> keys;  // by client index
  Key32 root_public_key{};        // the unmasking shares are sealed to it
  std::vector<size_t> field_sizes;  // coordinates of each field
  int bits = 32;                  // the sum is taken modulo 2^bits (8..32)

  int clients() const { return graph.clients(); }
};

// Stage 1: client `from`'s shares of its two secrets for neighbour `to`, sealed to `to`.
struct SharedKeys {
  int from = 0;
  int to = 0;
  std::string sealed;
};

// Stage 3: a survivor's shares of its neighbours' secrets, sealed to the root.
struct UnmaskingShares {
  int from = 0;
  std::string sealed;
};

// Stage labels in associated data and key contexts.
inline constexpr char kShareChannelContext[] = "fedagg secagg share channel";
inline constexpr char kRootChannelContext[] = "fedagg secagg root channel";
inline constexpr char kPairwiseMaskContext[] = "fedagg secagg pairwise mask";

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_SECAGG_SECAGG_COHORT_H_
