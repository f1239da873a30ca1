// Tests of the GPT-style model (worker/model.h), single process, CPU.
#include "worker/model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <set>
#include <stdexcept>
#include <string>

namespace greenshard {
namespace {

GPTConfig tiny() {
  GPTConfig c;
  c.vocab_size = 32;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  return c;
}

at::Tensor random_tokens(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(vocab, {B, T}, gen, at::TensorOptions().dtype(at::kLong));
}

// Repeating 0, 1, ..., period-1, 0, 1, ... as (B, T+1) so inputs and
// next-token targets are the two shifted (B, T) views.
std::pair<at::Tensor, at::Tensor> repeating_batch(int64_t B, int64_t T, int64_t period) {
  at::Tensor seq = at::arange(T + 1, at::kLong).remainder(period).unsqueeze(0).repeat({B, 1});
  for (int64_t b = 0; b < B; ++b) seq[b] = (seq[b] + b) % period;  // different phases
  return {seq.slice(1, 0, T).contiguous(), seq.slice(1, 1, T + 1).contiguous()};
}

TEST(GPTModel, OutputShapes) {
  torch::manual_seed(0);
  GPTConfig c = tiny();
  GPT model(c);
  at::Tensor logits = model->forward(random_tokens(3, 7, c.vocab_size, 1));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 7, c.vocab_size}));
  EXPECT_EQ(logits.scalar_type(), at::kFloat);

  // Full context works; one more token does not.
  logits = model->forward(random_tokens(2, c.block_size, c.vocab_size, 2));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, c.block_size, c.vocab_size}));
  EXPECT_THROW(model->forward(random_tokens(1, c.block_size + 1, c.vocab_size, 3)),
               std::invalid_argument);

  at::Tensor l = model->loss(logits, random_tokens(2, c.block_size, c.vocab_size, 4));
  EXPECT_EQ(l.dim(), 0);
  // Near-uniform predictions at init: loss close to ln(vocab).
  EXPECT_NEAR(l.item<double>(), std::log(static_cast<double>(c.vocab_size)), 0.3);
}

TEST(GPTModel, NumParametersMatchesModule) {
  for (GPTConfig c : {tiny(), GPTConfig{50, 24, 3, 4, 48, 0.0}}) {
    torch::manual_seed(0);
    GPT model(c);
    int64_t total = 0;
    for (const auto& p : model->parameters()) total += p.numel();
    EXPECT_EQ(num_parameters(c), total);
  }
  // Hand count for tiny: 2*(12*32^2 + 13*32) + (32 + 16)*32 + 2*32.
  EXPECT_EQ(num_parameters(tiny()), 27008);
  // GPT-2 small (124M), the well-known count with the tied lm_head.
  EXPECT_EQ(num_parameters(GPTConfig{}), 124439808);
}

TEST(GPTModel, LmHeadTiedToTokenEmbedding) {
  torch::manual_seed(0);
  GPTConfig c = tiny();
  c.vocab_size = 37;  // no other (V, C) matrix by accident
  GPT model(c);
  // No separate lm_head parameter; wte.weight is the only (V, C) matrix.
  int64_t vc_matrices = 0;
  for (const auto& kv : model->named_parameters()) {
    EXPECT_EQ(kv.key().find("lm_head"), std::string::npos) << kv.key();
    if (kv.value().sizes() == at::IntArrayRef{c.vocab_size, c.n_embd}) ++vc_matrices;
  }
  EXPECT_EQ(vc_matrices, 1);
  EXPECT_EQ(model->named_parameters().size(), model->parameters().size());

  // Inputs use only tokens 0..7; rows 8..31 of wte get gradient only through
  // the lm_head.
  at::Tensor idx = random_tokens(2, 8, 8, 5);
  at::Tensor tgt = random_tokens(2, 8, c.vocab_size, 6);
  model->loss(model->forward(idx), tgt).backward();
  at::Tensor g = model->wte->weight.grad();
  ASSERT_TRUE(g.defined());
  at::Tensor unused_rows = g.slice(0, 8, c.vocab_size);
  EXPECT_GT(unused_rows.abs().sum().item<double>(), 0.0);
  for (int64_t v = 8; v < c.vocab_size; ++v) {
    EXPECT_GT(g[v].abs().sum().item<double>(), 0.0) << "row " << v;
  }

  // And the logits are the final hidden state times wte^T: perturbing one wte
  // row of an unused token changes exactly that logit column.
  {
    torch::NoGradGuard ng;
    at::Tensor before = model->forward(idx);
    // (Not a constant shift: ln_f's output has zero mean over C.)
    model->wte->weight[20].add_(at::randn({c.n_embd}));
    at::Tensor after = model->forward(idx);
    at::Tensor diff = (after - before).abs().amax({0, 1});  // (V)
    EXPECT_GT(diff[20].item<double>(), 1e-4);
    diff[20] = 0;
    EXPECT_EQ(diff.max().item<double>(), 0.0);
  }
}

