// A secure-aggregation client's stages: sharing, masking, unmasking.
#include "service/secagg/secagg_client.h"

#include <openssl/rand.h>

#include "absl/strings/str_cat.h"
#include "service/secagg/sealed_box.h"
#include "service/secagg/share_codec.h"

namespace fedagg {

std::string ShareKeysAssociatedData(const SecAggCohort& cohort, int from, int to) {
  return absl::StrCat(cohort.context, "|share-keys|", from, "|", to);
}

std::string UnmaskingAssociatedData(const SecAggCohort& cohort, int from) {
  return absl::StrCat(cohort.context, "|unmasking|", from);
}

absl::StatusOr<SecAggClient> SecAggClient::Create() {
  absl::StatusOr<X25519KeyPair> channel = X25519KeyPair::Generate();
  if (!channel.ok()) return channel.status();
  absl::StatusOr<X25519KeyPair> mask = X25519KeyPair::Generate();
  if (!mask.ok()) return mask.status();
  MaskSeed seed;
  if (RAND_bytes(seed.bytes.data(), static_cast<int>(seed.bytes.size())) != 1) {
    return absl::InternalError("the system's secure random source (OpenSSL RAND_bytes) failed; no self-mask seed");
  }
  return SecAggClient(*std::move(channel), *std::move(mask), seed);
}

absl::StatusOr<std::vector<SharedKeys>> SecAggClient::ShareKeys(const SecAggCohort& cohort, int index) {
  if (index < 0 || index >= cohort.clients()) {
    return absl::InvalidArgumentError(absl::StrCat("client index ", index, " is not in a cohort of ", cohort.clients()));
  }
  index_ = index;
  // Point x of a share is its receiver's index + 1, the same for every sender.
  absl::Span<const int> neighbours = cohort.graph.NeighboursOf(index);
  std::vector<uint32_t> points;
  for (int neighbour : neighbours) points.push_back(static_cast<uint32_t>(neighbour) + 1);
  absl::StatusOr<std::vector<ShamirShare>> seed_shares = ShareSecret(self_seed_.bytes, cohort.threshold, points);
  if (!seed_shares.ok()) return seed_shares.status();
  const Key32 mask_key = mask_.private_key();
  absl::StatusOr<std::vector<ShamirShare>> key_shares = ShareSecret(mask_key, cohort.threshold, points);
  if (!key_shares.ok()) return key_shares.status();
  std::vector<SharedKeys> messages;
  for (size_t n = 0; n < neighbours.size(); ++n) {
    const int neighbour = neighbours[n];
    absl::StatusOr<Key32> channel_key =
        channel_.Agree(cohort.keys[neighbour].channel_public_key, absl::StrCat(kShareChannelContext, "|", cohort.context));
    if (!channel_key.ok()) return channel_key.status();
    absl::StatusOr<std::string> sealed = SealedBox(*channel_key).Seal(
        EncodeKeyShares((*seed_shares)[n], (*key_shares)[n]),
        ShareKeysAssociatedData(cohort, index, neighbour));
    if (!sealed.ok()) return sealed.status();
    messages.push_back(SharedKeys{index, neighbour, *std::move(sealed)});
  }
  return messages;
}

absl::StatusOr<std::vector<std::vector<uint32_t>>> SecAggClient::MaskInput(
    const SecAggCohort& cohort, absl::Span<const SharedKeys> received, absl::Span<const std::vector<uint32_t>> input) {
  if (index_ < 0) return absl::FailedPreconditionError("masking before sharing keys (stage 1)");
  if (input.size() != cohort.field_sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the input has ", input.size(), " fields; the cohort's spec ",
                                                   cohort.field_sizes.size()));
  }
  held_.clear();
  for (const SharedKeys& message : received) {
    if (message.to != index_ || !cohort.graph.AreNeighbours(index_, message.from) || held_.contains(message.from)) {
      return absl::InvalidArgumentError(absl::StrCat("a share from client ", message.from, " to client ", message.to,
                                                     " is not one client ", index_, " takes"));
    }
    absl::StatusOr<Key32> channel_key = channel_.Agree(cohort.keys[message.from].channel_public_key,
                                                       absl::StrCat(kShareChannelContext, "|", cohort.context));
    if (!channel_key.ok()) return channel_key.status();
    absl::StatusOr<std::string> opened =
        SealedBox(*channel_key).Open(message.sealed, ShareKeysAssociatedData(cohort, message.from, index_));
    if (!opened.ok()) return opened.status();
    absl::StatusOr<std::pair<ShamirShare, ShamirShare>> shares = DecodeKeyShares(*opened);
    if (!shares.ok()) return shares.status();
    held_[message.from] = *std::move(shares);
  }
  std::vector<SignedMaskSeed> seeds = {{self_seed_, +1}};
  for (const auto& [neighbour, shares] : held_) {
    absl::StatusOr<Key32> pairwise = mask_.Agree(cohort.keys[neighbour].mask_public_key,
                                                 absl::StrCat(kPairwiseMaskContext, "|", cohort.context));
    if (!pairwise.ok()) return pairwise.status();
    seeds.push_back(SignedMaskSeed{MaskSeed{*pairwise}, index_ < neighbour ? +1 : -1});
  }
  const uint32_t modulus_mask = cohort.bits >= 32 ? 0xffffffffu : (uint32_t{1} << cohort.bits) - 1;
  std::vector<std::vector<uint32_t>> masked(input.size());
  MaskAccumulator masks;
  for (size_t field = 0; field < input.size(); ++field) {
    if (input[field].size() != cohort.field_sizes[field]) {
      return absl::InvalidArgumentError(absl::StrCat("field ", field, " has ", input[field].size(),
                                                     " values; the spec declares ", cohort.field_sizes[field]));
    }
    masked[field] = input[field];
    masks.Add(seeds, static_cast<uint32_t>(field), absl::MakeSpan(masked[field]));
    for (uint32_t& value : masked[field]) value &= modulus_mask;
  }
  return masked;
}

