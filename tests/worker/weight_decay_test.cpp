// MaskedWeightDecay (worker/weight_decay.h): nanoGPT's weight decay (only
// parameters with >= 2 dimensions) over FSDP's flat shards. The parity cases
// start real rank processes (this binary, re-executed with GS_RANK_SCENARIO
// set) talking Gloo on loopback; they train the FSDP GPT with AdamW
// (weight_decay 0) + MaskedWeightDecay and compare every full parameter with
// one process training the plain GPT with torch::optim::AdamW and two
// parameter groups: dim >= 2 with weight_decay wd, the rest with 0.
#include "common/spawn.h"
#include "shard/parity_harness.h"  // TrainResult and its (de)serialization
#include "shard/checkpoint.h"
#include "shard/fully_shard.h"
#include "shard/rendezvous.h"
#include "worker/model.h"
#include "worker/weight_decay.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <iostream>

namespace {

// Large, so that decaying a 1-D parameter (or not decaying a matrix) moves
// it by far more than the tolerance within a few steps.
constexpr double kWeightDecay = 0.5;
constexpr int kSteps = 4;
constexpr int kGlobalBatch = 12;  // divisible by 1, 2, 3 and 4 ranks
constexpr int kSeq = 16;
constexpr double kTol = 1e-5;  // relative, as the FSDP parity table (tests/shard/fully_shard_test.cpp)

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

greenshard::GPTConfig tiny_config() {
  greenshard::GPTConfig c;
  c.vocab_size = 64;
  c.block_size = kSeq;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  return c;
}

// A learning rate that changes every step, so that apply(lr) must use it.
double lr_at(int step) { return 1e-2 * (1.0 - 0.1 * step); }

// Global batch of `step`: rows are arithmetic progressions mod 64.
std::pair<at::Tensor, at::Tensor> make_batch(int step) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2000 + step);
  auto start = at::randint(0, 64, {kGlobalBatch, 1}, gen, at::kLong);
  auto stride = at::randint(1, 5, {kGlobalBatch, 1}, gen, at::kLong);
  auto idx = (start + stride * at::arange(kSeq + 1, at::kLong)).remainder(64);
  return {idx.narrow(1, 0, kSeq).contiguous(), idx.narrow(1, 1, kSeq).contiguous()};
}

// eps = 1e-4 as in tests/shard/parity_harness.cpp: a gradient that is zero in
// exact arithmetic (the attention key bias) must not turn summation-order
// noise into full +-lr steps.
torch::optim::AdamWOptions adamw(double weight_decay) {
  return torch::optim::AdamWOptions(lr_at(0)).eps(1e-4).weight_decay(weight_decay);
}

