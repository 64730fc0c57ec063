#pragma once
// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the checksum of zlib, gzip and
// PNG: Python's zlib.crc32 gives the same value, so checkpoint files can be verified by
// other tools.
#include <cstddef>
#include <cstdint>

namespace strata::checkpoint::detail {

// Continues `crc` (0 to start) over n bytes: crc32(b, crc32(a)) == crc32(a + b).
uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);

}  // namespace strata::checkpoint::detail
