// CRC-32C (Castagnoli), the checksum a client sends at the end of every update so that
// the server can tell a corrupted update from a good one before counting it.
#ifndef FEDAGG_SERVICE_CORE_CRC32C_H_
#define FEDAGG_SERVICE_CORE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace fedagg {

// Extends `crc` (0 to start) with `size` bytes at `data`.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_CRC32C_H_
