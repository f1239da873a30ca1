// GPT-2-style decoder-only transformer (nanoGPT / llm.c layout) on LibTorch
// C++ modules.
//
// Module tree and parameter names (as in HF GPT-2 / nanoGPT):
//   wte                    Embedding(vocab_size, n_embd)  (also the lm_head)
//   wpe                    Embedding(block_size, n_embd)
//   h.<i>.ln_1             LayerNorm(n_embd)
//   h.<i>.attn.c_attn      Linear(n_embd, 3*n_embd)   fused q,k,v
//   h.<i>.attn.c_proj      Linear(n_embd, n_embd)     residual projection
//   h.<i>.ln_2             LayerNorm(n_embd)
//   h.<i>.mlp.c_fc         Linear(n_embd, 4*n_embd)
//   h.<i>.mlp.c_proj       Linear(4*n_embd, n_embd)   residual projection
//   ln_f                   LayerNorm(n_embd)
// The lm_head is tied to wte: logits = ln_f(x) @ wte.weight^T, so the weight
// exists once and receives both gradient contributions.
//
// Sharding: GPTImpl, BlockImpl, CausalSelfAttentionImpl and MLPImpl run their
// forward bodies through shard::forward_unit, so any of them may be an FSDP
// unit. (Leaf Linear/Embedding/LayerNorm modules cannot be units.) Parameters
// are read from the submodules at every forward, never cached.
//
// Precision: forward works with fp32 or bf16 parameters. Explicit attention
// computes its softmax in fp32 and casts back; loss() always computes the
// cross-entropy in fp32.
//
// Attention: Attention::kExplicit is matmuls, a causal mask and a softmax
// (O(T^2) memory). Attention::kSdpa is LibTorch's scaled-dot-product
// attention: at::scaled_dot_product_attention (LibTorch >= 2.0: flash or
// memory-efficient kernels on CUDA, O(T) memory) or, on 1.13, its
// predecessor at::_scaled_dot_product_attention (a math composite). Both
// compute the same function; with dropout they draw different masks.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>

#include "worker/spec/model_shape.h"
#include <string>
#include <vector>

namespace greenshard {

enum class Attention { kExplicit, kSdpa };
const char* to_string(Attention a);
// "explicit" | "sdpa"; throws std::invalid_argument naming `field`.
Attention parse_attention(const std::string& text, const std::string& field = "attention");
// What "auto" means in this build: kSdpa with LibTorch >= 2.0 (fused
// kernels), kExplicit on 1.13 (its SDPA is no faster than ours).
Attention default_attention();
// LibTorch's major version this was compiled against.
int torch_major_version();

// Causal self-attention of q, k, v (B, nh, T, hs) -> (B, nh, T, hs), with
// attention dropout p (0 = none).
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
                            Attention kind);

struct GPTConfig {
  int64_t vocab_size = 50257;
  int64_t block_size = 1024;  // maximum context length
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  double dropout = 0.0;  // attention, residual and embedding dropout (train only)
  Attention attention = Attention::kExplicit;
};

// The GPT of `shape` (nanoGPT's names: vocab_size = vocab, block_size =
// context, n_layer, n_head, n_embd): the one translation, for the trainer
// (a job spec's model) and sampling (a model card).
GPTConfig gpt_config(const ModelShape& shape, double dropout, Attention attention);

// Throws std::invalid_argument naming the offending field ("vocab_size",
// "block_size", "n_layer", "n_head", "n_embd", "dropout"): nonpositive sizes,
// n_embd not divisible by n_head, dropout outside [0, 1).
void validate(const GPTConfig& config);

// Exact number of parameters of GPT(config); the tied wte/lm_head weight is
// counted once: L*(12*C^2 + 13*C) + (V + block_size)*C + 2*C.
int64_t num_parameters(const GPTConfig& config);

// Training FLOPs per token at context length seq_len (PaLM appendix B /
// nanoGPT estimate_mfu): 6*N + 12*L*H*Q*T with H*Q = n_embd, T = seq_len, and
// N = num_parameters minus the position embedding (it does no matmul; the
// tied wte does, as the lm_head).
double flops_per_token(const GPTConfig& config, int64_t seq_len);

// Mean cross-entropy of logits (B, T, V) against targets (B, T) (int64),
// computed in fp32 whatever the logits' dtype. Targets equal to -1 are ignored.
at::Tensor loss(const at::Tensor& logits, const at::Tensor& targets);

