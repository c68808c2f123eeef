// Masks expanded from ChaCha20 keystreams (OpenSSL), chunk by chunk on every core.
#include "service/secagg/mask_expansion.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace fedagg {
namespace {

struct MaskCipherFree {
  void operator()(EVP_CIPHER_CTX* context) const { EVP_CIPHER_CTX_free(context); }
};

// ChaCha20 with a 32-byte key and a 16-byte IV fails only when libcrypto itself is broken:
// no mask could then be removed, and none must be skipped.
[[noreturn]] void CryptoFailed(const char* what) {
  std::fprintf(stderr, "fedagg: OpenSSL's ChaCha20 failed expanding a mask (%s): %s\n", what,
               ERR_error_string(ERR_get_error(), nullptr));
  std::abort();
}

// Writes words [first, first + out.size()) of the mask of (seed, field); `first` is a
// multiple of 16.
void ExpandMask(EVP_CIPHER_CTX* context, const MaskSeed& seed, uint32_t field, uint64_t first,
                absl::Span<uint32_t> out, absl::Span<const uint8_t> zeros) {
  // OpenSSL's ChaCha20 IV: the 32-bit block counter, then the 96-bit nonce (field, 0, 0),
  // all little-endian.
  uint8_t iv[16] = {};
  const uint32_t block = static_cast<uint32_t>(first / 16);
  std::memcpy(iv, &block, sizeof(block));
  std::memcpy(iv + 4, &field, sizeof(field));
  if (EVP_EncryptInit_ex(context, EVP_chacha20(), nullptr, seed.bytes.data(), iv) != 1) CryptoFailed("set-up");
  int written = 0;
  const int bytes = static_cast<int>(out.size() * sizeof(uint32_t));
  if (EVP_EncryptUpdate(context, reinterpret_cast<uint8_t*>(out.data()), &written, zeros.data(), bytes) != 1 ||
      written != bytes) {
    CryptoFailed("keystream");
  }
}

}  // namespace

void MaskAccumulator::Add(absl::Span<const SignedMaskSeed> seeds, uint32_t field, absl::Span<uint32_t> total) const {
  if (seeds.empty() || total.empty()) return;
  static_assert(kChunkWords % 16 == 0, "chunks start at a ChaCha20 block");
  const int64_t chunks = static_cast<int64_t>((total.size() + kChunkWords - 1) / kChunkWords);
  auto add_chunks = [&](int64_t begin, int64_t end) {
    std::unique_ptr<EVP_CIPHER_CTX, MaskCipherFree> context(EVP_CIPHER_CTX_new());
    if (context == nullptr) CryptoFailed("context");
    const std::vector<uint8_t> zeros(kChunkWords * sizeof(uint32_t), 0);
    std::vector<uint32_t> mask(kChunkWords);
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const size_t first = static_cast<size_t>(chunk) * kChunkWords;
      absl::Span<uint32_t> out = total.subspan(first, std::min(kChunkWords, total.size() - first));
      absl::Span<uint32_t> words = absl::MakeSpan(mask).first(out.size());
      for (const SignedMaskSeed& signed_seed : seeds) {
        ExpandMask(context.get(), signed_seed.seed, field, first, words, zeros);
        if (signed_seed.sign >= 0) {
          for (size_t i = 0; i < out.size(); ++i) out[i] += words[i];
        } else {
          for (size_t i = 0; i < out.size(); ++i) out[i] -= words[i];
        }
      }
    }
  };
  if (pool_ == nullptr) {
    add_chunks(0, chunks);
  } else {
    pool_->ParallelFor(chunks, 1, add_chunks);
  }
}

}  // namespace fedagg
