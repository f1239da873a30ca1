// Tokenizers: byte-level (vocabulary 256) and SentencePiece models (BPE or
// unigram, Debian's libsentencepiece). No LibTorch here.
//
// Contract: encode() and decode() are pure functions of the model; a
// tokenizer is identified by its kind and, for SentencePiece, the SHA-256 of
// its .model file (TokenizerInfo), which token files and model cards record
// so that a model is never fed tokens of another tokenizer.
#pragma once

#include "worker/spec/job_spec.h"  // kMaxVocab

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace greenshard {

enum class TokenizerKind { kByte, kSentencePiece };
const char* to_string(TokenizerKind k);   // "byte" | "sentencepiece"

struct TokenizerInfo {
  TokenizerKind kind = TokenizerKind::kByte;
  int64_t vocab = 256;
  std::string model_sha256;   // hex; "" for kByte
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual const TokenizerInfo& info() const = 0;
  int64_t vocab() const { return info().vocab; }
  // Appends the tokens of `text` to `out` (every token < vocab()).
  virtual void encode(std::string_view text, std::vector<uint32_t>& out) const = 0;
  std::vector<uint32_t> encode(std::string_view text) const {
    std::vector<uint32_t> out;
    encode(text, out);
    return out;
  }
  // Tokens to text; throws std::invalid_argument on a token >= vocab().
  virtual std::string decode(const std::vector<uint32_t>& tokens) const = 0;
};

std::unique_ptr<Tokenizer> make_byte_tokenizer();
// Loads a SentencePiece .model file; throws std::runtime_error naming the
// file when it is missing, unreadable or not a SentencePiece model.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path);
// SHA-256 of a file, lower-case hex; throws std::runtime_error naming it.
std::string file_sha256(const std::string& path);

// ---- SentencePiece BPE training (prepare --tokenizer bpe) -------------------
// The model is trained on the lines of a sample text with these settings, so
// that decode(encode(x)) == x for every byte string x: byte_fallback (a byte
// outside the pieces becomes one of 256 byte tokens), identity normalization,
// no dummy prefix, no whitespace folding. encode() cuts text at '\n' and
// encodes each line on its own (a newline is its byte token), as the
// trainer saw it; tokens therefore do not depend on how a stream is chunked.
struct BpeTrainOptions {
  int64_t vocab = 8192;       // [kMinBpeVocab, kMaxVocab]
  int threads = 4;            // trainer threads (recorded in the .model: keep it fixed)
  uint32_t seed = 1234;       // SentencePiece's random generator
};
inline constexpr int64_t kMinBpeVocab = 260;  // 256 byte tokens + unk, bos, eos + 1 piece
// kMaxVocab (worker/spec/job_spec.h): prepare refuses a tokenizer beyond
// the largest vocabulary the trainer takes, rather than a worker hours later.
// Throws std::invalid_argument naming --vocab unless vocab is in
// [kMinBpeVocab, kMaxVocab]: the one check of prepare and the trainer.
void check_bpe_vocab(int64_t vocab);
// Trains on the lines of `sample` and writes `model_path` (temp name +
// rename). The .model is a function of (sample, options) only. Throws
// std::invalid_argument when the options are bad or the sample cannot
// support the vocabulary (SentencePiece's reason included),
// std::runtime_error naming the file on I/O errors.
void train_bpe_tokenizer(std::string_view sample, const std::string& model_path, const BpeTrainOptions& opt);

}  // namespace greenshard