absl::StatusOr<UnmaskingShares> SecAggClient::Unmask(const SecAggCohort& cohort, const std::vector<bool>& masked) {
  if (index_ < 0 || masked.size() != static_cast<size_t>(cohort.clients())) {
    return absl::InvalidArgumentError("the unmasking request does not match this client's cohort");
  }
  if (!masked[index_]) {
    return absl::FailedPreconditionError("the unmasking request says this client's masked input is not in the sum");
  }
  int in_sum = 0;
  for (bool in : masked) in_sum += in ? 1 : 0;
  if (in_sum < cohort.threshold) {
    return absl::FailedPreconditionError(absl::StrCat("only ", in_sum, " masked inputs are in the sum, fewer than the ",
                                                      cohort.threshold, " the cohort's threshold needs"));
  }
  std::vector<RevealedShare> revealed;
  for (const auto& [neighbour, shares] : held_) {
    // Never both secrets of one client: the seed of one in the sum, the key of one not.
    if (masked[neighbour]) {
      revealed.push_back(RevealedShare{neighbour, SecretKind::kSelfMaskSeed, shares.first});
    } else {
      revealed.push_back(RevealedShare{neighbour, SecretKind::kMaskKey, shares.second});
    }
  }
  absl::StatusOr<Key32> root_key =
      channel_.Agree(cohort.root_public_key, absl::StrCat(kRootChannelContext, "|", cohort.context));
  if (!root_key.ok()) return root_key.status();
  absl::StatusOr<std::string> sealed =
      SealedBox(*root_key).Seal(EncodeRevealedShares(revealed), UnmaskingAssociatedData(cohort, index_));
  if (!sealed.ok()) return sealed.status();
  return UnmaskingShares{index_, *std::move(sealed)};
}

}  // namespace fedagg
