// SecAggUnmasker: the root's side of a secure-aggregation cohort. It holds the X25519 pair
// the survivors seal their unmasking shares to, opens them, recovers (Shamir) the
// self-mask seed of every client whose masked input is in the sum and the mask key of
// every client that shared keys but whose input is not, and removes from the cohort's
// masked sum the self masks and the pairwise masks that did not cancel — the bulk of it
// expanding a model-sized mask per seed (MaskAccumulator, on every core).
// Refusals: FAILED_PRECONDITION when a secret it needs has fewer shares than the
// threshold (the aggregation fails: too many dropped), DATA_LOSS when a share does not
// open, disagrees with the others, or reveals a secret the sums say must stay hidden (the
// relay that says who is in the sum told the clients something else).
#ifndef FEDAGG_SERVICE_SECAGG_SECAGG_UNMASKER_H_
#define FEDAGG_SERVICE_SECAGG_SECAGG_UNMASKER_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/core/thread_pool.h"
#include "service/secagg/key_agreement.h"
#include "service/secagg/mask_expansion.h"
#include "service/secagg/secagg_cohort.h"

namespace fedagg {

class SecAggUnmasker {
 public:
  // Adds the signed masks of seeds into one field's sum: MaskAccumulator on the host's
  // cores by default; a device's (cuda/device_masks.h) gives the same words.
  using MaskAdder =
      std::function<absl::Status(absl::Span<const SignedMaskSeed> seeds, uint32_t field, absl::Span<uint32_t> sum)>;

  static absl::StatusOr<SecAggUnmasker> Create();
  // The unmasker of a kept private key (a restarted root's, from its checkpoint).
  static absl::StatusOr<SecAggUnmasker> FromPrivateKey(const Key32& private_key);

  const Key32& public_key() const { return key_.public_key(); }
  // The secret every unmasking share is sealed to: only for the root's checkpoint.
  Key32 private_key() const { return key_.private_key(); }

  // `shared[c]`: client c sent its shares (stage 1); `masked[c]`: its masked input is in
  // `masked_sum` (per field, the inputs added modulo 2^32 as the leaf added them). Returns
  // the plain sum of those clients' inputs per field, modulo 2^bits.
  absl::StatusOr<std::vector<std::vector<uint32_t>>> Unmask(const SecAggCohort& cohort, const std::vector<bool>& shared,
                                                            const std::vector<bool>& masked,
                                                            absl::Span<const UnmaskingShares> responses,
                                                            std::vector<std::vector<uint32_t>> masked_sum,
                                                            ThreadPool* pool = nullptr,
                                                            const MaskAdder& add_masks = nullptr) const;

 private:
  explicit SecAggUnmasker(X25519KeyPair key) : key_(std::move(key)) {}

  X25519KeyPair key_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_SECAGG_SECAGG_UNMASKER_H_
