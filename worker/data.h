// Data: the token-file format, memory-mapped token files and datasets of
// shards, and the sampler. Preparation (text -> shards): worker/prepare.h.
//
// Token file (little-endian), version 2 (what prepare writes):
//   offset 0   8 bytes  magic "GSTOK001"
//   offset 8   u32      format version (2)
//   offset 12  u32      token width in bytes: 1 if vocab <= 256, 2 if <= 65536, else 4
//   offset 16  u64      token count
//   offset 24  u64      vocabulary size
//   offset 32  u32      tokenizer kind: 0 byte, 1 SentencePiece
//   offset 36  u32      0
//   offset 40  32 bytes SHA-256 of the SentencePiece .model (raw; zeros for byte)
//   offset 72  56 bytes 0
//   offset 128 tokens
// Version 1 (still read; write_token_file(path, tokens, vocab) writes it):
// the same first 32 bytes, tokens at offset 32, no tokenizer recorded (it
// is the byte tokenizer: TokenFile::tokenizer() says kByte with the file's
// vocabulary).
// No LibTorch here.
#pragma once

#include "worker/tokenizer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace greenshard {

// Bytes per token for a vocabulary: 1 (<= 256), 2 (<= 65536) or 4.
int token_width(int64_t vocab);

// Writes a version-1 token file (temp name + rename). Throws std::runtime_error.
void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int64_t vocab);
// Writes a version-2 token file recording `tokenizer` (its vocab is the file's).
void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, const TokenizerInfo& tokenizer);

// Writes a version-2 token file as a stream: tokens go to `path`.tmp, whose
// header is completed and which is renamed to `path` by finish(); destroyed
// unfinished, it removes the temp file. Throws std::runtime_error naming it.
class TokenFileWriter {
 public:
  TokenFileWriter(const std::string& path, const TokenizerInfo& tokenizer);
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;
  int width() const { return width_; }
  int64_t count() const { return count_; }
  // `n` tokens already packed little-endian in width() bytes each (not checked).
  void append_packed(const void* data, int64_t n);
  void finish();

 private:
  std::string path_, tmp_;
  TokenizerInfo tokenizer_;
  int fd_ = -1;
  int width_ = 1;
  int64_t count_ = 0;
};

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
  int version() const { return version_; }
  int width() const { return width_; }
  const std::string& path() const { return path_; }
  // Version 1: {kByte, vocab(), ""}.
  const TokenizerInfo& tokenizer() const { return tokenizer_; }
  uint32_t at(int64_t i) const {
    uint32_t v = 0;
    __builtin_memcpy(&v, tokens_ + i * width_, static_cast<size_t>(width_));
    return v;
  }

 private:
  std::string path_;
  TokenizerInfo tokenizer_;
  int version_ = 1;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* tokens_ = nullptr;
  int width_ = 1;
  int64_t count_ = 0, vocab_ = 0;
};

// Every shard of a dataset, memory-mapped, read as one token sequence (the
// shards concatenated in name order). The spec is
//   - a token file (version 1 or 2), e.g. DIR/train.bin, or
//   - a glob(3) pattern, e.g. DIR/train-*.bin (it must match a file; the
//     matches are taken in glob's sorted order).
// Throws std::runtime_error naming the file on a bad shard, naming the spec
// when a glob matches nothing, and naming both files when two shards
// disagree on the tokenizer (kind, vocabulary or model SHA-256).
class TokenDataset {
 public:
  explicit TokenDataset(const std::string& spec);
  // A dataset of one already open file (not owned; it must outlive this).
  static TokenDataset of(const TokenFile& file);
  int64_t size() const { return size_; }
  int64_t vocab() const { return tokenizer_.vocab; }
  const TokenizerInfo& tokenizer() const { return tokenizer_; }
  const std::string& spec() const { return spec_; }
  size_t shards() const { return shards_.size(); }
  const TokenFile& shard(size_t k) const { return *shards_[k]; }
  // Token i of the concatenation, 0 <= i < size().
  uint32_t at(int64_t i) const;
  // "SPEC: N shards, T tokens, tokenizer KIND vocab V[ sha256 H]"
  std::string describe() const;

 private:
  TokenDataset() = default;
  std::string spec_;
  std::vector<std::shared_ptr<const TokenFile>> shards_;
  std::vector<int64_t> starts_;   // first global index of each shard
  int64_t size_ = 0;
  TokenizerInfo tokenizer_;
};

// Batches as a pure function of (seed, step, micro-batch, global row): the
// data position is the step, so a resumed run sees exactly the batches the
// uninterrupted one would have, on any world size (rows are numbered
// globally: rank r owns rows [r * batch, (r + 1) * batch)).
class Sampler {
 public:
  Sampler(const TokenDataset& data, int64_t context, uint64_t seed);
  // Transitional: a dataset of one file (TokenDataset::of).
  Sampler(const TokenFile& file, int64_t context, uint64_t seed);
  // Fills idx and targets, each rows x context, row-major.
  void batch(int64_t step, int64_t micro, int64_t first_row, int64_t rows, std::vector<int64_t>& idx,
             std::vector<int64_t>& targets) const;

 private:
  std::shared_ptr<const TokenDataset> owned_;
  const TokenDataset* data_;
  int64_t context_;
  uint64_t seed_;
};

}  // namespace greenshard
