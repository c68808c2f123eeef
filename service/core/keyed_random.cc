// KeyedRandom: ChaCha20 keystreams from OpenSSL, and uniform integers from them.
#include "service/core/keyed_random.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <openssl/err.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace fedagg {
namespace {
// ChaCha20 with a valid key and IV does not fail unless libcrypto itself is broken: no
// noise can then be drawn, and none must be skipped.
[[noreturn]] void CryptoFailed(const char* what) {
  std::fprintf(stderr, "fedagg: OpenSSL's ChaCha20 failed (%s): %s\n", what, ERR_error_string(ERR_get_error(), nullptr));
  std::abort();
}
}  // namespace

absl::StatusOr<NoiseKey> NoiseKey::Fresh() {
  NoiseKey key;
  if (RAND_bytes(key.bytes.data(), static_cast<int>(key.bytes.size())) != 1) {
    return absl::InternalError("the system's secure random source (OpenSSL RAND_bytes) failed; no noise key was drawn");
  }
  return key;
}

void KeyedRandom::ContextFree::operator()(EVP_CIPHER_CTX* context) const { EVP_CIPHER_CTX_free(context); }

KeyedRandom::KeyedRandom(const NoiseKey& key, uint32_t stream, uint64_t substream) : context_(EVP_CIPHER_CTX_new()) {
  // ChaCha20's 16-byte IV: a 32-bit block counter from 0, then a 96-bit nonce.
  uint8_t iv[16] = {};
  std::memcpy(iv + 4, &stream, sizeof(stream));
  std::memcpy(iv + 8, &substream, sizeof(substream));
  if (context_ == nullptr || EVP_EncryptInit_ex(context_.get(), EVP_chacha20(), nullptr, key.bytes.data(), iv) != 1) {
    CryptoFailed("set-up");
  }
}

KeyedRandom::~KeyedRandom() = default;

void KeyedRandom::Refill() {
  static constexpr std::array<uint8_t, 4096> kZeros{};
  int written = 0;
  if (EVP_EncryptUpdate(context_.get(), buffer_.data(), &written, kZeros.data(), static_cast<int>(kZeros.size())) != 1 ||
      written != static_cast<int>(buffer_.size())) {
    CryptoFailed("keystream");
  }
  used_ = 0;
}

uint64_t KeyedRandom::Next64() {
  if (used_ + sizeof(uint64_t) > buffer_.size()) Refill();
  uint64_t value;
  std::memcpy(&value, buffer_.data() + used_, sizeof(value));
  used_ += sizeof(value);
  return value;
}

bool KeyedRandom::NextBit() {
  if (bits_left_ == 0) {
    bits_ = Next64();
    bits_left_ = 64;
  }
  const bool bit = (bits_ & 1) != 0;
  bits_ >>= 1;
  --bits_left_;
  return bit;
}

uint128 KeyedRandom::Below(uint128 bound) {
  if (bound <= std::numeric_limits<uint64_t>::max()) {  // 64 bits: a cheaper division, fewer bits drawn
    const uint64_t small = static_cast<uint64_t>(bound);
    const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % small;
    for (;;) {
      const uint64_t draw = Next64();
      if (draw < limit) return draw % small;
    }
  }
  // The largest multiple of `bound` that 128 bits hold: values at or above it are drawn again.
  const uint128 limit = std::numeric_limits<uint128>::max() - std::numeric_limits<uint128>::max() % bound;
  for (;;) {
    const uint128 draw = (static_cast<uint128>(Next64()) << 64) | Next64();
    if (draw < limit) return draw % bound;
  }
}

}  // namespace fedagg
