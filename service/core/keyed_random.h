// KeyedRandom: the random bits of differential privacy's noise — ChaCha20's keystream
// (OpenSSL's libcrypto) under a 256-bit key drawn from the system's secure source, one
// stream per (field, block) so that noise is drawn in parallel and, from the same key,
// drawn again bit for bit (a root that restarts from a checkpoint holding the key
// publishes the very result it had made). Uniform integers by rejection, never by modulo.
#ifndef FEDAGG_SERVICE_CORE_KEYED_RANDOM_H_
#define FEDAGG_SERVICE_CORE_KEYED_RANDOM_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;

namespace fedagg {

using uint128 = unsigned __int128;

struct NoiseKey {
  std::array<uint8_t, 32> bytes{};
  // A key from the system's cryptographically secure source (OpenSSL's RAND_bytes);
  // INTERNAL when that source fails.
  static absl::StatusOr<NoiseKey> Fresh();
};

class KeyedRandom {
 public:
  // The stream of `key` numbered (`stream`, `substream`).
  KeyedRandom(const NoiseKey& key, uint32_t stream, uint64_t substream);
  ~KeyedRandom();
  KeyedRandom(const KeyedRandom&) = delete;
  KeyedRandom& operator=(const KeyedRandom&) = delete;

  uint64_t Next64();
  bool NextBit();
  // Uniform in [0, bound); bound > 0.
  uint128 Below(uint128 bound);

 private:
  void Refill();

  struct ContextFree {
    void operator()(EVP_CIPHER_CTX* context) const;
  };
  std::unique_ptr<EVP_CIPHER_CTX, ContextFree> context_;
  std::array<uint8_t, 4096> buffer_{};
  size_t used_ = sizeof(buffer_);
  uint64_t bits_ = 0;
  int bits_left_ = 0;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_KEYED_RANDOM_H_