// Changing token t+1 leaves logits at positions <= t bit-identical.
void expect_causal(Attention kind) {
  torch::manual_seed(0);
  GPTConfig c = tiny();
  c.attention = kind;
  GPT model(c);
  torch::NoGradGuard ng;
  at::Tensor idx = random_tokens(2, c.block_size, c.vocab_size, 7);
  at::Tensor base = model->forward(idx);
  for (int64_t t : {int64_t{0}, int64_t{5}, c.block_size - 2}) {
    at::Tensor changed = idx.clone();
    changed.select(1, t + 1).add_(1).remainder_(c.vocab_size);
    at::Tensor out = model->forward(changed);
    // Positions <= t are bit-identical; position t+1 does change.
    EXPECT_TRUE(at::equal(out.slice(1, 0, t + 1), base.slice(1, 0, t + 1))) << "t=" << t;
    EXPECT_GT((out.select(1, t + 1) - base.select(1, t + 1)).abs().max().item<double>(), 1e-5)
        << "t=" << t;
  }
  // A prefix alone gives the same logits as inside the longer sequence.
  at::Tensor prefix = model->forward(idx.slice(1, 0, 5).contiguous());
  EXPECT_TRUE(at::allclose(prefix, base.slice(1, 0, 5), 1e-5, 1e-6));
}

TEST(GPTModel, CausalAttention) { expect_causal(Attention::kExplicit); }

TEST(GPTModel, SdpaAttentionIsCausal) { expect_causal(Attention::kSdpa); }

// Same weights, attention through LibTorch's SDPA or explicit matmuls: the
// same logits, loss and gradients (fp32), also in eval mode with dropout
// configured (dropout off).
TEST(GPTModel, SdpaAttentionMatchesExplicitLogitsAndGradients) {
  for (double dropout : {0.0, 0.2}) {
    GPTConfig c = tiny();
    c.dropout = dropout;
    torch::manual_seed(3);
    GPT ex(c);
    c.attention = Attention::kSdpa;
    torch::manual_seed(3);
    GPT sd(c);
    if (dropout > 0) {
      ex->eval();
      sd->eval();
    }
    auto [x, y] = repeating_batch(3, c.block_size, 5);
    at::Tensor le = ex->forward(x), ls = sd->forward(x);
    EXPECT_TRUE(at::allclose(le, ls, 1e-5, 1e-5)) << "max diff " << (le - ls).abs().max().item<double>();
    ex->loss(le, y).backward();
    sd->loss(ls, y).backward();
    auto ps = sd->named_parameters();
    for (const auto& kv : ex->named_parameters()) {
      const at::Tensor& ge = kv.value().grad();
      const at::Tensor& gs = ps[kv.key()].grad();
      ASSERT_TRUE(ge.defined() && gs.defined()) << kv.key();
      EXPECT_TRUE(at::allclose(ge, gs, 1e-4, 1e-6))
          << kv.key() << " max diff " << (ge - gs).abs().max().item<double>();
    }
  }
}

