// The bytes of secure aggregation's sealed share messages (before sealing, after opening):
// little-endian, fixed widths, read back only after the box authenticated them, and still
// checked for length and range so that a bug can never read past them.
//   a share:        x (uint32), limbs (uint32), limb values (uint64 each)
//   stage 1:        the share of the self-mask seed, then the share of the mask key
//   stage 3 entry:  owner (uint32), kind (uint8: 0 self-mask seed, 1 mask key), a share
#ifndef FEDAGG_SERVICE_SECAGG_SHARE_CODEC_H_
#define FEDAGG_SERVICE_SECAGG_SHARE_CODEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/secagg/shamir.h"

namespace fedagg {

enum class SecretKind : uint8_t { kSelfMaskSeed = 0, kMaskKey = 1 };

struct RevealedShare {
  int owner = 0;  // whose secret it is a share of
  SecretKind kind = SecretKind::kSelfMaskSeed;
  ShamirShare share;
};

std::string EncodeKeyShares(const ShamirShare& self_mask_seed, const ShamirShare& mask_key);
absl::StatusOr<std::pair<ShamirShare, ShamirShare>> DecodeKeyShares(const std::string& bytes);

std::string EncodeRevealedShares(const std::vector<RevealedShare>& shares);
absl::StatusOr<std::vector<RevealedShare>> DecodeRevealedShares(const std::string& bytes);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_SECAGG_SHARE_CODEC_H_
