// X25519 + HKDF agreement (both sides get the same key, other contexts other keys, a
// private key restored gives the same pair) and AES-GCM sealed boxes (anything changed on
// the way, or another party's associated data, is DATA_LOSS).
#include "service/secagg/key_agreement.h"

#include <string>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "service/secagg/sealed_box.h"

namespace fedagg {
namespace {

Key32 KeyFromHex(const std::string& hex) {
  const std::string bytes = absl::HexStringToBytes(hex);
  Key32 key{};
  std::copy(bytes.begin(), bytes.end(), key.begin());
  return key;
}

// RFC 7748, section 6.1: X25519 between Alice and Bob (the agreement is checked through
// HKDF, which Agree applies to the shared secret).
TEST(KeyAgreementTest, MatchesRfc7748AndRfc5869Vectors) {
  absl::StatusOr<X25519KeyPair> alice =
      X25519KeyPair::FromPrivateKey(KeyFromHex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"));
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->public_key(), KeyFromHex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"));
  const Key32 shared = KeyFromHex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
  absl::StatusOr<Key32> agreed =
      alice->Agree(KeyFromHex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"), "ctx");
  ASSERT_TRUE(agreed.ok());
  EXPECT_EQ(*agreed, *DeriveKey(shared, "ctx"));
  // RFC 5869, test case 3 (SHA-256, no salt, no info): the first 32 bytes of its OKM.
  const std::string ikm(22, '\x0b');
  absl::StatusOr<Key32> okm = DeriveKey(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(ikm.data()), ikm.size()), "");
  ASSERT_TRUE(okm.ok()) << okm.status();
  EXPECT_EQ(*okm, KeyFromHex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d"));
}

// McGrew and Viega's GCM test case 14 (AES-256, zero key and IV, one zero block): a
// sealed message is nonce || ciphertext || tag.
TEST(SealedBoxTest, OpensTheGcmSpecificationsTestCase14) {
  const std::string sealed = std::string(12, '\0') + absl::HexStringToBytes("cea7403d4d606b6e074ec5d3baf39d18") +
                             absl::HexStringToBytes("d0d1c8a799996bf0265b98b5d48ab919");
  absl::StatusOr<std::string> opened = SealedBox(Key32{}).Open(sealed, "");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, std::string(16, '\0'));
}

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
