#include "checkpoint_manifest.h"
#include "shard/hex.h"

#include "crc32c.h"

#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace shard {
namespace {

// The dtype of what shard files hold for a parameter: the fp32 master.
constexpr const char* kStoredDtype = "float32";
constexpr char kIndexMagic[8] = {'G', 'S', 'C', 'R', 'C', '0', '0', '1'};

// `extra` in the manifest's text: hex, "-" for none.
std::string extra_text(const std::string& extra) { return extra.empty() ? "-" : to_hex(extra); }
std::string extra_from_text(const std::string& h, const std::string& where) {
  if (h == "-") return "";
  try {
    return from_hex(h);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(where + ": bad extra field (" + e.what() + ")");
  }
}

void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
}
uint64_t get_u64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

}  // namespace

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

int64_t Manifest::part_offset(size_t u, int part) const {
  int64_t off = sizeof kShardMagic;
  for (size_t i = 0; i < u; ++i) off += kCheckpointParts * units[i].shard * static_cast<int64_t>(sizeof(float));
  return off + part * units[u].shard * static_cast<int64_t>(sizeof(float));
}

std::string manifest_param_line(const std::string& name, int64_t offset, int64_t numel,
                                const std::vector<int64_t>& shape, int version) {
  std::ostringstream os;
  os << name << " " << offset << " " << numel;
  if (version >= 3) os << " " << kStoredDtype;
  os << " " << shape.size();
  for (auto d : shape) os << " " << d;
  return os.str();
}

std::string manifest_text(const Manifest& m) {
  std::ostringstream out;
  out << "greenshard-checkpoint " << kCheckpointFormatVersion << "\n"
      << "world_size " << m.world_size << "\n"
      << "shard_group_size " << m.group_size << "\n"
      << "strategy " << m.strategy << "\n"
      << "step " << m.step << "\n"
      << "extra " << extra_text(m.extra) << "\n"
      << "adam_state " << (m.adam ? 1 : 0) << " " << m.adam_step << "\n"
      << "units " << m.units.size() << "\n";
  for (const auto& u : m.units) {
    out << "unit " << u.name << " " << u.numel << " " << u.padded << " " << u.shard << " " << u.params.size() << "\n";
    for (const auto& p : u.params) out << "param " << p << "\n";
  }
  out << "chunk_bytes " << m.chunk_bytes << "\n";
  out << "files " << m.files.size() << "\n";
  for (size_t r = 0; r < m.files.size(); ++r)
    out << "file rank_" << r << ".bin " << m.files[r].size << " " << hex64(m.files[r].crc) << " rank_" << r
        << ".crc " << hex64(m.files[r].index_crc) << "\n";
  return out.str();
}

