// prepare: text -> sharded token files, streaming (greenshard-worker prepare).
//
// Inputs are files or glob(3) patterns, read in the order given (a
// pattern's matches in sorted order), each once and front to back, so a
// named pipe works as well as a file. Text is cut into chunks of whole lines
// (a chunk ends at the last '\n' within its first kChunkBytes; a line longer
// than that is cut at a UTF-8 boundary), encoded on `threads` threads and
// written in stream order; at most threads + 8 chunks are in flight, so
// memory does not grow with the corpus (peak RSS <= 512 MB with the byte
// tokenizer or an existing model; BPE training adds SentencePiece's trainer
// on at most sample_mb of text).
//
// Text rule: the first chunk of every input (its first kChunkBytes) must be
// UTF-8 without NUL bytes, else the input is rejected as not text; later
// bytes are encoded as they are (a byte that is not UTF-8 becomes a byte
// token). An empty input is an error.
//
// Validation split: the token stream is cut into blocks of
// kSplitBlockTokens tokens; block b goes to val iff
// floor((b + 1) * val_fraction) > floor(b * val_fraction) -- every
// (1/val_fraction)-th block, evenly spread. It depends only on the tokens,
// not on chunking or threads: same inputs and options, byte-identical output.
//
// Output (DIR): train-00000.bin, train-00001.bin, ... and val-00000.bin, ...
// (token files version 2, worker/data.h; a new shard every shard_tokens
// tokens), tokenizer.model (SentencePiece only), manifest.json; and, when a
// split has one shard, train.bin / val.bin as symlinks to it (the single-file
// names of version 1). Earlier outputs of prepare in DIR are removed first.
#pragma once

#include "worker/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace greenshard {

inline constexpr size_t kChunkBytes = size_t{1} << 20;
inline constexpr int64_t kSplitBlockTokens = 512;
inline constexpr int64_t kDefaultShardTokens = int64_t{1} << 28;

struct PrepareOptions {
  std::vector<std::string> inputs;   // paths or glob patterns
  std::string out_dir;
  double val_fraction = 0.05;        // [0, 1)
  std::string tokenizer = "byte";    // byte | bpe
  int64_t vocab = 8192;              // bpe: trained vocabulary
  std::string tokenizer_model;       // an existing SentencePiece .model (implies bpe)
  int64_t shard_tokens = kDefaultShardTokens;
  int threads = 0;                   // 0: hardware threads; at most 64
  int64_t sample_mb = 16;            // bpe training: the first MB of the stream, [1, 256]
  uint32_t seed = 1234;              // SentencePiece trainer seed
};

struct PrepareResult {
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t input_bytes = 0;
  std::vector<std::string> train_files, val_files;   // full paths
  TokenizerInfo tokenizer;
  std::string tokenizer_model;       // DIR/tokenizer.model or ""
  double encode_seconds = 0;         // reading + encoding + writing (not training)
  double train_seconds = 0;          // BPE training
};

// Throws std::invalid_argument naming the flag or input file on bad options
// or input (greenshard-worker: config error, exit 2), std::runtime_error on
// output I/O errors.
PrepareResult prepare(const PrepareOptions& opt);

}  // namespace greenshard
