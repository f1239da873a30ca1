#include "worker/data.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace greenshard {
namespace {

constexpr char kMagic[8] = {'G', 'S', 'T', 'O', 'K', '0', '0', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 32;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<uint32_t> ByteTokenizer::encode(const std::string& text) const {
  return std::vector<uint32_t>(reinterpret_cast<const unsigned char*>(text.data()),
                               reinterpret_cast<const unsigned char*>(text.data()) + text.size());
}

std::string ByteTokenizer::decode(const std::vector<uint32_t>& tokens) const {
  std::string s;
  for (auto t : tokens) s += static_cast<char>(t & 0xFF);
  return s;
}

void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int64_t vocab) {
  const uint32_t width = vocab <= 256 ? 1 : vocab <= 65536 ? 2 : 4;
  std::string bytes(kHeader + tokens.size() * width, '\0');
  std::memcpy(bytes.data(), kMagic, 8);
  const uint64_t count = tokens.size(), v = static_cast<uint64_t>(vocab);
  std::memcpy(bytes.data() + 8, &kVersion, 4);
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

TokenFile::TokenFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error(path + ": cannot open token file: " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < kHeader) {
    ::close(fd);
    throw std::runtime_error(path + ": not a token file (" + std::to_string(size) + " bytes, shorter than the header)");
  }
  map_ = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
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
  if (version != kVersion) fail("unsupported token-file version " + std::to_string(version));
  if (width != 1 && width != 2 && width != 4) fail("bad token width " + std::to_string(width));
  if (vocab < 2 || vocab > (1ull << 32)) fail("bad vocabulary size " + std::to_string(vocab));
  if (count > (size - kHeader) / width || kHeader + count * width != size)
    fail("header says " + std::to_string(count) + " tokens of " + std::to_string(width) + " bytes but the file has " +
         std::to_string(size - kHeader) + " bytes of tokens (truncated or corrupt)");
  width_ = static_cast<int>(width);
  count_ = static_cast<int64_t>(count);
  vocab_ = static_cast<int64_t>(vocab);
  tokens_ = p + kHeader;
  if (width_ > 1 || vocab < 256)
    for (int64_t i = 0; i < count_; ++i)
      if (at(i) >= vocab) fail("token " + std::to_string(i) + " is outside the vocabulary");
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

uint32_t TokenFile::at(int64_t i) const {
  uint32_t v = 0;
  std::memcpy(&v, tokens_ + i * width_, width_);
  return v;
}

PrepareResult prepare_token_files(const std::vector<std::string>& inputs, const std::string& out_dir,
                                  double val_fraction) {
  if (inputs.empty()) throw std::invalid_argument("--input: at least one text file is required");
  if (!(val_fraction >= 0 && val_fraction < 1)) throw std::invalid_argument("--val-fraction: must be in [0, 1)");
  std::string text;
  for (const auto& in : inputs) {
    std::ifstream f(in, std::ios::binary);
    if (!f) throw std::invalid_argument("--input: cannot read '" + in + "'");
    std::ostringstream ss;
    ss << f.rdbuf();
    text += ss.str();
  }
  ByteTokenizer tok;
  auto tokens = tok.encode(text);
  const auto n_val = static_cast<size_t>(tokens.size() * val_fraction);
  if (tokens.size() - n_val < 2) throw std::invalid_argument("--input: too little text to train on");
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (!std::filesystem::is_directory(out_dir)) throw std::invalid_argument("--out: cannot create directory '" + out_dir + "'");
  std::vector<uint32_t> train(tokens.begin(), tokens.end() - static_cast<std::ptrdiff_t>(n_val));
  std::vector<uint32_t> val(tokens.end() - static_cast<std::ptrdiff_t>(n_val), tokens.end());
  write_token_file(out_dir + "/train.bin", train, ByteTokenizer::kVocab);
  if (!val.empty()) write_token_file(out_dir + "/val.bin", val, ByteTokenizer::kVocab);
  return {static_cast<int64_t>(train.size()), static_cast<int64_t>(val.size())};
}

Sampler::Sampler(const TokenFile& file, int64_t context, uint64_t seed) : file_(file), context_(context), seed_(seed) {
  if (file.size() < context + 1)
    throw std::runtime_error(file.path() + ": " + std::to_string(file.size()) + " tokens, fewer than model.context + 1 = " +
                             std::to_string(context + 1));
}

void Sampler::batch(int64_t step, int64_t micro, int64_t first_row, int64_t rows, std::vector<int64_t>& idx,
                    std::vector<int64_t>& targets) const {
  idx.resize(rows * context_);
  targets.resize(rows * context_);
  const uint64_t span = static_cast<uint64_t>(file_.size() - context_);  // start in [0, span)
  for (int64_t r = 0; r < rows; ++r) {
    uint64_t h = splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(step) * 0x100000001B3ull ^
                                               splitmix64(static_cast<uint64_t>(micro) << 32 ^
                                                          static_cast<uint64_t>(first_row + r))));
    const int64_t start = static_cast<int64_t>(h % span);
    for (int64_t t = 0; t < context_; ++t) {
      idx[r * context_ + t] = file_.at(start + t);
      targets[r * context_ + t] = file_.at(start + t + 1);
    }
  }
}

}  // namespace greenshard
