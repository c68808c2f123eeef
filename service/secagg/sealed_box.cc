// AES-256-GCM sealing and opening through OpenSSL's EVP interface.
#include "service/secagg/sealed_box.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace fedagg {
namespace {

struct BoxCipherFree {
  void operator()(EVP_CIPHER_CTX* context) const { EVP_CIPHER_CTX_free(context); }
};
using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, BoxCipherFree>;

const unsigned char* Bytes(std::string_view text) { return reinterpret_cast<const unsigned char*>(text.data()); }

}  // namespace

absl::StatusOr<std::string> SealedBox::Seal(std::string_view plaintext, std::string_view associated_data) const {
  std::string sealed(kNonceBytes + plaintext.size() + kTagBytes, '\0');
  unsigned char* nonce = reinterpret_cast<unsigned char*>(sealed.data());
  unsigned char* ciphertext = nonce + kNonceBytes;
  if (RAND_bytes(nonce, kNonceBytes) != 1) {
    return absl::InternalError("the system's secure random source (OpenSSL RAND_bytes) failed; nothing was sealed");
  }
  CipherContext context(EVP_CIPHER_CTX_new());
  int length = 0;
  if (context == nullptr || EVP_EncryptInit_ex(context.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce) != 1 ||
      EVP_EncryptUpdate(context.get(), nullptr, &length, Bytes(associated_data),
                        static_cast<int>(associated_data.size())) != 1 ||
      EVP_EncryptUpdate(context.get(), ciphertext, &length, Bytes(plaintext), static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(context.get(), ciphertext + length, &length) != 1 ||
      EVP_CIPHER_CTX_ctrl(context.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, ciphertext + plaintext.size()) != 1) {
    return absl::InternalError("OpenSSL failed to seal a message with AES-256-GCM");
  }
  return sealed;
}

absl::StatusOr<std::string> SealedBox::Open(std::string_view sealed, std::string_view associated_data) const {
  if (sealed.size() < kNonceBytes + kTagBytes) {
    return absl::DataLossError(absl::StrCat("a sealed message of ", sealed.size(), " bytes is shorter than its nonce and tag"));
  }
  const size_t plaintext_bytes = sealed.size() - kNonceBytes - kTagBytes;
  std::string plaintext(plaintext_bytes, '\0');
  const unsigned char* nonce = Bytes(sealed);
  const unsigned char* ciphertext = nonce + kNonceBytes;
  std::string tag(sealed.substr(kNonceBytes + plaintext_bytes));
  CipherContext context(EVP_CIPHER_CTX_new());
  int length = 0;
  if (context == nullptr || EVP_DecryptInit_ex(context.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce) != 1 ||
      EVP_DecryptUpdate(context.get(), nullptr, &length, Bytes(associated_data),
                        static_cast<int>(associated_data.size())) != 1 ||
      EVP_DecryptUpdate(context.get(), reinterpret_cast<unsigned char*>(plaintext.data()), &length, ciphertext,
                        static_cast<int>(plaintext_bytes)) != 1 ||
      EVP_CIPHER_CTX_ctrl(context.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) != 1) {
    return absl::InternalError("OpenSSL failed to set up opening an AES-256-GCM message");
  }
  if (EVP_DecryptFinal_ex(context.get(), reinterpret_cast<unsigned char*>(plaintext.data()) + length, &length) != 1) {
    return absl::DataLossError("a sealed message does not authenticate: it was changed on its way, or sealed for "
                               "another sender, receiver or stage");
  }
  return plaintext;
}

}  // namespace fedagg