void set_lr(torch::optim::Optimizer& opt, double lr) {
  for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

// ---- the single-process references ----
enum class Decay { kMatricesOnly, kEverything };

gstest::TrainResult reference_train(Decay decay) {
  torch::manual_seed(1234);
  greenshard::GPT model(tiny_config());
  std::vector<at::Tensor> matrices, others;
  for (const auto& p : model->parameters()) (p.dim() >= 2 ? matrices : others).push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (decay == Decay::kMatricesOnly) {
    groups.emplace_back(matrices, std::make_unique<torch::optim::AdamWOptions>(adamw(kWeightDecay)));
    groups.emplace_back(others, std::make_unique<torch::optim::AdamWOptions>(adamw(0.0)));
  } else {
    groups.emplace_back(model->parameters(), std::make_unique<torch::optim::AdamWOptions>(adamw(kWeightDecay)));
  }
  torch::optim::AdamW opt(std::move(groups), adamw(0.0));
  gstest::TrainResult r;
  for (int step = 0; step < kSteps; ++step) {
    auto [idx, tgt] = make_batch(step);
    set_lr(opt, lr_at(step));
    opt.zero_grad();
    auto loss = model->loss(model->forward(idx), tgt);
    loss.backward();
    r.losses.push_back(loss.item<double>());
    opt.step();
  }
  for (const auto& p : model->named_parameters()) r.params[p.key()] = p.value().detach().clone();
  return r;
}

const gstest::TrainResult& reference(Decay decay) {
  static std::map<Decay, gstest::TrainResult> cache;
  if (!cache.count(decay)) cache[decay] = reference_train(decay);
  return cache[decay];
}

// ---- one FSDP rank ----
// Trains steps [GS_FROM, GS_TO) (resuming from the newest checkpoint under
// GS_CKPT when GS_FROM > 0, saving one there at GS_TO when GS_SAVE=1); rank
// 0 writes the losses of its steps and the full parameters to GS_OUT.
int train_rank() {
  auto info = shard::rendezvous_info_from_env();
  shard::FullyShardOptions o;
  o.strategy = shard::parse_sharding_strategy(env_or("GS_STRATEGY", "FULL_SHARD"));
  o.hybrid_shard_group_size = std::stoi(env_or("GS_HYBRID_G", "0"));
  o.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
  o.timeout = std::chrono::milliseconds(60000);
  auto rdzv = shard::Rendezvous::connect(info, shard::CommunicatorOptions{o.timeout});
  const bool deferred = env_or("GS_DEFERRED", "0") == "1";
  torch::manual_seed(1234);
  greenshard::GPT model(tiny_config(), deferred);
  if (deferred) o.param_init = model->param_init();
  shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);

  torch::optim::AdamW opt(fsdp.parameters(), adamw(0.0));
  greenshard::MaskedWeightDecay decay(fsdp, kWeightDecay);

  const int from = std::stoi(env_or("GS_FROM", "0")), to = std::stoi(env_or("GS_TO", std::to_string(kSteps)));
  const std::string ckpt = env_or("GS_CKPT", "");
  if (from > 0) {
    auto loaded = shard::load_checkpoint(fsdp, &opt, shard::latest_checkpoint(ckpt));
    if (loaded.step != from) throw std::runtime_error("resumed at step " + std::to_string(loaded.step));
  }
  const int world = info.world_size, mine = kGlobalBatch / world;
  gstest::TrainResult r;
  for (int step = from; step < to; ++step) {
    auto [idx, tgt] = make_batch(step);
    set_lr(opt, lr_at(step));
    opt.zero_grad();
    auto loss = model->loss(model->forward(idx.narrow(0, info.rank * mine, mine)),
                            tgt.narrow(0, info.rank * mine, mine));
    loss.backward();
    at::Tensor l = at::full({1}, loss.item<double>(), at::kDouble);
    rdzv->world()->all_reduce(l, shard::ReduceOp::kAvg)->wait();
    r.losses.push_back(l.item<double>());
    decay.apply(lr_at(step));  // right before the step, as AdamW decays
    opt.step();
  }
  if (env_or("GS_SAVE", "0") == "1") {
    shard::save_checkpoint(fsdp, &opt, ckpt, to);
    shard::wait_for_checkpoint(fsdp);
  }
  r.params = fsdp.full_parameters();
  if (info.rank == 0) gstest::save_result(r, env_or("GS_OUT", ""));
  rdzv->world()->barrier()->wait();
  return 0;
}

// ---- the parent ----
struct RankRun {
  int world = 2;
  std::map<std::string, std::string> env;
};

gstest::TrainResult launch(const RankRun& run, const gstest::TempDir& dir, const std::string& out) {
  gstest::SpawnOptions so;
  so.world_size = run.world;
  so.timeout = std::chrono::seconds(240);
  so.env = run.env;
  so.env["GS_RANK_SCENARIO"] = "train";
  so.env["GS_OUT"] = dir.file(out);
  so.env["GS_CKPT"] = dir.file("ckpt");
  so.env["OMP_NUM_THREADS"] = "1";
  for (const auto& r : gstest::run_ranks({gstest::self_exe()}, so)) {
    EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << " output:\n" << r.output;
    if (r.exit_code != 0) throw std::runtime_error("rank failed");
  }
  return gstest::load_result(dir.file(out));
}

double rel_err(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-12);
}

void expect_parity(const gstest::TrainResult& got, const gstest::TrainResult& ref, int first_step) {
  ASSERT_EQ(got.losses.size() + first_step, ref.losses.size());
  for (size_t i = 0; i < got.losses.size(); ++i)
    EXPECT_LE(std::abs(got.losses[i] - ref.losses[first_step + i]) / std::abs(ref.losses[first_step + i]), kTol)
        << "step " << first_step + i;
  ASSERT_EQ(got.params.size(), ref.params.size());
  for (const auto& [name, t] : ref.params) {
    ASSERT_TRUE(got.params.count(name)) << name;
    EXPECT_LE(rel_err(got.params.at(name), t), kTol) << name;
  }
}

// The parity cases can tell the rules apart: decaying everything (what the
// worker did before) ends more than 100x their tolerance away from nanoGPT's
// rule on the 1-D parameters.
TEST(WeightDecay, DecayingEverythingIsFarFromTheTwoGroupReference) {
  const auto& two_groups = reference(Decay::kMatricesOnly);
  const auto& everything = reference(Decay::kEverything);
  for (const char* name : {"ln_f.weight", "h.0.ln_1.weight", "h.1.mlp.c_fc.bias"})
    EXPECT_GT(rel_err(everything.params.at(name), two_groups.params.at(name)), 100 * kTol) << name;
}

