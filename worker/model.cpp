#include "worker/model.h"

#include "shard/fully_shard.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Reduction.h>
#include <torch/utils.h>
#include <torch/version.h>

#include <cmath>
#include <mutex>
#include <limits>
#include <stdexcept>
#include <string>

namespace greenshard {

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& what) {
  throw std::invalid_argument("GPTConfig." + field + ": " + what);
}

// Dropout only when it does something: no RNG draws, no extra kernels at p=0.
at::Tensor maybe_dropout(const at::Tensor& x, double p, bool train) {
  return (train && p > 0.0) ? at::dropout(x, p, train) : x;
}

}  // namespace

const char* to_string(Attention a) { return a == Attention::kSdpa ? "sdpa" : "explicit"; }

Attention parse_attention(const std::string& text, const std::string& field) {
  if (text == "explicit") return Attention::kExplicit;
  if (text == "sdpa") return Attention::kSdpa;
  throw std::invalid_argument(field + ": must be explicit or sdpa, got '" + text + "'");
}

int torch_major_version() { return TORCH_VERSION_MAJOR; }

Attention default_attention() { return TORCH_VERSION_MAJOR >= 2 ? Attention::kSdpa : Attention::kExplicit; }

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
                            Attention kind) {
  if (kind == Attention::kSdpa) {
#if TORCH_VERSION_MAJOR >= 2
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, dropout_p, /*is_causal=*/true);
#else
    return std::get<0>(at::_scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, dropout_p,
                                                         /*need_attn_weights=*/false, /*is_causal=*/true));
#endif
  }
  const int64_t T = q.size(-2), hs = q.size(-1);
  // (B, nh, T, hs) @ (B, nh, hs, T) -> (B, nh, T, T)
  at::Tensor att = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hs)));
  // (T, T) bool, true above the diagonal: key position > query position
  at::Tensor future = at::ones({T, T}, q.options().dtype(at::kBool)).triu(1);
  // (B, nh, T, T), future keys -> -inf
  att = att.masked_fill(future, -std::numeric_limits<double>::infinity());
  // (B, nh, T, T) softmax over keys in fp32, back to the compute dtype
  att = at::softmax(att, -1, at::kFloat).to(q.scalar_type());
  att = maybe_dropout(att, dropout_p, dropout_p > 0.0);
  // (B, nh, T, T) @ (B, nh, T, hs) -> (B, nh, T, hs)
  return at::matmul(att, v);
}

GPTConfig gpt_config(const ModelShape& shape, double dropout, Attention attention) {
  return GPTConfig{.vocab_size = shape.vocab, .block_size = shape.context, .n_layer = shape.layers,
                   .n_head = shape.heads, .n_embd = shape.embd, .dropout = dropout, .attention = attention};
}

void validate(const GPTConfig& c) {
  if (c.vocab_size <= 0) bad("vocab_size", "must be positive, got " + std::to_string(c.vocab_size));
  if (c.block_size <= 0) bad("block_size", "must be positive, got " + std::to_string(c.block_size));
  if (c.n_layer <= 0) bad("n_layer", "must be positive, got " + std::to_string(c.n_layer));
  if (c.n_head <= 0) bad("n_head", "must be positive, got " + std::to_string(c.n_head));
  if (c.n_embd <= 0) bad("n_embd", "must be positive, got " + std::to_string(c.n_embd));
  if (c.n_embd % c.n_head != 0) {
    bad("n_embd", "must be divisible by n_head (" + std::to_string(c.n_embd) + " % " +
                      std::to_string(c.n_head) + " != 0)");
  }
  if (!(c.dropout >= 0.0 && c.dropout < 1.0)) {
    bad("dropout", "must be in [0, 1), got " + std::to_string(c.dropout));
  }
}

int64_t num_parameters(const GPTConfig& c) {
  validate(c);
  const int64_t C = c.n_embd;
  const int64_t per_block = 2 * C                 // ln_1
                            + C * 3 * C + 3 * C   // attn.c_attn
                            + C * C + C           // attn.c_proj
                            + 2 * C               // ln_2
                            + C * 4 * C + 4 * C   // mlp.c_fc
                            + 4 * C * C + C;      // mlp.c_proj
  return c.vocab_size * C      // wte (= lm_head)
         + c.block_size * C    // wpe
         + c.n_layer * per_block
         + 2 * C;              // ln_f
}

