// CRC-32C (Castagnoli), the checksum a client sends at the end of every update so that
// the server can tell a corrupted update from a good one before counting it.
#ifndef FEDAGG_SERVICE_CORE_CRC32C_H_
#define FEDAGG_SERVICE_CORE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace fedagg {

// Extends `crc` (0 to start) with `size` bytes at `data`. Uses the CPU's CRC32
// instruction where there is one (x86-64 with SSE4.2), the portable code otherwise.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

// The two implementations, for the tests that hold them to each other.
namespace crc32c_internal {
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t size);
// True when this CPU has the instruction; ExtendHardware may be called only then.
bool HardwareAvailable();
uint32_t ExtendHardware(uint32_t crc, const void* data, size_t size);
}  // namespace crc32c_internal

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_CRC32C_H_
