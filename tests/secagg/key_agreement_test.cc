// X25519 + HKDF agreement (both sides get the same key, other contexts other keys, a
// private key restored gives the same pair) and AES-GCM sealed boxes (anything changed on
// the way, or another party's associated data, is DATA_LOSS).
#include "service/secagg/key_agreement.h"

#include "gtest/gtest.h"
#include "service/secagg/sealed_box.h"

namespace fedagg {
namespace {

TEST(KeyAgreementTest, BothSidesAgreeAndContextsSeparateKeys) {
  absl::StatusOr<X25519KeyPair> alice = X25519KeyPair::Generate();
  absl::StatusOr<X25519KeyPair> bob = X25519KeyPair::Generate();
  ASSERT_TRUE(alice.ok() && bob.ok());
  absl::StatusOr<Key32> ab = alice->Agree(bob->public_key(), "masks");
  absl::StatusOr<Key32> ba = bob->Agree(alice->public_key(), "masks");
  absl::StatusOr<Key32> other = alice->Agree(bob->public_key(), "channel");
  ASSERT_TRUE(ab.ok() && ba.ok() && other.ok());
  EXPECT_EQ(*ab, *ba);
  EXPECT_NE(*ab, *other);
  absl::StatusOr<X25519KeyPair> restored = X25519KeyPair::FromPrivateKey(alice->private_key());
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->public_key(), alice->public_key());
  EXPECT_EQ(*restored->Agree(bob->public_key(), "masks"), *ab);
}

TEST(KeyAgreementTest, ALowOrderPeerKeyIsRefused) {
  absl::StatusOr<X25519KeyPair> alice = X25519KeyPair::Generate();
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->Agree(Key32{}, "masks").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SealedBoxTest, OpensWhatItSealedAndNothingChanged) {
  Key32 key{};
  key[0] = 1;
  const SealedBox box(key);
  absl::StatusOr<std::string> sealed = box.Seal("shares of client 3", "agg|1|to 4");
  ASSERT_TRUE(sealed.ok());
  EXPECT_EQ(*box.Open(*sealed, "agg|1|to 4"), "shares of client 3");
  EXPECT_NE(*box.Seal("shares of client 3", "agg|1|to 4"), *sealed);  // a fresh nonce each time
  for (size_t at = 0; at < sealed->size(); at += 7) {
    std::string changed = *sealed;
    changed[at] ^= 0x20;
    EXPECT_EQ(box.Open(changed, "agg|1|to 4").status().code(), absl::StatusCode::kDataLoss) << "byte " << at;
  }
  EXPECT_EQ(box.Open(*sealed, "agg|1|to 5").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(box.Open(sealed->substr(0, 20), "agg|1|to 4").status().code(), absl::StatusCode::kDataLoss);
  Key32 other = key;
  other[31] = 9;
  EXPECT_EQ(SealedBox(other).Open(*sealed, "agg|1|to 4").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace fedagg
