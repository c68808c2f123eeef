// ChaCha20's block function (RFC 8439, section 2.3), written once for the host and the
// device: secure aggregation's masks are ChaCha20 keystreams, expanded on the CPU through
// OpenSSL (service/secagg/mask_expansion.h) and on a GPU through this function, so the two
// must give the same bits — tests/secagg checks this function against RFC 8439's vectors
// and against OpenSSL's keystream.
#ifndef FEDAGG_PORTABLE_CHACHA20_BLOCK_H_
#define FEDAGG_PORTABLE_CHACHA20_BLOCK_H_

#include <cstdint>

#include "portable/portable_math.h"

namespace fedagg {

struct ChaCha20Key {
  uint32_t words[8];  // the 256-bit key, little-endian words
};

FEDAGG_HOST_DEVICE inline uint32_t ChaCha20Rotate(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

FEDAGG_HOST_DEVICE inline void ChaCha20QuarterRound(uint32_t& a, uint32_t& b, uint32_t& c, uint32_t& d) {
  a += b; d ^= a; d = ChaCha20Rotate(d, 16);
  c += d; b ^= c; b = ChaCha20Rotate(b, 12);
  a += b; d ^= a; d = ChaCha20Rotate(d, 8);
  c += d; b ^= c; b = ChaCha20Rotate(b, 7);
}

// The 16 keystream words of block `counter` under `key` and the 96-bit `nonce` (three
// little-endian words): byte 4w..4w+3 of the block is word w, little-endian.
FEDAGG_HOST_DEVICE inline void ChaCha20Block(const ChaCha20Key& key, uint32_t counter, const uint32_t nonce[3],
                                             uint32_t out[16]) {
  uint32_t state[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u,
                        key.words[0], key.words[1], key.words[2], key.words[3],
                        key.words[4], key.words[5], key.words[6], key.words[7],
                        counter, nonce[0], nonce[1], nonce[2]};
  uint32_t x[16];
  for (int i = 0; i < 16; ++i) x[i] = state[i];
  for (int round = 0; round < 10; ++round) {
    ChaCha20QuarterRound(x[0], x[4], x[8], x[12]);
    ChaCha20QuarterRound(x[1], x[5], x[9], x[13]);
    ChaCha20QuarterRound(x[2], x[6], x[10], x[14]);
    ChaCha20QuarterRound(x[3], x[7], x[11], x[15]);
    ChaCha20QuarterRound(x[0], x[5], x[10], x[15]);
    ChaCha20QuarterRound(x[1], x[6], x[11], x[12]);
    ChaCha20QuarterRound(x[2], x[7], x[8], x[13]);
    ChaCha20QuarterRound(x[3], x[4], x[9], x[14]);
  }
  for (int i = 0; i < 16; ++i) out[i] = x[i] + state[i];
}

}  // namespace fedagg

#endif  // FEDAGG_PORTABLE_CHACHA20_BLOCK_H_
