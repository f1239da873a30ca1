// The shape of a GPT: the one struct a job spec's `model` section, a model
// card (worker/model_card.h: what an export or a checkpoint was trained
// as) and the model's own GPTConfig (worker/model.h: gpt_config) are
// built from. No LibTorch here.
#pragma once

#include <cstdint>

namespace greenshard {

struct ModelShape {
  int64_t layers = 0;   // transformer blocks
  int64_t heads = 0;    // attention heads (divide embd)
  int64_t embd = 0;     // model width
  int64_t context = 0;  // the longest sequence (block size)
  int64_t vocab = 0;    // vocabulary size
};

}  // namespace greenshard