struct ParityCase {
  const char* sentence;
  int world;
  const char* strategy;
  int hybrid_g = 0;
  bool deferred = false;
};

class MaskedWeightDecayParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(MaskedWeightDecayParity, MatchesAdamWWithTwoParameterGroups) {
  const auto& c = GetParam();
  gstest::TempDir dir;
  RankRun run{c.world, {{"GS_STRATEGY", c.strategy}, {"GS_HYBRID_G", std::to_string(c.hybrid_g)},
                    {"GS_DEFERRED", c.deferred ? "1" : "0"}}};
  expect_parity(launch(run, dir, "result.pt"), reference(Decay::kMatricesOnly), 0);
}

const ParityCase kParity[] = {
    {"two ranks, full shard", 2, "FULL_SHARD"},
    {"two ranks, shard grad op", 2, "SHARD_GRAD_OP"},
    {"four ranks, hybrid shard in two groups of two, deferred init", 4, "HYBRID_SHARD", 2, true},
};

void PrintTo(const ParityCase& c, std::ostream* os) { *os << c.sentence; }

std::string case_name(const ::testing::TestParamInfo<ParityCase>& info) { return gstest::test_name(info.param.sentence); }

INSTANTIATE_TEST_SUITE_P(Table, MaskedWeightDecayParity, ::testing::ValuesIn(kParity), case_name);

// Two steps at two ranks, a checkpoint, the last two at one and at three
// ranks (padding moves, shard boundaries cut parameters elsewhere): the same
// parameters as the reference's four steps.
TEST(MaskedWeightDecay, SurvivesResharding) {
  gstest::TempDir dir;
  launch({2, {{"GS_FROM", "0"}, {"GS_TO", "2"}, {"GS_SAVE", "1"}}}, dir, "first.pt");
  for (int world : {1, 3}) {
    SCOPED_TRACE("resumed at " + std::to_string(world) + " rank(s)");
    expect_parity(launch({world, {{"GS_FROM", "2"}, {"GS_TO", "4"}}}, dir, "second.pt"),
                  reference(Decay::kMatricesOnly), 2);
  }
}

// In process, one rank: exactly the >= 2-D elements decay, by (1 - lr * wd),
// only in flat parameters that have a gradient; wd = 0 is a no-op.
TEST(MaskedWeightDecay, ScalesExactlyTheMatricesOfFlatParametersWithGradients) {
  shard::RendezvousInfo info{"127.0.0.1", gstest::free_port(), 0, 1, 0, 1};
  auto rdzv = shard::Rendezvous::connect(info);
  torch::manual_seed(1);
  greenshard::GPT model(tiny_config());
  shard::FullyShardOptions o;
  o.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
  shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);
  int64_t matrices = 0;
  for (const auto& p : model->parameters())
    if (p.dim() >= 2) matrices += p.numel();
  greenshard::MaskedWeightDecay decay(fsdp, 0.25);
  EXPECT_EQ(decay.decayed_numel(), matrices);

  auto params = fsdp.parameters();
  ASSERT_GE(params.size(), 2u);
  for (size_t i = 0; i + 1 < params.size(); ++i) params[i].mutable_grad() = at::zeros_like(params[i]);
  std::vector<at::Tensor> before;
  for (const auto& p : params) before.push_back(p.detach().clone());
  decay.apply(0.1);
  const float factor = static_cast<float>(1 - 0.1 * 0.25);
  const auto masks = fsdp.shard_masks(greenshard::decays);
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor want = i + 1 < params.size() ? at::where(masks[i], before[i] * factor, before[i]) : before[i];
    EXPECT_TRUE(at::equal(params[i].detach(), want)) << "flat parameter " << i;
  }
  greenshard::MaskedWeightDecay none(fsdp, 0.0);
  none.apply(0.1);
  for (size_t i = 0; i + 1 < params.size(); ++i)
    EXPECT_TRUE(at::equal(params[i].detach(), at::where(masks[i], before[i] * factor, before[i])));
  EXPECT_THROW(greenshard::MaskedWeightDecay(fsdp, -1.0), std::invalid_argument);
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* s = std::getenv("GS_RANK_SCENARIO")) {
    try {
      if (std::string(s) == "train") return train_rank();
    } catch (const std::exception& e) {
      std::cout << "ERROR: " << e.what() << std::endl;
      return 2;
    }
    std::cerr << "unknown scenario " << s << "\n";
    return 4;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
