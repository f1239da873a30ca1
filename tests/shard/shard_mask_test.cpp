// FullyShardedModel::shard_masks: per-element masks over this rank's flat
// shards. Every case starts real rank processes (this binary, re-executed
// with GS_RANK_SCENARIO set) talking Gloo on loopback; each rank all-gathers
// its masks in its shard group and compares them with the concatenation of
// the per-parameter masks in flat order (padding false).
#include "common/spawn.h"
#include "shard/checkpoint.h"
#include "shard/fully_shard.h"
#include "shard/rendezvous.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// Parameters of every rank 0..3 (2-D, 3-D, 1-D), units "a", "t" and the
// root, sized so that every multi-rank layout below has padding, and "t" (2
// elements) has a shard that is all padding at 3 and 4 ranks:
//   root (51): emb.weight [7,3], norm.weight [5], norm.bias [5], kernel [2,2,3], gain [8]
//   a (20):    a.weight [5,3], a.bias [5]
//   t (2):     t.weight [1,1], t.bias [1]
std::shared_ptr<torch::nn::Module> make_module() {
  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("emb", torch::nn::Embedding(7, 3));
  root->register_module("a", torch::nn::Linear(3, 5));
  root->register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({5})));
  root->register_module("t", torch::nn::Linear(1, 1));
  root->register_parameter("kernel", torch::randn({2, 2, 3}));
  root->register_parameter("gain", torch::ones({8}));
  return root;
}

shard::FullyShardOptions options_from_env() {
  shard::FullyShardOptions o;
  o.strategy = shard::parse_sharding_strategy(env_or("GS_STRATEGY", "FULL_SHARD"));
  o.hybrid_shard_group_size = std::stoi(env_or("GS_HYBRID_G", "0"));
  o.offload.offload_params = env_or("GS_OFFLOAD", "0") == "1";
  o.wrap.predicate = [](const std::string& name, const torch::nn::Module&) { return name == "a" || name == "t"; };
  o.timeout = std::chrono::milliseconds(60000);
  return o;
}

bool two_or_more_dims(const std::string&, at::IntArrayRef shape) { return shape.size() >= 2; }
bool is_bias(const std::string& name, at::IntArrayRef) {
  return name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
}

// Checks the masks of one predicate on this rank; returns the mismatches.
std::string check_masks(shard::FullyShardedModel& fsdp, torch::nn::Module& root,
                        const std::function<bool(const std::string&, at::IntArrayRef)>& select) {
  std::ostringstream err;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& p : root.named_parameters()) shapes[p.key()] = p.value().sizes().vec();
  const auto masks = fsdp.shard_masks(select);
  const auto params = fsdp.parameters();
  const auto units = fsdp.units();
  if (masks.size() != params.size() || masks.size() != units.size())
    return "masks: " + std::to_string(masks.size()) + " for " + std::to_string(params.size()) + " flat parameters\n";
  auto group = fsdp.shard_group();
  for (size_t i = 0; i < masks.size(); ++i) {
    const auto& u = units[i];
    const at::Tensor& m = masks[i];
    if (m.scalar_type() != at::kBool) err << "unit '" << u.name << "': dtype " << m.scalar_type() << "\n";
    if (m.device() != params[i].device()) err << "unit '" << u.name << "': device " << m.device() << "\n";
    if (m.numel() != u.shard_numel || m.numel() != params[i].numel())
      err << "unit '" << u.name << "': numel " << m.numel() << " vs shard " << u.shard_numel << "\n";
    // Expected: the per-parameter masks in flat order, then padding (false).
    std::vector<at::Tensor> parts;
    for (const auto& name : u.param_names) {
      const auto& shape = shapes.at(name);
      int64_t n = 1;
      for (auto d : shape) n *= d;
      parts.push_back(at::full({n}, select(name, shape) ? 1.0f : 0.0f, at::kFloat));
    }
    at::Tensor expected = at::zeros({u.padded_numel}, at::kFloat);
    if (!parts.empty()) {
      at::Tensor cat = at::cat(parts);
      expected.narrow(0, 0, cat.numel()).copy_(cat);
    }
    at::Tensor full = at::empty({u.padded_numel}, at::kFloat);
    group->all_gather_into(full, m.to(at::kCPU, at::kFloat).contiguous())->wait();
    if (!at::equal(full, expected)) {
      err << "unit '" << u.name << "': gathered mask differs from the per-parameter masks\n  got      "
          << full.to(at::kInt).reshape({1, -1}) << "\n  expected " << expected.to(at::kInt).reshape({1, -1}) << "\n";
    }
  }
  return err.str();
}