Manifest parse_manifest(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  Manifest m;
  std::string line, key;
  int lineno = 0;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("checkpoint: " + path + " line " + std::to_string(lineno) + ": " + why);
  };
  auto next = [&](const std::string& want) -> std::istringstream {
    if (!std::getline(in, line)) fail("unexpected end, expected '" + want + "'");
    ++lineno;
    std::istringstream ls(line);
    ls >> key;
    if (key != want) fail("expected '" + want + "', got '" + key + "'");
    return ls;
  };
  auto crc32_value = [&](const std::string& h) {
    const unsigned long long v = std::stoull(h, nullptr, 16);
    if (v > 0xFFFFFFFFull) fail("checksum '" + h + "' is not a CRC-32C");
    return static_cast<uint32_t>(v);
  };
  try {
    int& version = m.version;
    next("greenshard-checkpoint") >> version;
    if (version < kOldestReadableCheckpointVersion || version > kCheckpointFormatVersion)
      fail("unsupported format version " + std::to_string(version) + " (this build reads versions " +
           std::to_string(kOldestReadableCheckpointVersion) + " to " + std::to_string(kCheckpointFormatVersion) + ")");
    next("world_size") >> m.world_size;
    next("shard_group_size") >> m.group_size;
    next("strategy") >> m.strategy;
    next("step") >> m.step;
    std::string hex;
    next("extra") >> hex;
    m.extra = extra_from_text(hex, path);
    next("adam_state") >> m.adam >> m.adam_step;
    size_t units = 0;
    next("units") >> units;
    if (m.world_size < 1 || m.world_size > (1 << 20) || m.group_size < 1 || m.world_size % m.group_size ||
        units > 100000)
      fail("inconsistent sizes");
    for (size_t u = 0; u < units; ++u) {
      ManifestUnit mu;
      size_t nparams = 0;
      auto ls = next("unit");
      ls >> mu.name >> mu.numel >> mu.padded >> mu.shard >> nparams;
      // A shard of at most 2^40 elements keeps every product and sum below
      // (padded, data bytes, part offsets: <= 2^20 ranks, <= 100000 units)
      // far from int64 overflow; a real one is many orders smaller.
      if (!ls || mu.shard < 0 || mu.shard > kMaxShardElements || mu.padded != mu.shard * m.group_size ||
          mu.numel < 0 || mu.numel > mu.padded || nparams > 1000000)
        fail("bad unit line");
      for (size_t p = 0; p < nparams; ++p) {
        auto ps = next("param");
        if (version >= 3) {
          std::string pname, dtype;
          int64_t offset = 0, numel = 0;
          ps >> pname >> offset >> numel >> dtype;
          if (!ps) fail("bad param line");
          if (dtype != kStoredDtype)
            fail("parameter '" + pname + "' has dtype '" + dtype + "'; shard files hold " + kStoredDtype);
        }
        // What follows the key (a line may start with blanks: not line.substr(6)).
        const size_t rest = line.find_first_not_of(" \t\r\f\v", line.find("param") + 5);
        mu.params.push_back(rest == std::string::npos ? "" : line.substr(rest));
      }
      m.units.push_back(std::move(mu));
    }
    if (version >= 4) {
      next("chunk_bytes") >> m.chunk_bytes;
      if (m.chunk_bytes < 4096 || m.chunk_bytes > (int64_t{1} << 30)) fail("bad chunk_bytes");
    }
    size_t files = 0;
    next("files") >> files;
    if (files != static_cast<size_t>(m.world_size)) fail("expected one file per rank");
    int64_t data_bytes = sizeof kShardMagic;
    for (const auto& u : m.units) data_bytes += kCheckpointParts * u.shard * static_cast<int64_t>(sizeof(float));
    for (size_t f = 0; f < files; ++f) {
      std::string name, sum;
      FileChecks fc;
      auto ls = next("file");
      ls >> name >> fc.size >> sum;
      if (name != "rank_" + std::to_string(f) + ".bin") fail("unexpected file name " + name);
      if (!ls || fc.size != data_bytes)
        fail(name + ": " + std::to_string(fc.size) + " bytes, the units make " + std::to_string(data_bytes));
      fc.crc = crc32_value(sum);
      if (version >= 4) {
        std::string index, index_sum;
        ls >> index >> index_sum;
        if (index != "rank_" + std::to_string(f) + ".crc") fail("unexpected index name " + index);
        fc.index_crc = crc32_value(index_sum);
      } else {
        auto segs = next("segments");
        for (size_t u = 0; u < m.units.size(); ++u)
          for (int p = 0; p < kCheckpointParts; ++p) {
            std::string h;
            if (!(segs >> h))
              fail("expected " + std::to_string(kCheckpointParts * m.units.size()) + " segment checksums");
            fc.starts.push_back(m.part_offset(u, p));
            fc.crcs.push_back(crc32_value(h));
          }
      }
      m.files.push_back(std::move(fc));
    }
  } catch (const std::invalid_argument&) {
    fail("unparsable value");
  } catch (const std::out_of_range&) {
    fail("value out of range");
  }
  return m;
}

std::string chunk_index_bytes(const std::vector<uint32_t>& crcs, int64_t chunk_bytes) {
  std::string s(kIndexMagic, sizeof kIndexMagic);
  put_u64(s, static_cast<uint64_t>(chunk_bytes));
  put_u64(s, crcs.size());
  for (uint32_t c : crcs)
    for (int i = 0; i < 4; ++i) s += static_cast<char>((c >> (8 * i)) & 0xFF);
  return s;
}

void read_chunk_index(Manifest& m, int r, const std::string& bytes, const std::string& where) {
  FileChecks& fc = m.files.at(r);
  auto fail = [&](const std::string& why) { throw std::runtime_error("checkpoint: " + where + ": " + why); };
  if (crc32c(0, bytes.data(), bytes.size()) != fc.index_crc) fail("checksum mismatch (corrupted chunk index)");
  if (bytes.size() < 24 || std::memcmp(bytes.data(), kIndexMagic, sizeof kIndexMagic) != 0)
    fail("not a GreenShard chunk index");
  const auto chunk = static_cast<int64_t>(get_u64(bytes, 8));
  const auto count = get_u64(bytes, 16);
  const auto want = static_cast<uint64_t>((fc.size + m.chunk_bytes - 1) / m.chunk_bytes);
  if (chunk != m.chunk_bytes || count != want || bytes.size() != 24 + 4 * count)
    fail("chunk index does not match the manifest (chunk size or count)");
  fc.starts.resize(count);
  fc.crcs.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t c = 0;
    for (int k = 0; k < 4; ++k) c |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[24 + 4 * i + k])) << (8 * k);
    fc.starts[i] = static_cast<int64_t>(i) * m.chunk_bytes;
    fc.crcs[i] = c;
  }
}

}  // namespace shard