double flops_per_token(const GPTConfig& c, int64_t seq_len) {
  if (seq_len <= 0) {
    throw std::invalid_argument("flops_per_token: seq_len must be positive, got " +
                                std::to_string(seq_len));
  }
  const double N = static_cast<double>(num_parameters(c) - c.block_size * c.n_embd);
  const double L = static_cast<double>(c.n_layer);
  const double H = static_cast<double>(c.n_head);
  const double Q = static_cast<double>(c.n_embd / c.n_head);
  const double T = static_cast<double>(seq_len);
  return 6.0 * N + 12.0 * L * H * Q * T;
}

at::Tensor loss(const at::Tensor& logits, const at::Tensor& targets) {
  if (logits.dim() != 3) {
    throw std::invalid_argument("loss: logits must be (B, T, V), got dim " +
                                std::to_string(logits.dim()));
  }
  if (targets.dim() != 2 || targets.size(0) != logits.size(0) ||
      targets.size(1) != logits.size(1)) {
    throw std::invalid_argument("loss: targets must be (B, T) matching logits");
  }
  const int64_t V = logits.size(2);
  // (B, T, V) -> (B*T, V), fp32 for a stable log-softmax whatever the dtype.
  at::Tensor flat = logits.reshape({-1, V}).to(at::kFloat);
  // (B, T) -> (B*T)
  at::Tensor tgt = targets.reshape({-1}).to(at::kLong);
  // (B*T, V), (B*T) -> () mean over non-ignored positions
  return at::cross_entropy_loss(flat, tgt, /*weight=*/{}, at::Reduction::Mean,
                                /*ignore_index=*/-1);
}

// ---------------------------------------------------------------------------

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GPTConfig& c)
    : n_head_(c.n_head), n_embd_(c.n_embd), dropout_(c.dropout), attention_(c.attention) {
  c_attn = register_module("c_attn", torch::nn::Linear(c.n_embd, 3 * c.n_embd));
  c_proj = register_module("c_proj", torch::nn::Linear(c.n_embd, c.n_embd));
}

at::Tensor CausalSelfAttentionImpl::forward(const at::Tensor& x) {
  return shard::forward_unit(*this, [&] {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    const int64_t nh = n_head_, hs = C / n_head_;
    // (B, T, C) -> (B, T, 3C)
    at::Tensor qkv = c_attn->forward(x);
    // (B, T, 3C) -> 3 x (B, T, C)
    auto parts = qkv.split(n_embd_, /*dim=*/2);
    // (B, T, C) -> (B, T, nh, hs) -> (B, nh, T, hs)
    at::Tensor q = parts[0].view({B, T, nh, hs}).transpose(1, 2);
    at::Tensor k = parts[1].view({B, T, nh, hs}).transpose(1, 2);
    at::Tensor v = parts[2].view({B, T, nh, hs}).transpose(1, 2);
    // (B, nh, T, hs) x 3 -> (B, nh, T, hs), causal; dropout only in training
    at::Tensor y = causal_attention(q, k, v, is_training() ? dropout_ : 0.0, attention_);
    // (B, nh, T, hs) -> (B, T, nh, hs) -> (B, T, C)
    y = y.transpose(1, 2).contiguous().view({B, T, C});
    // (B, T, C) -> (B, T, C)
    y = c_proj->forward(y);
    return maybe_dropout(y, dropout_, is_training());
  });
}

at::Tensor CausalSelfAttentionImpl::forward_cached(const at::Tensor& x, at::Tensor& k_cache, at::Tensor& v_cache,
                                                   int64_t past) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  const int64_t nh = n_head_, hs = C / n_head_;
  const int64_t L = past + T;  // positions attended to
  // (B, T, C) -> (B, T, 3C) -> 3 x (B, T, C)
  auto parts = c_attn->forward(x).split(n_embd_, /*dim=*/2);
  // (B, T, C) -> (B, T, nh, hs) -> (B, nh, T, hs)
  at::Tensor q = parts[0].view({B, T, nh, hs}).transpose(1, 2);
  at::Tensor k = parts[1].view({B, T, nh, hs}).transpose(1, 2);
  at::Tensor v = parts[2].view({B, T, nh, hs}).transpose(1, 2);
  // The new positions' keys and values into the cache at [past, L).
  k_cache.narrow(2, past, T).copy_(k);
  v_cache.narrow(2, past, T).copy_(v);
  // (B, nh, L, hs): every position so far
  at::Tensor keys = k_cache.narrow(2, 0, L);
  at::Tensor values = v_cache.narrow(2, 0, L);
  // (B, nh, T, hs) @ (B, nh, hs, L) -> (B, nh, T, L)
  at::Tensor att = at::matmul(q, keys.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hs)));
  // (T, L) bool: query i sits at position past + i; keys after it -> -inf
  at::Tensor future = at::ones({T, L}, q.options().dtype(at::kBool)).triu(past + 1);
  att = att.masked_fill(future, -std::numeric_limits<double>::infinity());
  // softmax over keys in fp32, back to the compute dtype
  att = at::softmax(att, -1, at::kFloat).to(q.scalar_type());
  // (B, nh, T, L) @ (B, nh, L, hs) -> (B, nh, T, hs) -> (B, T, nh, hs) -> (B, T, C)
  at::Tensor y = at::matmul(att, values).transpose(1, 2).contiguous().view({B, T, C});
  // (B, T, C) -> (B, T, C)
  return c_proj->forward(y);
}

