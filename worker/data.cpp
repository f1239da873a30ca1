#include "worker/data.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace greenshard {
namespace {

constexpr char kMagic[8] = {'G', 'S', 'T', 'O', 'K', '0', '0', '1'};
constexpr uint32_t kVersion1 = 1, kVersion2 = 2;
constexpr size_t kHeader1 = 32, kHeader2 = 128;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The version-2 header for `count` tokens.
std::string header_v2(const TokenizerInfo& t, uint64_t count) {
  std::string h(kHeader2, '\0');
  std::memcpy(h.data(), kMagic, 8);
  const uint32_t width = static_cast<uint32_t>(token_width(t.vocab));
  const uint64_t v = static_cast<uint64_t>(t.vocab);
  const uint32_t kind = t.kind == TokenizerKind::kByte ? 0 : 1;
  std::memcpy(h.data() + 8, &kVersion2, 4);
  std::memcpy(h.data() + 12, &width, 4);
  std::memcpy(h.data() + 16, &count, 8);
  std::memcpy(h.data() + 24, &v, 8);
  std::memcpy(h.data() + 32, &kind, 4);
  if (t.kind == TokenizerKind::kSentencePiece) {
    if (t.model_sha256.size() != 64) throw std::invalid_argument("token file: tokenizer SHA-256 must be 64 hex digits");
    for (int i = 0; i < 32; ++i) {
      const int hi = hex_value(t.model_sha256[2 * i]), lo = hex_value(t.model_sha256[2 * i + 1]);
      if (hi < 0 || lo < 0) throw std::invalid_argument("token file: tokenizer SHA-256 is not hex");
      h[40 + i] = static_cast<char>(hi * 16 + lo);
    }
  }
  return h;
}

void check_tokenizer(const TokenizerInfo& t) {
  if (t.vocab < 2 || t.vocab > (int64_t{1} << 32)) throw std::invalid_argument("token file: bad vocabulary size " + std::to_string(t.vocab));
  if (t.kind == TokenizerKind::kByte && t.vocab > 256) throw std::invalid_argument("token file: a byte tokenizer has vocabulary <= 256");
}

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(path + ": write failed: " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

int token_width(int64_t vocab) { return vocab <= 256 ? 1 : vocab <= 65536 ? 2 : 4; }

void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int64_t vocab) {
  const uint32_t width = static_cast<uint32_t>(token_width(vocab));
  constexpr size_t kHeader = kHeader1;
  std::string bytes(kHeader + tokens.size() * width, '\0');
  std::memcpy(bytes.data(), kMagic, 8);
  const uint64_t count = tokens.size(), v = static_cast<uint64_t>(vocab);
  std::memcpy(bytes.data() + 8, &kVersion1, 4);
  std::memcpy(bytes.data() + 12, &width, 4);
  std::memcpy(bytes.data() + 16, &count, 8);
  std::memcpy(bytes.data() + 24, &v, 8);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= v) throw std::runtime_error("write_token_file: token out of vocabulary");
    std::memcpy(bytes.data() + kHeader + i * width, &tokens[i], width);  // little-endian
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("write failed: " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, const TokenizerInfo& tokenizer) {
  TokenFileWriter w(path, tokenizer);
  const int width = w.width();
  std::string packed(tokens.size() * static_cast<size_t>(width), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= static_cast<uint64_t>(tokenizer.vocab)) throw std::runtime_error("write_token_file: token out of vocabulary");
    std::memcpy(packed.data() + i * width, &tokens[i], static_cast<size_t>(width));
  }
  w.append_packed(packed.data(), static_cast<int64_t>(tokens.size()));
  w.finish();
}

TokenFileWriter::TokenFileWriter(const std::string& path, const TokenizerInfo& tokenizer)
    : path_(path), tmp_(path + ".tmp"), tokenizer_(tokenizer) {
  check_tokenizer(tokenizer);
  width_ = token_width(tokenizer.vocab);
  const std::string h = header_v2(tokenizer, 0);  // completed by finish()
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(tmp_ + ": cannot write: " + std::strerror(errno));
  write_all(fd_, h.data(), h.size(), tmp_);
}

TokenFileWriter::~TokenFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void TokenFileWriter::append_packed(const void* data, int64_t n) {
  if (fd_ < 0) throw std::runtime_error(path_ + ": append after finish");
  write_all(fd_, data, static_cast<size_t>(n) * static_cast<size_t>(width_), tmp_);
  count_ += n;
}

