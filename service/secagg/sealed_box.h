// SealedBox: AES-256-GCM (OpenSSL) under a key two parties agreed on — how secure
// aggregation's shares travel through nodes that must neither read nor change them. A
// sealed message is a fresh 12-byte nonce, the ciphertext and the 16-byte tag; the
// associated data (who sends, to whom, for which aggregation and stage) is authenticated,
// not sent. Opening a message changed on its way, or under other associated data, is
// DATA_LOSS.
#ifndef FEDAGG_SERVICE_SECAGG_SEALED_BOX_H_
#define FEDAGG_SERVICE_SECAGG_SEALED_BOX_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "service/secagg/key_agreement.h"

namespace fedagg {

class SealedBox {
 public:
  static constexpr size_t kNonceBytes = 12;
  static constexpr size_t kTagBytes = 16;

  explicit SealedBox(const Key32& key) : key_(key) {}

  absl::StatusOr<std::string> Seal(std::string_view plaintext, std::string_view associated_data) const;
  absl::StatusOr<std::string> Open(std::string_view sealed, std::string_view associated_data) const;

 private:
  Key32 key_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_SECAGG_SEALED_BOX_H_
