// The checkpoint manifest (manifest.txt) and the per-rank chunk index
// (rank_<r>.crc): what a checkpoint holds and the checksums that let a
// reader verify exactly the bytes it reads. Formats: docs/shard.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shard {

constexpr int kCheckpointFormatVersion = 4;
constexpr int kOldestReadableCheckpointVersion = 2;
constexpr int kCheckpointParts = 3;  // per unit: master, exp_avg, exp_avg_sq (fp32)
constexpr int64_t kMaxShardElements = int64_t{1} << 40;  // per unit and rank; parse_manifest refuses more
constexpr char kShardMagic[8] = {'G', 'S', 'C', 'K', 'P', 'T', '0', '1'};
// v4: CRC-32C per fixed-size chunk of each shard file (chunk i covers bytes
// [i * chunk_bytes, (i + 1) * chunk_bytes)), kept in rank_<r>.crc.
constexpr int64_t kCheckpointChunkBytes = 64 << 10;

struct ManifestUnit {
  std::string name;  // "<root>" for the root unit
  int64_t numel = 0, padded = 0, shard = 0;
  std::vector<std::string> params;  // "name offset numel [dtype] ndim dims..." as in the manifest's version
};

// The byte ranges of one shard file a reader can verify on their own.
struct FileChecks {
  int64_t size = 0;
  uint32_t crc = 0;             // of the whole file
  uint32_t index_crc = 0;       // v4: of rank_<r>.crc
  std::vector<int64_t> starts;  // ascending; range i is [starts[i], starts[i + 1] or size)
  std::vector<uint32_t> crcs;   // CRC-32C of range i
};

struct Manifest {
  int version = kCheckpointFormatVersion;
  int world_size = 0, group_size = 0;
  std::string strategy;
  int64_t step = 0;
  std::string extra;
  bool adam = false;
  int64_t adam_step = 0;
  std::vector<ManifestUnit> units;
  int64_t chunk_bytes = kCheckpointChunkBytes;  // v4
  // One per rank. v2/v3: ranges are the segments (one unit's part), read
  // from the manifest; v4: chunks, filled in from the index (read_index).
  std::vector<FileChecks> files;

  // Byte offset of unit u's part p in every shard file.
  int64_t part_offset(size_t u, int part) const;
};

// "name offset numel dtype ndim d0 d1 ..." for the current version (v2: no dtype).
std::string manifest_param_line(const std::string& name, int64_t offset, int64_t numel,
                                const std::vector<int64_t>& shape, int version = kCheckpointFormatVersion);

// The manifest's text (always the current version). Files need size, crc
// and index_crc.
std::string manifest_text(const Manifest& m);

// Parses manifest text; `where` (the manifest's path) names it in errors
// ("<where> line N: ..."). Throws std::runtime_error.
Manifest parse_manifest(const std::string& text, const std::string& where);

// The chunk index of one shard file (binary, little-endian: magic
// "GSCRC001", u64 chunk_bytes, u64 count, count x u32).
std::string chunk_index_bytes(const std::vector<uint32_t>& crcs, int64_t chunk_bytes);
// Fills files[r].starts/crcs from its index bytes, checking them against the
// manifest (CRC, chunk size, count for the file's size). Throws naming `where`.
void read_chunk_index(Manifest& m, int r, const std::string& bytes, const std::string& where);

std::string hex64(uint64_t v);

}  // namespace shard
