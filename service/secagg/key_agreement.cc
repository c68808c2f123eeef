// X25519 pairs and HKDF-SHA256 through OpenSSL's EVP interface.
#include "service/secagg/key_agreement.h"

#include <openssl/evp.h>
#include <openssl/kdf.h>

#include "absl/strings/str_cat.h"

namespace fedagg {
namespace {

struct PkeyContextFree {
  void operator()(EVP_PKEY_CTX* context) const { EVP_PKEY_CTX_free(context); }
};
using PkeyContext = std::unique_ptr<EVP_PKEY_CTX, PkeyContextFree>;

absl::Status CryptoError(std::string_view what) {
  return absl::InternalError(absl::StrCat("OpenSSL failed to ", std::string(what)));
}

}  // namespace

void X25519KeyPair::KeyFree::operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }

X25519KeyPair::X25519KeyPair(EVP_PKEY* key) : key_(key) {
  size_t length = public_key_.size();
  if (EVP_PKEY_get_raw_public_key(key_.get(), public_key_.data(), &length) != 1) public_key_.fill(0);
}

absl::StatusOr<X25519KeyPair> X25519KeyPair::Generate() {
  PkeyContext context(EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nullptr));
  EVP_PKEY* key = nullptr;
  if (context == nullptr || EVP_PKEY_keygen_init(context.get()) != 1 || EVP_PKEY_keygen(context.get(), &key) != 1) {
    return CryptoError("generate an X25519 key pair");
  }
  return X25519KeyPair(key);
}

absl::StatusOr<X25519KeyPair> X25519KeyPair::FromPrivateKey(const Key32& private_key) {
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, private_key.data(), private_key.size());
  if (key == nullptr) return CryptoError("load an X25519 private key");
  return X25519KeyPair(key);
}

Key32 X25519KeyPair::private_key() const {
  Key32 bytes{};
  size_t length = bytes.size();
  if (EVP_PKEY_get_raw_private_key(key_.get(), bytes.data(), &length) != 1) bytes.fill(0);
  return bytes;
}

absl::StatusOr<Key32> X25519KeyPair::Agree(const Key32& peer_public_key, std::string_view context) const {
  std::unique_ptr<EVP_PKEY, KeyFree> peer(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer_public_key.data(), peer_public_key.size()));
  if (peer == nullptr) return absl::InvalidArgumentError("the peer's public key is not an X25519 key");
  PkeyContext derive(EVP_PKEY_CTX_new(key_.get(), nullptr));
  Key32 shared{};
  size_t length = shared.size();
  if (derive == nullptr || EVP_PKEY_derive_init(derive.get()) != 1 ||
      EVP_PKEY_derive_set_peer(derive.get(), peer.get()) != 1) {
    return CryptoError("set up an X25519 agreement");
  }
  if (EVP_PKEY_derive(derive.get(), shared.data(), &length) != 1 || length != shared.size()) {
    // OpenSSL refuses an all-zero shared secret (a low-order peer key).
    return absl::InvalidArgumentError("X25519 with the peer's public key gives no usable secret (a low-order point)");
  }
  return DeriveKey(shared, context);
}

absl::StatusOr<Key32> DeriveKey(absl::Span<const uint8_t> secret, std::string_view info) {
  PkeyContext context(EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr));
  Key32 key{};
  size_t length = key.size();
  if (context == nullptr || EVP_PKEY_derive_init(context.get()) != 1 ||
      EVP_PKEY_CTX_set_hkdf_md(context.get(), EVP_sha256()) != 1 ||
      EVP_PKEY_CTX_set1_hkdf_key(context.get(), secret.data(), static_cast<int>(secret.size())) != 1 ||
      EVP_PKEY_CTX_add1_hkdf_info(context.get(), reinterpret_cast<const unsigned char*>(info.data()),
                                  static_cast<int>(info.size())) != 1 ||
      EVP_PKEY_derive(context.get(), key.data(), &length) != 1 || length != key.size()) {
    return CryptoError("derive a key with HKDF-SHA256");
  }
  return key;
}

}  // namespace fedagg
