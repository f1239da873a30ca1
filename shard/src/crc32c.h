// CRC-32C (Castagnoli), the checksum of checkpoint files and segments:
// hardware (SSE4.2 crc32 instruction) where the CPU has it, a table
// otherwise. Chainable: crc32c(crc32c(0, a), b) == crc32c(0, a + b).
#pragma once

#include <cstddef>
#include <cstdint>

namespace shard {

uint32_t crc32c(uint32_t crc, const void* data, size_t n);

}  // namespace shard