// Inference with a key/value cache (GPTImpl::forward_cached): per layer the
// keys and values of every position seen so far, (B, nh, capacity, hs)
// each, in the parameters' dtype and device; positions [0, length) are
// filled. capacity <= block_size: a cache never holds more than the context.
struct KVCache {
  std::vector<at::Tensor> k, v;  // one per layer
  int64_t length = 0;            // positions filled
  int64_t capacity() const { return k.empty() ? 0 : k.front().size(2); }
  // Forgets every position (the buffers stay).
  void clear() { length = 0; }
};

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GPTConfig& config);
  // (B, T, C) -> (B, T, C)
  at::Tensor forward(const at::Tensor& x);
  // x (B, T_new, C), the positions past..past+T_new-1 -> (B, T_new, C).
  // Writes their keys and values into k_cache, v_cache (B, nh, capacity, hs)
  // at [past, past + T_new) and attends to positions [0, past + T_new)
  // causally. Explicit attention, no dropout, whatever the config says.
  at::Tensor forward_cached(const at::Tensor& x, at::Tensor& k_cache, at::Tensor& v_cache, int64_t past);

  torch::nn::Linear c_attn{nullptr};
  torch::nn::Linear c_proj{nullptr};

 private:
  int64_t n_head_;
  int64_t n_embd_;
  double dropout_;
  Attention attention_;
};
TORCH_MODULE(CausalSelfAttention);

class MLPImpl : public torch::nn::Module {
 public:
  explicit MLPImpl(const GPTConfig& config);
  // (B, T, C) -> (B, T, C)
  at::Tensor forward(const at::Tensor& x);

  torch::nn::Linear c_fc{nullptr};
  torch::nn::Linear c_proj{nullptr};

 private:
  double dropout_;
};
TORCH_MODULE(MLP);

// One transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const GPTConfig& config);
  // (B, T, C) -> (B, T, C)
  at::Tensor forward(const at::Tensor& x);
  // As forward, with attention through the cache (CausalSelfAttention::forward_cached).
  at::Tensor forward_cached(const at::Tensor& x, at::Tensor& k_cache, at::Tensor& v_cache, int64_t past);

  torch::nn::LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::LayerNorm ln_2{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

class GPTImpl : public torch::nn::Module {
 public:
  // Validates the config and initializes the weights GPT-2 style (normal(0,
  // 0.02), zero biases, c_proj weights normal(0, 0.02/sqrt(2*n_layer)),
  // LayerNorm 1/0). Each parameter draws from its own generator, seeded by
  // init_seed() and its qualified name, so the values do not depend on the
  // order parameters are initialized in; init_seed() is one draw from the
  // global torch RNG: deterministic given torch::manual_seed.
  //
  // deferred = true: no parameter keeps storage (shard::defer_parameters,
  // block by block, so building needs one block's memory at most); shard it
  // with FullyShardOptions::param_init = the model's param_init(), which
  // produces exactly the values the non-deferred build has.
  explicit GPTImpl(const GPTConfig& config, bool deferred = false);

  // Fills `param` (shaped like the parameter `name`) with its initial value.
  void init_parameter(const std::string& name, at::Tensor& param) const;
  // A FullyShardOptions::param_init calling init_parameter (keeps the
  // module alive).
  std::function<void(const std::string&, at::Tensor&)> param_init();
  uint64_t init_seed() const { return init_seed_; }

  // idx (B, T) int64 token ids, T <= block_size -> logits (B, T, vocab_size)
  // in the parameters' dtype.
  at::Tensor forward(const at::Tensor& idx);

  // Inference with a KV cache, on an unsharded model (not wrapped by a
  // shard::FullyShardedModel: the blocks' parameters must be in place) in
  // eval mode semantics (no dropout).
  //
  // An empty cache for `batch` sequences of up to `capacity` positions
  // (1 <= capacity <= block_size; 0 = block_size), in the parameters' dtype
  // and device. Throws std::invalid_argument otherwise.
  KVCache make_cache(int64_t batch, int64_t capacity = 0) const;
  // idx_new (B, T_new) int64, the tokens at positions cache.length ..
  // cache.length + T_new - 1 -> logits (B, T_new, vocab_size): the same
  // logits forward() gives at those positions of the whole sequence (the
  // cached tokens followed by idx_new), within rounding. Appends their keys
  // and values to the cache (length += T_new). Throws std::invalid_argument
  // when the sequence would exceed the cache's capacity or B differs from
  // the cache's; the cache is unchanged then. Without gradients.
  at::Tensor forward_cached(const at::Tensor& idx_new, KVCache& cache);

  // Same as greenshard::loss.
  at::Tensor loss(const at::Tensor& logits, const at::Tensor& targets) const;

  const GPTConfig& config() const { return config_; }

  torch::nn::Embedding wte{nullptr};
  torch::nn::Embedding wpe{nullptr};
  torch::nn::ModuleList h{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};

 private:
  GPTConfig config_;
  uint64_t init_seed_ = 0;
};
TORCH_MODULE(GPT);

}  // namespace greenshard
