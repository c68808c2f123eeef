// SecAggClient: one client's side of a secure-aggregation cohort (secagg_cohort.h), its
// secrets kept from stage to stage: two X25519 pairs (the channel its shares travel on,
// the key its pairwise masks are agreed from) and a self-mask seed.
//   1 ShareKeys: Shamir-shares the seed and the mask key (threshold t) among its
//     neighbours, each share sealed to that neighbour;
//   2 MaskInput: its input (per field, integers modulo 2^b) plus its self mask, plus or
//     minus the pairwise mask with every neighbour that shared keys (plus towards higher
//     indices, minus towards lower ones, so each pair cancels in the sum);
//   3 Unmask: for each neighbour whose shares it holds, the share of its seed if that
//     neighbour's masked input is in the sum, of its mask key if not — never both —
//     sealed to the root.
#ifndef FEDAGG_SERVICE_SECAGG_SECAGG_CLIENT_H_
#define FEDAGG_SERVICE_SECAGG_SECAGG_CLIENT_H_

#include <map>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/secagg/mask_expansion.h"
#include "service/secagg/secagg_cohort.h"
#include "service/secagg/shamir.h"

namespace fedagg {

class SecAggClient {
 public:
  static absl::StatusOr<SecAggClient> Create();

  AdvertisedKeys keys() const { return {channel_.public_key(), mask_.public_key()}; }

  // Stage 1, as client `index` of `cohort`: one sealed message per neighbour.
  absl::StatusOr<std::vector<SharedKeys>> ShareKeys(const SecAggCohort& cohort, int index);
  // Stage 2: the shares the neighbours sent this client (their senders are the neighbours
  // its pairwise masks include), and its input, one vector per field. DATA_LOSS for a
  // share that does not open (changed on its way, or not for this client).
  absl::StatusOr<std::vector<std::vector<uint32_t>>> MaskInput(const SecAggCohort& cohort,
                                                               absl::Span<const SharedKeys> received,
                                                               absl::Span<const std::vector<uint32_t>> input);
  // Stage 3: `masked[c]` says whether client c's masked input is in the sum. Refuses
  // (FAILED_PRECONDITION) when fewer than the threshold are, or when it says this client's
  // is not.
  absl::StatusOr<UnmaskingShares> Unmask(const SecAggCohort& cohort, const std::vector<bool>& masked);

 private:
  SecAggClient(X25519KeyPair channel, X25519KeyPair mask, MaskSeed self_seed)
      : channel_(std::move(channel)), mask_(std::move(mask)), self_seed_(self_seed) {}

  X25519KeyPair channel_;
  X25519KeyPair mask_;
  MaskSeed self_seed_;
  int index_ = -1;
  // The shares received in stage 1, by sender: (its seed's share, its mask key's share).
  std::map<int, std::pair<ShamirShare, ShamirShare>> held_;
};

// The associated data of a stage-1 message from `from` to `to`, and of `from`'s stage-3
// message to the root.
std::string ShareKeysAssociatedData(const SecAggCohort& cohort, int from, int to);
std::string UnmaskingAssociatedData(const SecAggCohort& cohort, int from);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_SECAGG_SECAGG_CLIENT_H_
