// CRC-32C: the CPU's CRC32 instruction on x86-64 with SSE4.2 (8 bytes an instruction),
// chosen once at run time; otherwise slicing-by-8 in software (~2 GB/s per core), which
// cost the server a core-second per 2 GB received (docs/BENCHMARKS.md, "What each
// optimisation changed").
// The instruction takes three cycles and a core issues one a cycle, so one chain of them
// uses a third of it: the hardware path runs three chains over the three thirds of a
// block and joins them, crc(A B) = Shift|B|(crc(A)) ^ crc(B) for CRC registers without
// the pre- and post-inversion (B's chain starts from 0), Shift being the register after
// |B| zero bytes — linear over GF(2), so four 256-entry tables per block length.
#include "service/core/crc32c.h"

#include <array>
#include <cstring>

namespace fedagg {
namespace {

constexpr uint32_t kPolynomial = 0x82f63b78u;  // reflected Castagnoli polynomial

struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
      t[0][i] = crc;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xffu];
    }
  }
};

constexpr Tables kTables;

// The register after `zeros` zero bytes from `crc`, as four byte tables (Shift). Built
// from the 32 one-bit registers, by the byte-at-a-time rule.
class ZerosShift {
 public:
  explicit ZerosShift(size_t zeros) {
    std::array<uint32_t, 32> bit{};
    for (int i = 0; i < 32; ++i) {
      uint32_t crc = uint32_t{1} << i;
      for (size_t n = 0; n < zeros; ++n) crc = (crc >> 8) ^ kTables.t[0][crc & 0xffu];
      bit[i] = crc;
    }
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t shifted = 0;
        for (int j = 0; j < 8; ++j) {
          if ((b >> j) & 1u) shifted ^= bit[8 * k + j];
        }
        table_[k][b] = shifted;
      }
    }
  }
  uint32_t Shift(uint32_t crc) const {
    return table_[0][crc & 0xffu] ^ table_[1][(crc >> 8) & 0xffu] ^ table_[2][(crc >> 16) & 0xffu] ^
           table_[3][crc >> 24];
  }

 private:
  std::array<std::array<uint32_t, 256>, 4> table_{};
};

}  // namespace

namespace crc32c_internal {

uint32_t ExtendPortable(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  const auto& t = kTables.t;
  crc = ~crc;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    word ^= crc;
    crc = t[7][word & 0xff] ^ t[6][(word >> 8) & 0xff] ^ t[5][(word >> 16) & 0xff] ^
          t[4][(word >> 24) & 0xff] ^ t[3][(word >> 32) & 0xff] ^ t[2][(word >> 40) & 0xff] ^
          t[1][(word >> 48) & 0xff] ^ t[0][word >> 56];
    p += 8;
    size -= 8;
  }
  while (size-- > 0) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xffu];
  return ~crc;
}

#if defined(__x86_64__)
bool HardwareAvailable() { return __builtin_cpu_supports("sse4.2"); }

namespace {

// Bytes of each of the three chains, for long runs and for what is left of them.
constexpr size_t kLongLane = 2048;
constexpr size_t kShortLane = 256;

// Runs three chains over blocks of 3 * lane bytes while a whole block is left.
__attribute__((target("sse4.2"))) uint64_t ThreeChains(uint64_t state, const unsigned char*& p, size_t& size,
                                                       size_t lane, const ZerosShift& shift) {
  while (size >= 3 * lane) {
    uint64_t first = state, second = 0, third = 0;
    for (size_t at = 0; at < lane; at += 8) {
      uint64_t a, b, c;
      std::memcpy(&a, p + at, 8);
      std::memcpy(&b, p + lane + at, 8);
      std::memcpy(&c, p + 2 * lane + at, 8);
      first = __builtin_ia32_crc32di(first, a);
      second = __builtin_ia32_crc32di(second, b);
      third = __builtin_ia32_crc32di(third, c);
    }
    state = shift.Shift(static_cast<uint32_t>(first)) ^ static_cast<uint32_t>(second);
    state = shift.Shift(static_cast<uint32_t>(state)) ^ static_cast<uint32_t>(third);
    p += 3 * lane;
    size -= 3 * lane;
  }
  return state;
}

}  // namespace

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t crc, const void* data, size_t size) {
  static const ZerosShift long_shift(kLongLane);
  static const ZerosShift short_shift(kShortLane);
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t state = ~crc;
  state = ThreeChains(state, p, size, kLongLane, long_shift);
  state = ThreeChains(state, p, size, kShortLane, short_shift);
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    state = __builtin_ia32_crc32di(state, word);
    p += 8;
    size -= 8;
  }
  uint32_t tail = static_cast<uint32_t>(state);
  while (size-- > 0) tail = __builtin_ia32_crc32qi(tail, *p++);
  return ~tail;
}
#else
bool HardwareAvailable() { return false; }
uint32_t ExtendHardware(uint32_t crc, const void* data, size_t size) { return ExtendPortable(crc, data, size); }
#endif

}  // namespace crc32c_internal

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
  static const bool hardware = crc32c_internal::HardwareAvailable();
  return hardware ? crc32c_internal::ExtendHardware(crc, data, size)
                  : crc32c_internal::ExtendPortable(crc, data, size);
}

}  // namespace fedagg
