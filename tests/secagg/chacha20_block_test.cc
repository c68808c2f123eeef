// portable/chacha20_block.h against RFC 8439's test vector (section 2.3.2) and against
// OpenSSL's ChaCha20 keystream: the device's masks must be the CPU's, bit for bit.
#include "portable/chacha20_block.h"

#include <openssl/evp.h>

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace fedagg {
namespace {

TEST(ChaCha20BlockTest, MatchesRfc8439BlockVector) {
  ChaCha20Key key;
  for (int w = 0; w < 8; ++w) {
    uint8_t bytes[4] = {static_cast<uint8_t>(4 * w), static_cast<uint8_t>(4 * w + 1), static_cast<uint8_t>(4 * w + 2),
                        static_cast<uint8_t>(4 * w + 3)};
    std::memcpy(&key.words[w], bytes, 4);
  }
  const uint32_t nonce[3] = {0x09000000, 0x4a000000, 0x00000000};  // 00 00 00 09 00 00 00 4a 00 00 00 00
  uint32_t out[16];
  ChaCha20Block(key, 1, nonce, out);
  const uint32_t expected[16] = {0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033,
                                 0x9aaa2204, 0x4e6cd4c3, 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9,
                                 0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], expected[i]) << "word " << i;
}

TEST(ChaCha20BlockTest, MatchesOpenSslKeystreamAtAnyCounter) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    uint8_t key_bytes[32];
    for (uint8_t& b : key_bytes) b = static_cast<uint8_t>(rng());
    const uint32_t counter = static_cast<uint32_t>(rng() % 100000);
    const uint32_t nonce[3] = {static_cast<uint32_t>(rng()), 0, static_cast<uint32_t>(rng())};
    ChaCha20Key key;
    std::memcpy(key.words, key_bytes, 32);
    uint8_t iv[16];
    std::memcpy(iv, &counter, 4);
    std::memcpy(iv + 4, nonce, 12);
    EVP_CIPHER_CTX* context = EVP_CIPHER_CTX_new();
    ASSERT_EQ(EVP_EncryptInit_ex(context, EVP_chacha20(), nullptr, key_bytes, iv), 1);
    std::vector<uint8_t> zeros(64 * 3, 0), stream(64 * 3);
    int written = 0;
    ASSERT_EQ(EVP_EncryptUpdate(context, stream.data(), &written, zeros.data(), static_cast<int>(zeros.size())), 1);
    EVP_CIPHER_CTX_free(context);
    for (uint32_t block = 0; block < 3; ++block) {
      uint32_t out[16];
      ChaCha20Block(key, counter + block, nonce, out);
      EXPECT_EQ(std::memcmp(out, stream.data() + 64 * block, 64), 0) << "trial " << trial << " block " << block;
    }
  }
}

}  // namespace
}  // namespace fedagg
