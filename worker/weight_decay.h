// Decoupled weight decay as nanoGPT applies it: only to parameters with two
// or more dimensions (matmul weights and the embeddings wte, wpe; wte is also
// the tied lm_head), never to biases or LayerNorm weights. nanoGPT's
// configure_optimizers builds two AdamW parameter groups on the rule
// p.dim() >= 2; FSDP has one flat parameter per unit mixing both kinds, so
// here the AdamW runs with weight_decay 0 and this class decays the selected
// elements of each flat shard, through FullyShardedModel::shard_masks.
//
// Per step, exactly what torch::optim::AdamW does to a group with
// weight_decay wd before its Adam update:  p <- p * (1 - lr * wd)  where the
// mask is true, for each shard that has a gradient (AdamW skips the others).
// Call apply(lr) right before opt.step(), after clipping. The masks come from
// the layout, never from a checkpoint, so they hold at any world size.
#pragma once

#include "shard/fully_shard.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace greenshard {

// nanoGPT's rule: decay a parameter iff it has >= 2 dimensions.
bool decays(const std::string& name, at::IntArrayRef shape);

class MaskedWeightDecay {
 public:
  // Keeps fsdp's flat parameters and their dim >= 2 masks. wd >= 0.
  MaskedWeightDecay(shard::FullyShardedModel& fsdp, double weight_decay);

  // p <- p * (1 - lr * wd) on the masked elements of every flat parameter
  // with a defined gradient. A no-op when wd == 0.
  void apply(double lr);

  double weight_decay() const { return wd_; }
  // Elements (over this rank's shards) that decay.
  int64_t decayed_numel() const;

 private:
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> masks_;
  double wd_;
};

}  // namespace greenshard