void TokenFileWriter::finish() {
  if (fd_ < 0) throw std::runtime_error(path_ + ": finished twice");
  const std::string h = header_v2(tokenizer_, static_cast<uint64_t>(count_));
  if (::pwrite(fd_, h.data(), h.size(), 0) != static_cast<ssize_t>(h.size()))
    throw std::runtime_error(tmp_ + ": write failed: " + std::strerror(errno));
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(tmp_.c_str());
    throw std::runtime_error(tmp_ + ": close failed: " + std::strerror(errno));
  }
  fd_ = -1;
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) {
    ::unlink(tmp_.c_str());
    throw std::runtime_error(path_ + ": cannot rename from " + tmp_ + ": " + ec.message());
  }
}

TokenFile::TokenFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error(path + ": cannot open token file: " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  size_t size = static_cast<size_t>(st.st_size);
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(path + ": not a regular file");
  }
  if (size < kHeader1) {
    ::close(fd);
    throw std::runtime_error(path + ": not a token file (" + std::to_string(size) + " bytes, shorter than the header)");
  }
  map_ = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw std::runtime_error(path + ": mmap failed");
  }
  map_bytes_ = size;
  const auto* p = static_cast<const unsigned char*>(map_);
  auto fail = [&](const std::string& why) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw std::runtime_error(path + ": " + why);
  };
  if (std::memcmp(p, kMagic, 8) != 0) fail("not a token file (bad magic; create it with 'greenshard-worker prepare')");
  uint32_t version = 0, width = 0;
  uint64_t count = 0, vocab = 0;
  std::memcpy(&version, p + 8, 4);
  std::memcpy(&width, p + 12, 4);
  std::memcpy(&count, p + 16, 8);
  std::memcpy(&vocab, p + 24, 8);
  if (version != kVersion1 && version != kVersion2)
    fail("unsupported token-file version " + std::to_string(version) + " (this build reads 1 and 2)");
  const size_t kHeader = version == kVersion1 ? kHeader1 : kHeader2;
  if (size < kHeader)
    fail(std::to_string(size) + " bytes, shorter than the " + std::to_string(kHeader) + "-byte header of version " +
         std::to_string(version) + " (truncated or corrupt)");
  if (width != 1 && width != 2 && width != 4) fail("bad token width " + std::to_string(width));
  if (vocab < 2 || vocab > (1ull << 32)) fail("bad vocabulary size " + std::to_string(vocab));
  if (static_cast<int>(width) != token_width(static_cast<int64_t>(vocab)))
    fail("token width " + std::to_string(width) + " does not fit vocabulary " + std::to_string(vocab));
  version_ = static_cast<int>(version);
  tokenizer_ = {TokenizerKind::kByte, static_cast<int64_t>(vocab), ""};
  if (version == kVersion2) {
    uint32_t kind = 0;
    std::memcpy(&kind, p + 32, 4);
    if (kind > 1) fail("unknown tokenizer kind " + std::to_string(kind));
    if (kind == 0) {
      if (vocab > 256) fail("byte tokenizer with vocabulary " + std::to_string(vocab) + " > 256");
    } else {
      tokenizer_.kind = TokenizerKind::kSentencePiece;
      static const char* kHex = "0123456789abcdef";
      for (int i = 0; i < 32; ++i) {
        tokenizer_.model_sha256 += kHex[p[40 + i] >> 4];
        tokenizer_.model_sha256 += kHex[p[40 + i] & 15];
      }
    }
  }
  if (count > (size - kHeader) / width || kHeader + count * width != size)
    fail("header says " + std::to_string(count) + " tokens of " + std::to_string(width) + " bytes but the file has " +
         std::to_string(size - kHeader) + " bytes of tokens (truncated or corrupt)");
  width_ = static_cast<int>(width);
  count_ = static_cast<int64_t>(count);
  vocab_ = static_cast<int64_t>(vocab);
  tokens_ = p + kHeader;
  if (width_ > 1 ? vocab < (1ull << (8 * width_)) : vocab < 256)
    for (int64_t i = 0; i < count_; ++i)
      if (at(i) >= vocab) fail("token " + std::to_string(i) + " is outside the vocabulary");
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

