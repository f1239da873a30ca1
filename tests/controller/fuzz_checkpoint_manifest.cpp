// libFuzzer target for the checkpoint manifest (manifest.txt) and the
// per-rank chunk index (rank_<r>.crc) parsers, shard/src/checkpoint_manifest.cpp
// (no LibTorch). Input: manifest text, optionally followed by "\n@@index\n"
// and the bytes of rank 0's chunk index (its CRC is made to match, so the
// fuzzer reaches the checks behind it). Both may only throw
// std::runtime_error; an accepted manifest must survive manifest_text().
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "checkpoint_manifest.h"
#include "crc32c.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const std::string sep = "\n@@index\n";
  const size_t at = in.find(sep);
  const std::string text = in.substr(0, at);
  shard::Manifest m;
  try {
    m = shard::parse_manifest(text, "fuzz/manifest.txt");
  } catch (const std::runtime_error&) {
    return 0;
  }
  if (m.version == shard::kCheckpointFormatVersion) {
    const std::string canon = shard::manifest_text(m);
    if (shard::manifest_text(shard::parse_manifest(canon, "canon")) != canon) std::abort();
  }
  for (size_t u = 0; u < m.units.size(); ++u)
    for (int p = 0; p < shard::kCheckpointParts; ++p) (void)m.part_offset(u, p);
  if (at != std::string::npos && !m.files.empty()) {
    const std::string idx = in.substr(at + sep.size());
    m.files[0].index_crc = shard::crc32c(0, idx.data(), idx.size());
    try {
      shard::read_chunk_index(m, 0, idx, "fuzz/rank_0.crc");
    } catch (const std::runtime_error&) {
    }
  }
  return 0;
}
