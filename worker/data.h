// Data: the byte-level tokenizer, the token-file format, and the sampler.
//
// Token file (little-endian):
//   offset 0   8 bytes  magic "GSTOK001"
//   offset 8   u32      format version (1)
//   offset 12  u32      token width in bytes (1, 2 or 4)
//   offset 16  u64      token count
//   offset 24  u64      vocabulary size
//   offset 32  tokens
// No LibTorch here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace greenshard {

// Byte-level tokenizer: token = byte value, vocabulary 256.
struct ByteTokenizer {
  static constexpr int64_t kVocab = 256;
  std::vector<uint32_t> encode(const std::string& text) const;
  std::string decode(const std::vector<uint32_t>& tokens) const;
};

// Writes a token file (temp name + rename). Throws std::runtime_error.
void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int64_t vocab);

// A read-only, memory-mapped token file. Throws std::runtime_error naming
// the file on a wrong magic, version or width, a size that does not match
// the header (truncated), or a token outside the vocabulary.
class TokenFile {
 public:
  explicit TokenFile(const std::string& path);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  int64_t size() const { return count_; }
  int64_t vocab() const { return vocab_; }
  const std::string& path() const { return path_; }
  uint32_t at(int64_t i) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* tokens_ = nullptr;
  int width_ = 1;
  int64_t count_ = 0, vocab_ = 0;
};

// prepare: text files -> DIR/train.bin and DIR/val.bin (the last
// val_fraction of the tokens). Returns the token counts.
struct PrepareResult {
  int64_t train_tokens = 0, val_tokens = 0;
};
PrepareResult prepare_token_files(const std::vector<std::string>& inputs, const std::string& out_dir,
                                  double val_fraction);

// Batches as a pure function of (seed, step, micro-batch, global row): the
// data position is the step, so a resumed run sees exactly the batches the
// uninterrupted one would have, on any world size (rows are numbered
// globally: rank r owns rows [r * batch, (r + 1) * batch)).
class Sampler {
 public:
  Sampler(const TokenFile& file, int64_t context, uint64_t seed);
  // Fills idx and targets, each rows x context, row-major.
  void batch(int64_t step, int64_t micro, int64_t first_row, int64_t rows, std::vector<int64_t>& idx,
             std::vector<int64_t>& targets) const;

 private:
  const TokenFile& file_;
  int64_t context_;
  uint64_t seed_;
};

}  // namespace greenshard