int run_scenario(const std::string& name) {
  try {
    auto info = shard::rendezvous_info_from_env();
    auto o = options_from_env();
    auto rdzv = shard::Rendezvous::connect(info, shard::CommunicatorOptions{o.timeout});
    torch::manual_seed(7);
    auto root = make_module();
    if (name == "masks") {
      shard::FullyShardedModel fsdp(root, rdzv, o);
      std::string err = check_masks(fsdp, *root, two_or_more_dims) + check_masks(fsdp, *root, is_bias);
      rdzv->world()->barrier()->wait();
      if (!err.empty()) {
        std::cout << "MISMATCH rank " << info.rank << ":\n" << err << std::endl;
        return 1;
      }
      return 0;
    }
    if (name == "save_signed") {
      // Every >= 2-D parameter positive, every other one negative.
      {
        torch::NoGradGuard no_grad;
        for (auto& p : root->parameters()) {
          p.copy_(1 + torch::rand_like(p));
          if (p.dim() < 2) p.neg_();
        }
      }
      shard::FullyShardedModel fsdp(root, rdzv, o);
      shard::save_checkpoint(fsdp, nullptr, env_or("GS_CKPT", ""), 1);
      shard::wait_for_checkpoint(fsdp);
      return 0;
    }
    if (name == "load_signed") {
      // Zeros everywhere, then the signed checkpoint (saved at another world
      // size): the dim >= 2 mask must select exactly the positive elements.
      {
        torch::NoGradGuard no_grad;
        for (auto& p : root->parameters()) p.zero_();
      }
      shard::FullyShardedModel fsdp(root, rdzv, o);
      auto loaded = shard::load_checkpoint(fsdp, nullptr, shard::latest_checkpoint(env_or("GS_CKPT", "")));
      std::ostringstream err;
      if (loaded.saved_world_size == info.world_size) err << "saved at the same world size\n";
      const auto masks = fsdp.shard_masks(two_or_more_dims);
      const auto params = fsdp.parameters();
      const auto units = fsdp.units();
      for (size_t i = 0; i < params.size(); ++i) {
        at::Tensor p = params[i].detach().to(at::kCPU), m = masks[i].to(at::kCPU);
        // Real (unpadded) elements of this shard.
        const int64_t lo = fsdp.shard_group()->rank() * units[i].shard_numel;
        const int64_t real = std::clamp<int64_t>(units[i].numel - lo, 0, units[i].shard_numel);
        at::Tensor in_param = at::arange(units[i].shard_numel) < real;
        if (!p.masked_select(m).gt(0).all().item<bool>())
          err << "unit '" << units[i].name << "': a masked element is not from a >= 2-D parameter\n";
        if (!p.masked_select(in_param & ~m).lt(0).all().item<bool>())
          err << "unit '" << units[i].name << "': an unmasked element is from a >= 2-D parameter\n";
        if (m.masked_select(~in_param).any().item<bool>())
          err << "unit '" << units[i].name << "': padding is masked\n";
      }
      err << check_masks(fsdp, *root, two_or_more_dims);
      rdzv->world()->barrier()->wait();
      if (!err.str().empty()) {
        std::cout << "MISMATCH rank " << info.rank << ":\n" << err.str() << std::endl;
        return 1;
      }
      return 0;
    }
  } catch (const std::exception& e) {
    std::cout << "ERROR: " << e.what() << std::endl;
    return 2;
  }
  std::cerr << "unknown scenario " << name << "\n";
  return 4;
}

void run(const std::string& scenario, int world, std::map<std::string, std::string> env) {
  gstest::SpawnOptions so;
  so.world_size = world;
  so.timeout = std::chrono::seconds(120);
  so.env = std::move(env);
  so.env["GS_RANK_SCENARIO"] = scenario;
  so.env["OMP_NUM_THREADS"] = "1";
  for (const auto& r : gstest::run_ranks({gstest::self_exe()}, so))
    EXPECT_EQ(r.exit_code, 0) << scenario << " rank " << r.rank << " output:\n" << r.output;
}

struct MaskCase {
  const char* sentence;
  int world;
  const char* strategy;
  int hybrid_g = 0;
  bool offload = false;
};

class ShardMasks : public ::testing::TestWithParam<MaskCase> {};

TEST_P(ShardMasks, GatheredMasksAreThePerParameterMasksInFlatOrderWithPaddingFalse) {
  const auto& c = GetParam();
  run("masks", c.world,
      {{"GS_STRATEGY", c.strategy}, {"GS_HYBRID_G", std::to_string(c.hybrid_g)}, {"GS_OFFLOAD", c.offload ? "1" : "0"}});
}

const MaskCase kMasks[] = {
    {"one rank, full shard", 1, "FULL_SHARD"},
    {"two ranks, full shard", 2, "FULL_SHARD"},
    {"three ranks, full shard", 3, "FULL_SHARD"},
    {"three ranks, shard grad op", 3, "SHARD_GRAD_OP"},
    {"two ranks, no shard", 2, "NO_SHARD"},
    {"four ranks, hybrid shard in two groups of two", 4, "HYBRID_SHARD", 2},
    {"two ranks, hybrid shard with groups of one", 2, "HYBRID_SHARD", 1},
    {"three ranks, full shard, CPU offload", 3, "FULL_SHARD", 0, true},
};

void PrintTo(const MaskCase& c, std::ostream* os) { *os << c.sentence; }

std::string case_name(const ::testing::TestParamInfo<MaskCase>& info) { return gstest::test_name(info.param.sentence); }

INSTANTIATE_TEST_SUITE_P(Table, ShardMasks, ::testing::ValuesIn(kMasks), case_name);

// The masks come from the layout, never from a checkpoint: saved at two
// ranks, loaded at one and at three, they still select exactly the elements
// of the >= 2-D parameters.
TEST(ShardMasks, SelectTheMatricesAfterACheckpointIsLoadedAtAnotherWorldSize) {
  gstest::TempDir dir;
  run("save_signed", 2, {{"GS_CKPT", dir.path()}});
  run("load_signed", 1, {{"GS_CKPT", dir.path()}});
  run("load_signed", 3, {{"GS_CKPT", dir.path()}});
  run("load_signed", 4, {{"GS_CKPT", dir.path()}, {"GS_STRATEGY", "HYBRID_SHARD"}, {"GS_HYBRID_G", "2"}});
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* s = std::getenv("GS_RANK_SCENARIO")) return run_scenario(s);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