MLPImpl::MLPImpl(const GPTConfig& c) : dropout_(c.dropout) {
  c_fc = register_module("c_fc", torch::nn::Linear(c.n_embd, 4 * c.n_embd));
  c_proj = register_module("c_proj", torch::nn::Linear(4 * c.n_embd, c.n_embd));
}

at::Tensor MLPImpl::forward(const at::Tensor& x) {
  return shard::forward_unit(*this, [&] {
    // (B, T, C) -> (B, T, 4C)
    at::Tensor y = c_fc->forward(x);
    // (B, T, 4C) -> (B, T, 4C)
    y = at::gelu(y, "tanh");
    // (B, T, 4C) -> (B, T, C)
    y = c_proj->forward(y);
    return maybe_dropout(y, dropout_, is_training());
  });
}

BlockImpl::BlockImpl(const GPTConfig& c) {
  ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd})));
  attn = register_module("attn", CausalSelfAttention(c));
  ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd})));
  mlp = register_module("mlp", MLP(c));
}

at::Tensor BlockImpl::forward(const at::Tensor& input) {
  // (input only: a block may recompute its forward in backward)
  return shard::forward_unit(*this, input, [this](const at::Tensor& x) {
    // (B, T, C) -> (B, T, C)
    at::Tensor y = x + attn->forward(ln_1->forward(x));
    // (B, T, C) -> (B, T, C)
    return y + mlp->forward(ln_2->forward(y));
  });
}

at::Tensor BlockImpl::forward_cached(const at::Tensor& x, at::Tensor& k_cache, at::Tensor& v_cache, int64_t past) {
  // (B, T, C) -> (B, T, C)
  at::Tensor y = x + attn->forward_cached(ln_1->forward(x), k_cache, v_cache, past);
  // (B, T, C) -> (B, T, C)  (the MLP has no dropout outside training)
  return y + mlp->forward(ln_2->forward(y));
}

GPTImpl::GPTImpl(const GPTConfig& c, bool deferred) : config_(c) {
  validate(c);
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    init_seed_ = at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
  }
  // Deferred: each submodule gives its storage back as soon as it is built.
  auto built = [&](auto holder) {
    if (deferred) shard::defer_parameters(*holder.ptr());
    return holder;
  };
  wte = register_module("wte", built(torch::nn::Embedding(c.vocab_size, c.n_embd)));
  wpe = register_module("wpe", built(torch::nn::Embedding(c.block_size, c.n_embd)));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(built(Block(c)));
  ln_f = register_module("ln_f", built(torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd}))));
  if (!deferred) {
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters(/*recurse=*/true)) init_parameter(p.key(), p.value());
  }
}

void GPTImpl::init_parameter(const std::string& name, at::Tensor& param) const {
  torch::NoGradGuard no_grad;
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  // FNV-1a of the name, mixed with the model's seed: one generator each.
  uint64_t h = 1469598103934665603ull ^ init_seed_;
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(h);
  const bool layer_norm = name.rfind("ln_f.", 0) == 0 || name.find(".ln_1.") != std::string::npos ||
                          name.find(".ln_2.") != std::string::npos;
  if (layer_norm) {
    param.fill_(ends_with(".weight") ? 1.0 : 0.0);
  } else if (ends_with(".bias")) {
    param.zero_();
  } else if (ends_with(".c_proj.weight")) {
    // Residual projections: scaled so the residual stream's variance does
    // not grow with depth (GPT-2 paper).
    param.normal_(0.0, 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layer)), gen);
  } else if (ends_with(".weight")) {
    param.normal_(0.0, 0.02, gen);
  } else {
    throw std::invalid_argument("GPT::init_parameter: unknown parameter '" + name + "'");
  }
}

std::function<void(const std::string&, at::Tensor&)> GPTImpl::param_init() {
  auto self = std::static_pointer_cast<GPTImpl>(shared_from_this());
  return [self](const std::string& name, at::Tensor& param) { self->init_parameter(name, param); };
}