TEST(GPTModel, AttentionKindsParseAndAutoFollowsTheLibTorchVersion) {
  EXPECT_EQ(parse_attention("explicit"), Attention::kExplicit);
  EXPECT_EQ(parse_attention("sdpa"), Attention::kSdpa);
  EXPECT_STREQ(to_string(Attention::kSdpa), "sdpa");
  EXPECT_STREQ(to_string(Attention::kExplicit), "explicit");
  try {
    parse_attention("flash", "model.attention");
    ADD_FAILURE() << "flash accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("model.attention"), std::string::npos) << e.what();
  }
  EXPECT_EQ(default_attention(), torch_major_version() >= 2 ? Attention::kSdpa : Attention::kExplicit);
}

TEST(GPTModel, MlpUsesTanhGelu) {
  torch::manual_seed(0);
  GPTConfig c = tiny();
  MLP mlp(c);
  torch::NoGradGuard ng;
  at::Tensor x = at::randn({2, 5, c.n_embd});
  at::Tensor hidden = mlp->c_fc->forward(x);  // (B, T, 4C)
  at::Tensor want = mlp->c_proj->forward(at::gelu(hidden, "tanh"));
  at::Tensor erf = mlp->c_proj->forward(at::gelu(hidden));
  at::Tensor got = mlp->forward(x);
  EXPECT_TRUE(at::allclose(got, want, 1e-6, 1e-7));
  EXPECT_FALSE(at::allclose(got, erf, 1e-6, 1e-7));
}

TEST(GPTModel, SameSeedSameParameters) {
  GPTConfig c = tiny();
  torch::manual_seed(42);
  GPT a(c);
  torch::manual_seed(42);
  GPT b(c);
  torch::manual_seed(43);
  GPT d(c);
  auto pa = a->named_parameters();
  auto pb = b->named_parameters();
  auto pd = d->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  bool any_differs = false;
  for (const auto& kv : pa) {
    EXPECT_TRUE(at::equal(kv.value(), pb[kv.key()])) << kv.key();
    if (!at::equal(kv.value(), pd[kv.key()])) any_differs = true;
  }
  EXPECT_TRUE(any_differs);
}

TEST(GPTModel, Gpt2Initialization) {
  torch::manual_seed(0);
  GPTConfig c{64, 32, 4, 4, 128, 0.0};
  GPT model(c);
  const double proj_std = 0.02 / std::sqrt(2.0 * c.n_layer);
  for (const auto& kv : model->named_parameters()) {
    const std::string& name = kv.key();
    const at::Tensor& p = kv.value();
    const bool is_ln = name.find("ln_") != std::string::npos;
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
      EXPECT_EQ(p.abs().max().item<double>(), 0.0) << name;
    } else if (is_ln) {
      EXPECT_TRUE(at::equal(p, at::ones_like(p))) << name;
    } else {
      const double want = name.find("c_proj.weight") != std::string::npos ? proj_std : 0.02;
      EXPECT_NEAR(p.std().item<double>(), want, 0.1 * want) << name;
      EXPECT_NEAR(p.mean().item<double>(), 0.0, 0.1 * want) << name;
    }
  }
}

TEST(GPTModel, AdamReducesLossOnRepeatingSequence) {
  torch::manual_seed(0);
  GPTConfig c = tiny();
  GPT model(c);
  auto [x, y] = repeating_batch(4, c.block_size, 7);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(3e-3));
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    opt.zero_grad();
    at::Tensor l = model->loss(model->forward(x), y);
    l.backward();
    opt.step();
    if (step == 0) first = l.item<double>();
    last = l.item<double>();
  }
  EXPECT_GT(first, 3.0);  // ~ ln 32
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
}