TokenDataset::TokenDataset(const std::string& spec) : spec_(spec) {
  std::vector<std::string> paths;
  if (spec.empty()) throw std::runtime_error("token dataset: empty path");
  if (has_glob_chars(spec) && !std::filesystem::exists(spec)) {
    glob_t g{};
    const int rc = ::glob(spec.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
    ::globfree(&g);
    if (rc == GLOB_NOMATCH) throw std::runtime_error(spec + ": the pattern matches no token file");
    if (rc != 0) throw std::runtime_error(spec + ": cannot expand the pattern (read error)");
  } else {
    paths.push_back(spec);
  }
  for (const auto& p : paths) {
    auto f = std::make_shared<const TokenFile>(p);
    if (shards_.empty()) {
      tokenizer_ = f->tokenizer();
    } else {
      const auto& t = f->tokenizer();
      if (t.kind != tokenizer_.kind || t.vocab != tokenizer_.vocab || t.model_sha256 != tokenizer_.model_sha256)
        throw std::runtime_error(p + ": tokenizer " + to_string(t.kind) + " vocab " + std::to_string(t.vocab) +
                                 (t.model_sha256.empty() ? "" : " sha256 " + t.model_sha256) + " differs from " +
                                 shards_.front()->path() + "'s (" + to_string(tokenizer_.kind) + " vocab " +
                                 std::to_string(tokenizer_.vocab) +
                                 (tokenizer_.model_sha256.empty() ? "" : " sha256 " + tokenizer_.model_sha256) + ")");
    }
    starts_.push_back(size_);
    size_ += f->size();
    shards_.push_back(std::move(f));
  }
}

TokenDataset TokenDataset::of(const TokenFile& file) {
  TokenDataset d;
  d.spec_ = file.path();
  d.shards_.push_back(std::shared_ptr<const TokenFile>(&file, [](const TokenFile*) {}));
  d.starts_.push_back(0);
  d.size_ = file.size();
  d.tokenizer_ = file.tokenizer();
  return d;
}

uint32_t TokenDataset::at(int64_t i) const {
  if (shards_.size() == 1) return shards_.front()->at(i);
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), i) - 1;
  const size_t k = static_cast<size_t>(it - starts_.begin());
  return shards_[k]->at(i - *it);
}

std::string TokenDataset::describe() const {
  std::string s = spec_ + ": " + std::to_string(shards_.size()) + (shards_.size() == 1 ? " shard, " : " shards, ") +
                  std::to_string(size_) + " tokens, tokenizer " + to_string(tokenizer_.kind) + " vocab " +
                  std::to_string(tokenizer_.vocab);
  if (!tokenizer_.model_sha256.empty()) s += " sha256 " + tokenizer_.model_sha256;
  return s;
}

Sampler::Sampler(const TokenDataset& data, int64_t context, uint64_t seed)
    : data_(&data), context_(context), seed_(seed) {
  if (data.size() < context + 1)
    throw std::runtime_error(data.spec() + ": " + std::to_string(data.size()) + " tokens, fewer than model.context + 1 = " +
                             std::to_string(context + 1));
}

Sampler::Sampler(const TokenFile& file, int64_t context, uint64_t seed)
    : owned_(std::make_shared<const TokenDataset>(TokenDataset::of(file))), data_(owned_.get()), context_(context), seed_(seed) {
  if (data_->size() < context + 1)
    throw std::runtime_error(file.path() + ": " + std::to_string(file.size()) + " tokens, fewer than model.context + 1 = " +
                             std::to_string(context + 1));
}

void Sampler::batch(int64_t step, int64_t micro, int64_t first_row, int64_t rows, std::vector<int64_t>& idx,
                    std::vector<int64_t>& targets) const {
  idx.resize(rows * context_);
  targets.resize(rows * context_);
  const uint64_t span = static_cast<uint64_t>(data_->size() - context_);  // start in [0, span)
  for (int64_t r = 0; r < rows; ++r) {
    uint64_t h = splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(step) * 0x100000001B3ull ^
                                               splitmix64(static_cast<uint64_t>(micro) << 32 ^
                                                          static_cast<uint64_t>(first_row + r))));
    const int64_t start = static_cast<int64_t>(h % span);
    for (int64_t t = 0; t < context_; ++t) {
      idx[r * context_ + t] = data_->at(start + t);
      targets[r * context_ + t] = data_->at(start + t + 1);
    }
  }
}

}  // namespace greenshard
