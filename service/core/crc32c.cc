// CRC-32C: the CPU's CRC32 instruction on x86-64 with SSE4.2 (8 bytes an instruction),
// chosen once at run time; otherwise slicing-by-8 in software (~2 GB/s per core), which
// cost the server a core-second per 2 GB received (docs/BENCHMARKS.md, "What each
// optimisation changed").
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

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t state = ~crc;
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
