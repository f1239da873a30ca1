// CRC-32C (Castagnoli), the checksum of checkpoint files and segments:
// hardware (SSE4.2 crc32 instruction) where the CPU has it, a table
// otherwise. Chainable: crc32c(crc32c(0, a), b) == crc32c(0, a + b).
#pragma once

#include <cstddef>
#include <cstdint>

namespace shard {

uint32_t crc32c(uint32_t crc, const void* data, size_t n);

// crc32c(0, a + b) from crc_a = crc32c(0, a), crc_b = crc32c(0, b) and b's
// length, without the bytes (zlib's crc32_combine, for this polynomial): a
// file's checksum from its chunks' checksums.
uint32_t crc32c_concat(uint32_t crc_a, uint32_t crc_b, size_t len_b);

}  // namespace shard
