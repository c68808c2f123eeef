// The root's unmasking: open the shares, recover the secrets, remove the masks.
#include "service/secagg/secagg_unmasker.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "service/secagg/mask_expansion.h"
#include "service/secagg/sealed_box.h"
#include "service/secagg/secagg_client.h"
#include "service/secagg/share_codec.h"
#include "service/secagg/shamir.h"

namespace fedagg {

absl::StatusOr<SecAggUnmasker> SecAggUnmasker::Create() {
  absl::StatusOr<X25519KeyPair> key = X25519KeyPair::Generate();
  if (!key.ok()) return key.status();
  return SecAggUnmasker(*std::move(key));
}

absl::StatusOr<SecAggUnmasker> SecAggUnmasker::FromPrivateKey(const Key32& private_key) {
  absl::StatusOr<X25519KeyPair> key = X25519KeyPair::FromPrivateKey(private_key);
  if (!key.ok()) return key.status();
  return SecAggUnmasker(*std::move(key));
}

absl::StatusOr<std::vector<std::vector<uint32_t>>> SecAggUnmasker::Unmask(
    const SecAggCohort& cohort, const std::vector<bool>& shared, const std::vector<bool>& masked,
    absl::Span<const UnmaskingShares> responses, std::vector<std::vector<uint32_t>> masked_sum, ThreadPool* pool,
    const MaskAdder& add_masks) const {
  const int n = cohort.clients();
  if (shared.size() != static_cast<size_t>(n) || masked.size() != static_cast<size_t>(n) ||
      masked_sum.size() != cohort.field_sizes.size()) {
    return absl::InvalidArgumentError("the unmasking's sets or sums do not match the cohort");
  }
  // Every revealed share, by (owner, kind); a responder must be in the sum and reveal what
  // the sets say.
  std::map<std::pair<int, SecretKind>, std::vector<ShamirShare>> shares;
  std::vector<bool> responded(static_cast<size_t>(n), false);
  for (const UnmaskingShares& response : responses) {
    if (response.from < 0 || response.from >= n || !masked[response.from] || responded[response.from]) {
      return absl::DataLossError(absl::StrCat("an unmasking response from client ", response.from,
                                              " is not one the sum's clients give"));
    }
    responded[response.from] = true;
    absl::StatusOr<Key32> channel = key_.Agree(cohort.keys[response.from].channel_public_key,
                                               absl::StrCat(kRootChannelContext, "|", cohort.context));
    if (!channel.ok()) return channel.status();
    absl::StatusOr<std::string> opened =
        SealedBox(*channel).Open(response.sealed, UnmaskingAssociatedData(cohort, response.from));
    if (!opened.ok()) return opened.status();
    absl::StatusOr<std::vector<RevealedShare>> revealed = DecodeRevealedShares(*opened);
    if (!revealed.ok()) return revealed.status();
    for (RevealedShare& share : *revealed) {
      const bool expected = share.owner >= 0 && share.owner < n && shared[share.owner] &&
                            cohort.graph.AreNeighbours(share.owner, response.from) &&
                            share.share.x == static_cast<uint32_t>(response.from) + 1 &&
                            (share.kind == SecretKind::kSelfMaskSeed) == static_cast<bool>(masked[share.owner]);
      if (!expected) {
        return absl::DataLossError(absl::StrCat(
            "client ", response.from, " revealed a share of client ", share.owner,
            "'s secret that the sum's sets say it must not (the clients were told other sets than the root)"));
      }
      shares[{share.owner, share.kind}].push_back(std::move(share.share));
    }
  }
  auto recover = [&](int owner, SecretKind kind) -> absl::StatusOr<Key32> {
    const std::vector<ShamirShare>& found = shares[{owner, kind}];
    if (found.size() < static_cast<size_t>(cohort.threshold)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "client ", owner, "'s ", kind == SecretKind::kSelfMaskSeed ? "self-mask seed" : "mask key", " has ",
          found.size(), " shares from the clients that stayed, fewer than the threshold of ", cohort.threshold,
          ": too many clients dropped out to unmask the sum"));
    }
    absl::StatusOr<std::vector<uint8_t>> secret = RecoverSecret(found, cohort.threshold, sizeof(Key32));
    if (!secret.ok()) return secret.status();
    Key32 key{};
    std::copy(secret->begin(), secret->end(), key.begin());
    return key;
  };
  std::vector<SignedMaskSeed> seeds;
  for (int c = 0; c < n; ++c) {
    if (masked[c]) {
      absl::StatusOr<Key32> seed = recover(c, SecretKind::kSelfMaskSeed);
      if (!seed.ok()) return seed.status();
      seeds.push_back(SignedMaskSeed{MaskSeed{*seed}, -1});
      continue;
    }
    if (!shared[c]) continue;
    // A client that shared keys but is not in the sum: its neighbours in the sum masked
    // with it, and those masks did not cancel.
    bool needed = false;
    for (int neighbour : cohort.graph.NeighboursOf(c)) needed = needed || masked[neighbour];
    if (!needed) continue;
    absl::StatusOr<Key32> mask_key = recover(c, SecretKind::kMaskKey);
    if (!mask_key.ok()) return mask_key.status();
    absl::StatusOr<X25519KeyPair> pair = X25519KeyPair::FromPrivateKey(*mask_key);
    if (!pair.ok()) return pair.status();
    if (pair->public_key() != cohort.keys[c].mask_public_key) {
      return absl::DataLossError(absl::StrCat("client ", c, "'s mask key recovered from the shares is not the one it "
                                              "advertised: a share was wrong"));
    }
    for (int neighbour : cohort.graph.NeighboursOf(c)) {
      if (!masked[neighbour]) continue;
      absl::StatusOr<Key32> pairwise = pair->Agree(cohort.keys[neighbour].mask_public_key,
                                                   absl::StrCat(kPairwiseMaskContext, "|", cohort.context));
      if (!pairwise.ok()) return pairwise.status();
      // The neighbour added + towards a higher index, - towards a lower: take it back.
      seeds.push_back(SignedMaskSeed{MaskSeed{*pairwise}, neighbour < c ? -1 : +1});
    }
  }
  const uint32_t modulus_mask = cohort.bits >= 32 ? 0xffffffffu : (uint32_t{1} << cohort.bits) - 1;
  const MaskAccumulator masks(pool);
  for (size_t field = 0; field < masked_sum.size(); ++field) {
    if (masked_sum[field].size() != cohort.field_sizes[field]) {
      return absl::InvalidArgumentError(absl::StrCat("the masked sum of field ", field, " has ", masked_sum[field].size(),
                                                     " values; the spec declares ", cohort.field_sizes[field]));
    }
    if (add_masks != nullptr) {
      if (absl::Status added = add_masks(seeds, static_cast<uint32_t>(field), absl::MakeSpan(masked_sum[field]));
          !added.ok()) {
        return added;
      }
    } else {
      masks.Add(seeds, static_cast<uint32_t>(field), absl::MakeSpan(masked_sum[field]));
    }
    for (uint32_t& value : masked_sum[field]) value &= modulus_mask;
  }
  return masked_sum;
}

}  // namespace fedagg
