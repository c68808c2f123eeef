// X25519 key pairs (OpenSSL) and the keys two parties agree on from them: the X25519
// shared secret stretched by HKDF-SHA256 under a context string, so one pair of keys gives
// independent keys for independent purposes (a pairwise mask seed, a channel key).
// Secure aggregation gives each client two pairs: one for the channel its shares travel
// on, one whose agreement with each neighbour seeds their pairwise mask.
#ifndef FEDAGG_SERVICE_SECAGG_KEY_AGREEMENT_H_
#define FEDAGG_SERVICE_SECAGG_KEY_AGREEMENT_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

typedef struct evp_pkey_st EVP_PKEY;

namespace fedagg {

using Key32 = std::array<uint8_t, 32>;

class X25519KeyPair {
 public:
  // A new pair from the system's secure source.
  static absl::StatusOr<X25519KeyPair> Generate();
  // The pair of a private key (as reconstructed from shares).
  static absl::StatusOr<X25519KeyPair> FromPrivateKey(const Key32& private_key);

  const Key32& public_key() const { return public_key_; }
  Key32 private_key() const;

  // HKDF-SHA256(X25519(this private key, `peer_public_key`), info = `context`): the same
  // 32 bytes on both sides. INVALID_ARGUMENT for a peer key X25519 refuses (all-zero
  // shared secrets: a low-order point).
  absl::StatusOr<Key32> Agree(const Key32& peer_public_key, std::string_view context) const;

 private:
  struct KeyFree {
    void operator()(EVP_PKEY* key) const;
  };
  explicit X25519KeyPair(EVP_PKEY* key);

  std::unique_ptr<EVP_PKEY, KeyFree> key_;
  Key32 public_key_{};
};

// HKDF-SHA256 of `secret` with `info`, 32 bytes (no salt).
absl::StatusOr<Key32> DeriveKey(absl::Span<const uint8_t> secret, std::string_view info);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_SECAGG_KEY_AGREEMENT_H_