at::Tensor GPTImpl::forward(const at::Tensor& idx) {
  return shard::forward_unit(*this, [&] {
    if (idx.dim() != 2) {
      throw std::invalid_argument("GPT::forward: idx must be (B, T), got dim " +
                                  std::to_string(idx.dim()));
    }
    const int64_t T = idx.size(1);
    if (T > config_.block_size) {
      throw std::invalid_argument("GPT::forward: sequence length " + std::to_string(T) +
                                  " exceeds block_size " + std::to_string(config_.block_size));
    }
    // (T) position ids 0..T-1
    at::Tensor pos = at::arange(T, idx.options().dtype(at::kLong));
    // (B, T) -> (B, T, C)
    at::Tensor tok_emb = wte->forward(idx);
    // (T) -> (T, C)
    at::Tensor pos_emb = wpe->forward(pos);
    // (B, T, C) + (T, C) -> (B, T, C)
    at::Tensor x = maybe_dropout(tok_emb + pos_emb, config_.dropout, is_training());
    // n_layer x ((B, T, C) -> (B, T, C))
    for (const auto& b : *h) x = b->as<BlockImpl>()->forward(x);
    // (B, T, C) -> (B, T, C)
    x = ln_f->forward(x);
    // (B, T, C) @ (C, V) -> (B, T, V), lm_head tied to wte
    return at::linear(x, wte->weight);
  });
}

KVCache GPTImpl::make_cache(int64_t batch, int64_t capacity) const {
  if (batch <= 0) throw std::invalid_argument("GPT::make_cache: batch must be positive, got " + std::to_string(batch));
  if (capacity == 0) capacity = config_.block_size;
  if (capacity < 0 || capacity > config_.block_size) {
    throw std::invalid_argument("GPT::make_cache: capacity must be in [1, block_size " +
                                std::to_string(config_.block_size) + "], got " + std::to_string(capacity));
  }
  const int64_t nh = config_.n_head, hs = config_.n_embd / config_.n_head;
  // (B, nh, capacity, hs) per layer, like the parameters
  const auto options = wte->weight.options();
  KVCache cache;
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    cache.k.push_back(at::zeros({batch, nh, capacity, hs}, options));
    cache.v.push_back(at::zeros({batch, nh, capacity, hs}, options));
  }
  return cache;
}

at::Tensor GPTImpl::forward_cached(const at::Tensor& idx, KVCache& cache) {
  torch::NoGradGuard no_grad;
  if (idx.dim() != 2) {
    throw std::invalid_argument("GPT::forward_cached: idx must be (B, T), got dim " + std::to_string(idx.dim()));
  }
  if (static_cast<int64_t>(cache.k.size()) != config_.n_layer || cache.v.size() != cache.k.size()) {
    throw std::invalid_argument("GPT::forward_cached: the cache has " + std::to_string(cache.k.size()) +
                                " layers, the model " + std::to_string(config_.n_layer) + " (use make_cache)");
  }
  const int64_t B = idx.size(0), T = idx.size(1), past = cache.length;
  if (T < 1) throw std::invalid_argument("GPT::forward_cached: no new tokens");
  if (B != cache.k.front().size(0)) {
    throw std::invalid_argument("GPT::forward_cached: batch " + std::to_string(B) + ", the cache holds " +
                                std::to_string(cache.k.front().size(0)));
  }
  if (past + T > cache.capacity()) {
    throw std::invalid_argument("GPT::forward_cached: " + std::to_string(past) + " cached + " + std::to_string(T) +
                                " new positions exceed the cache's capacity " + std::to_string(cache.capacity()));
  }
  // (T) positions past..past+T-1
  at::Tensor pos = at::arange(past, past + T, idx.options().dtype(at::kLong));
  // (B, T, C) + (T, C) -> (B, T, C)
  at::Tensor x = wte->forward(idx) + wpe->forward(pos);
  // n_layer x ((B, T, C) -> (B, T, C)), each through its layer's cache
  int64_t layer = 0;
  for (const auto& b : *h) {
    x = b->as<BlockImpl>()->forward_cached(x, cache.k[layer], cache.v[layer], past);
    ++layer;
  }
  // (B, T, C) -> (B, T, C) @ (C, V) -> (B, T, V), lm_head tied to wte
  at::Tensor logits = at::linear(ln_f->forward(x), wte->weight);
  cache.length = past + T;
  return logits;
}

at::Tensor GPTImpl::loss(const at::Tensor& logits, const at::Tensor& targets) const {
  return greenshard::loss(logits, targets);
}

}  // namespace greenshard
