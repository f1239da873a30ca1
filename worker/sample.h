// `greenshard-worker sample`: text from a trained GPT, with a KV cache.
//
//   greenshard-worker sample (--checkpoint DIR | --export FILE) --prompt TEXT --tokens N
//                            [--temperature T] [--top-k K] [--seed S] [--tokenizer-model FILE]
//
// prints the prompt followed by N generated tokens' text, and a newline.
//
//   --export FILE      a consolidated state dict (shard::export_full_state_dict,
//                      either format) with its model card FILE.json next to it.
//   --checkpoint DIR   a checkpoint root (its newest checkpoint with a DONE
//                      marker) or one step directory (…/step_NNNNNNNN), local
//                      or s3://; the model card is the "card" object of the
//                      checkpoint's record (worker/run_state.h).
//   --temperature T    0: greedy (argmax); else softmax(logits / T).
//   --top-k K          draw among the K likeliest tokens only (0: all).
//   --seed S           the sampling generator's seed: a fixed seed gives the
//                      same text every time.
//   --tokenizer-model  the SentencePiece .model to use instead of the path
//                      the card records (its SHA-256 must match the card's).
//
// Context: the prompt must have fewer tokens than the model's context. The
// cache holds at most `context` positions; when it is full and more tokens
// are wanted, the window slides: the cache is rebuilt from the last
// ceil(context / 2) tokens (positions start again at 0), so generation may
// go on past the context at the cost of one re-encoding every
// floor(context / 2) tokens. Tokens the tokenizer cannot decode (model
// vocabulary larger than the tokenizer's) are never drawn.
//
// The model runs on the CPU in fp32, unsharded, in this process (a
// checkpoint or export is read through a one-rank shard::FullyShardedModel
// on a private loopback rendezvous).
#pragma once

#include "worker/model.h"
#include "worker/model_card.h"

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace greenshard {

struct SampleOptions {
  std::string checkpoint;       // --checkpoint DIR
  std::string export_path;      // --export FILE
  std::string prompt;           // --prompt TEXT
  int64_t tokens = 0;           // --tokens N (>= 1)
  double temperature = 1.0;     // --temperature T (>= 0; 0 = greedy)
  int64_t top_k = 0;            // --top-k K (0 = all; <= the model's vocabulary)
  uint64_t seed = 1337;         // --seed S
  std::string tokenizer_model;  // --tokenizer-model FILE ("" = the card's)
};

// Adds the `sample` subcommand with its flags bound to `o`; returns it.
CLI::App* add_sample_command(CLI::App& app, SampleOptions& o);

// Runs `sample`: writes the prompt and the generated text to `out`; returns
// 0. Throws ConfigError (worker/config.h) naming the flag on a bad flag
// value, std::runtime_error naming the file on a missing, corrupt or
// mismatched checkpoint, export, card or tokenizer.
int run_sample(const SampleOptions& o, std::ostream& out);

// The model and card behind --checkpoint or --export (exactly one set in
// `o`), as run_sample loads them: an unsharded fp32 CPU GPT in eval mode.
struct SampleModel {
  ModelCard card;
  GPT model{nullptr};
};
SampleModel load_sample_model(const SampleOptions& o);

struct GenerateOptions {
  int64_t tokens = 1;         // how many to generate (>= 1)
  double temperature = 1.0;   // 0 = greedy
  int64_t top_k = 0;          // 0 = all
  uint64_t seed = 1337;
  int64_t allowed_vocab = 0;  // > 0: tokens >= allowed_vocab are never drawn
};

// The generated tokens (not the prompt) after `prompt` (1 <= size <
// block_size), with the KV cache and the sliding window described above.
// Deterministic for a given seed. Throws std::invalid_argument on bad
// options.
std::vector<int64_t> generate(GPTImpl& model, const std::vector<int64_t>& prompt, const GenerateOptions& g);

// How many of the newest tokens the window keeps when it slides.
inline int64_t sample_window_keep(int64_t context) { return (context + 1) / 2; }

}  // namespace greenshard