TEST(GPTModel, Bf16ForwardBackwardCloseToFp32) {
  GPTConfig c = tiny();
  torch::manual_seed(0);
  GPT f32(c);
  torch::manual_seed(0);
  GPT b16(c);
  b16->to(at::kBFloat16);
  for (const auto& p : b16->parameters()) ASSERT_EQ(p.scalar_type(), at::kBFloat16);

  at::Tensor idx = random_tokens(2, c.block_size, c.vocab_size, 8);
  at::Tensor tgt = random_tokens(2, c.block_size, c.vocab_size, 9);

  at::Tensor logits16 = b16->forward(idx);
  EXPECT_EQ(logits16.scalar_type(), at::kBFloat16);
  at::Tensor l16 = b16->loss(logits16, tgt);
  EXPECT_EQ(l16.scalar_type(), at::kFloat);
  l16.backward();
  at::Tensor l32 = f32->loss(f32->forward(idx), tgt);
  l32.backward();

  EXPECT_NEAR(l16.item<double>(), l32.item<double>(), 2e-2 * l32.item<double>());
  // Every parameter gets a finite bf16 gradient close in direction to fp32's.
  auto g32 = f32->named_parameters();
  for (const auto& kv : b16->named_parameters()) {
    at::Tensor g = kv.value().grad();
    ASSERT_TRUE(g.defined()) << kv.key();
    EXPECT_EQ(g.scalar_type(), at::kBFloat16) << kv.key();
    at::Tensor gf = g.to(at::kFloat).flatten();
    EXPECT_TRUE(gf.isfinite().all().item<bool>()) << kv.key();
    at::Tensor ref = g32[kv.key()].grad().flatten();
    const double cos = (at::dot(gf, ref) / (gf.norm() * ref.norm() + 1e-30)).item<double>();
    EXPECT_GT(cos, 0.95) << kv.key();
  }
}

TEST(GPTModel, DropoutOnlyInTraining) {
  GPTConfig c = tiny();
  c.dropout = 0.2;
  torch::manual_seed(0);
  GPT model(c);
  at::Tensor idx = random_tokens(2, 8, c.vocab_size, 10);
  torch::NoGradGuard ng;
  model->eval();
  EXPECT_TRUE(at::equal(model->forward(idx), model->forward(idx)));
  model->train();
  EXPECT_FALSE(at::equal(model->forward(idx), model->forward(idx)));
}

void expect_invalid(const GPTConfig& c, const std::string& field) {
  try {
    validate(c);
    ADD_FAILURE() << "no error for " << field;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos)
        << "'" << e.what() << "' does not name " << field;
  }
  EXPECT_THROW(GPT{c}, std::invalid_argument) << field;
}

TEST(GPTModel, ValidateNamesTheField) {
  EXPECT_NO_THROW(validate(tiny()));
  EXPECT_NO_THROW(validate(GPTConfig{}));
  GPTConfig c;
  c = tiny(); c.vocab_size = 0; expect_invalid(c, "vocab_size");
  c = tiny(); c.block_size = -1; expect_invalid(c, "block_size");
  c = tiny(); c.n_layer = 0; expect_invalid(c, "n_layer");
  c = tiny(); c.n_head = 0; expect_invalid(c, "n_head");
  c = tiny(); c.n_embd = 0; expect_invalid(c, "n_embd");
  c = tiny(); c.n_embd = 30; c.n_head = 4; expect_invalid(c, "n_embd");
  c = tiny(); c.dropout = 1.0; expect_invalid(c, "dropout");
  c = tiny(); c.dropout = -0.1; expect_invalid(c, "dropout");
}

TEST(GPTModel, FlopsPerToken) {
  // tiny: N = 27008 - 16*32 (wpe) = 26496; 6N + 12*L*H*Q*T with L=2, H=2,
  // Q=16, T=16: 158976 + 12288.
  EXPECT_DOUBLE_EQ(flops_per_token(tiny(), 16), 171264.0);
  EXPECT_DOUBLE_EQ(flops_per_token(tiny(), 8), 158976.0 + 6144.0);
  // GPT-2 small at T=1024: N = 124439808 - 1024*768 = 123653376;
  // 6N = 741920256; 12*12*12*64*1024 = 113246208.
  EXPECT_DOUBLE_EQ(flops_per_token(GPTConfig{}, 1024), 855166464.0);
  EXPECT_THROW(flops_per_token(tiny(), 0), std::invalid_argument);
}

}  // namespace
}  // namespace greenshard
