// FSDP runtime tests. Every multi-rank case starts real rank processes (this
// binary, re-executed with GS_RANK_SCENARIO set) talking Gloo on loopback.
#include "common/spawn.h"
#include "parity_harness.h"
#include "shard/fully_shard.h"
#include "shard/host_memory.h"
#include "shard/rendezvous.h"
#include "worker/model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

shard::FullyShardOptions options_from_env() {
  shard::FullyShardOptions o;
  o.strategy = shard::parse_sharding_strategy(env_or("GS_STRATEGY", "FULL_SHARD"));
  o.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
  o.backward_prefetch = env_or("GS_PREFETCH", "1") == "1" ? shard::BackwardPrefetch::kBackwardPre
                                                          : shard::BackwardPrefetch::kNone;
  o.forward_prefetch = env_or("GS_PREFETCH", "1") == "1";
  o.limit_all_gathers = std::stoi(env_or("GS_LIMIT", "2"));
  o.hybrid_shard_group_size = std::stoi(env_or("GS_HYBRID_G", "0"));
  o.timeout = std::chrono::milliseconds(std::stoi(env_or("GS_TIMEOUT_MS", "60000")));
  if (env_or("GS_BF16", "0") == "1") o.mixed_precision.param_dtype = at::kBFloat16;
  if (env_or("GS_ACT_CKPT", "0") == "1")
    o.activation_checkpointing = [](const std::string&, const torch::nn::Module& m) {
      return dynamic_cast<const greenshard::BlockImpl*>(&m) != nullptr;
    };
  o.offload.offload_params = env_or("GS_OFFLOAD", "0") == "1";
  return o;
}

gstest::TrainSpec spec_from_env() {
  gstest::TrainSpec s;
  s.steps = std::stoi(env_or("GS_STEPS", "4"));
  s.micro_batches = std::stoi(env_or("GS_MICRO", "1"));
  s.clip = std::stod(env_or("GS_CLIP", "0"));
  s.bf16 = env_or("GS_BF16", "0") == "1";
  return s;
}

// 32 blocks of 12 * 512^2 parameters: ~404 MB of fp32 parameters in all, so
// fixed per-process costs (communicator buffers, threads) stay well inside
// the bound's 20 % margin.
greenshard::GPTConfig deferred_config() {
  greenshard::GPTConfig c;
  c.vocab_size = 256;
  c.block_size = 64;
  c.n_layer = 32;
  c.n_head = 4;
  c.n_embd = 512;
  return c;
}

greenshard::GPTConfig seeded_config() {
  greenshard::GPTConfig c;
  c.vocab_size = 64;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  return c;
}

// ---- rank scenarios (run in child processes) ----
int run_scenario(const std::string& name) {
  try {
    if (name == "train") {
      gstest::RankMemory mem;
      auto r = gstest::fsdp_train(spec_from_env(), options_from_env(), &mem);
      const std::string out = env_or("GS_OUT", "");
      const std::string rank = env_or("RANK", "0");
      if (rank == "0") gstest::save_result(r, out);
      std::ofstream m(out + ".mem." + rank);
      m << mem.peak_unsharded << " " << mem.largest_unit << " " << mem.sharded_param_bytes << " " << mem.total_numel
        << " " << mem.padded_total << "\n";
      return 0;
    }
    if (name == "deferred_init") {
      // Unit-by-unit initialization of a model larger than this rank's
      // budget; reports peak RSS against the RSS before building it.
      auto info = shard::rendezvous_info_from_env();
      auto rdzv = shard::Rendezvous::connect(info);
      greenshard::GPTConfig c = deferred_config();
      const auto before = shard::host_memory();
      torch::manual_seed(42);
      greenshard::GPT model(c, /*deferred=*/true);
      shard::FullyShardOptions o;
      o.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
      o.param_init = model->param_init();
      o.sync_module_states = env_or("GS_SYNC", "0") == "1";
      shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);
      const auto after = shard::host_memory();
      const auto stats = fsdp.memory();
      std::ofstream m(env_or("GS_OUT", "") + ".mem." + std::to_string(info.rank));
      m << before.rss_bytes << " " << after.peak_rss_bytes << " " << stats.sharded_param_bytes << " "
        << stats.largest_unit_unsharded_bytes / 2 << "\n";
      m.close();
      auto full = fsdp.full_parameters();  // (after the measurement)
      if (info.rank == 0) {
        gstest::TrainResult r;
        r.params = full;
        gstest::save_result(r, env_or("GS_OUT", ""));
      }
      rdzv->world()->barrier()->wait();
      return 0;
    }
    if (name == "seeded_by_rank") {
      // Every rank builds the model from its own seed (100 + rank), eagerly
      // or deferred (unit by unit); GS_SYNC says whether sync_module_states
      // copies rank 0's values. Each rank writes the full parameters it
      // sees: with NO_SHARD its own replica, else gathered from the shards.
      auto info = shard::rendezvous_info_from_env();
      auto rdzv = shard::Rendezvous::connect(info);
      torch::manual_seed(100 + info.rank);
      greenshard::GPT model(seeded_config(), /*deferred=*/env_or("GS_DEFERRED", "0") == "1");
      shard::FullyShardOptions o;
      o.strategy = shard::parse_sharding_strategy(env_or("GS_STRATEGY", "FULL_SHARD"));
      o.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
      if (env_or("GS_DEFERRED", "0") == "1") o.param_init = model->param_init();
      o.sync_module_states = env_or("GS_SYNC", "0") == "1";
      shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);
      gstest::TrainResult r;
      r.params = fsdp.full_parameters();
      gstest::save_result(r, env_or("GS_OUT", "") + "." + std::to_string(info.rank));
      rdzv->world()->barrier()->wait();
      return 0;
    }
    if (name == "die_before_collective") {
      auto info = shard::rendezvous_info_from_env();
      auto o = options_from_env();
      auto rdzv = shard::Rendezvous::connect(info, shard::CommunicatorOptions{o.timeout});
      torch::manual_seed(0);
      greenshard::GPTConfig c;
      c.vocab_size = 64; c.block_size = 8; c.n_layer = 2; c.n_head = 2; c.n_embd = 16;
      greenshard::GPT model(c);
      shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);
      if (info.rank == 1) {
        std::cout << "rank 1 exits before the first all-gather" << std::endl;
        _exit(3);
      }
      auto idx = at::zeros({1, 8}, at::kLong);
      auto loss = model->loss(model->forward(idx), idx);
      loss.backward();
      std::cout << "UNEXPECTED: training step completed" << std::endl;
      return 0;
    }
  } catch (const std::exception& e) {
    std::cout << "ERROR: " << e.what() << std::endl;
    return 2;
  }
  std::cerr << "unknown scenario " << name << "\n";
  return 4;
}

// ---- helpers for the parent ----
struct Launch {
  int world = 2;
  std::map<std::string, std::string> env;
};

gstest::TrainResult launch_train(const Launch& l, const gstest::TempDir& dir,
                                 std::vector<std::vector<int64_t>>* mems = nullptr) {
  gstest::SpawnOptions so;
  so.world_size = l.world;
  so.timeout = std::chrono::seconds(240);
  so.env = l.env;
  so.env["GS_RANK_SCENARIO"] = "train";
  so.env["GS_OUT"] = dir.file("result.pt");
  so.env["OMP_NUM_THREADS"] = "1";
  auto results = gstest::run_ranks({gstest::self_exe()}, so);
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << " output:\n" << r.output;
    if (r.exit_code != 0) throw std::runtime_error("rank failed");
  }
  if (mems) {
    for (int rank = 0; rank < l.world; ++rank) {
      std::ifstream in(dir.file("result.pt.mem." + std::to_string(rank)));
      std::vector<int64_t> v(5);
      for (auto& x : v) in >> x;
      mems->push_back(v);
    }
  }
  return gstest::load_result(dir.file("result.pt"));
}

double rel_err(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-12);
}

void expect_parity(const gstest::TrainResult& got, const gstest::TrainResult& ref, double tol) {
  ASSERT_EQ(got.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_LE(std::abs(got.losses[i] - ref.losses[i]) / std::abs(ref.losses[i]), tol)
        << "step " << i << ": " << got.losses[i] << " vs " << ref.losses[i];
  ASSERT_EQ(got.params.size(), ref.params.size());
  for (const auto& [name, t] : ref.params) {
    ASSERT_TRUE(got.params.count(name)) << name;
    EXPECT_LE(rel_err(got.params.at(name), t), tol) << name;
  }
}

const gstest::TrainResult& reference(const gstest::TrainSpec& spec) {
  static std::map<std::string, gstest::TrainResult> cache;
  std::string key = std::to_string(spec.steps) + "/" + std::to_string(spec.micro_batches) + "/" +
                    std::to_string(spec.clip);
  if (!cache.count(key)) cache[key] = gstest::reference_train(spec);
  return cache[key];
}

// ---- parity table ----
struct ParityCase {
  const char* sentence;
  int world;
  const char* strategy;
  bool prefetch;
  int hybrid_g;
  bool activation_checkpointing = false;
  bool offload = false;
};

class Parity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(Parity, MatchesSingleProcessTraining) {
  const auto& c = GetParam();
  SCOPED_TRACE(c.sentence);
  gstest::TempDir dir;
  Launch l;
  l.world = c.world;
  l.env = {{"GS_STRATEGY", c.strategy}, {"GS_PREFETCH", c.prefetch ? "1" : "0"},
           {"GS_HYBRID_G", std::to_string(c.hybrid_g)}, {"GS_STEPS", "4"},
           {"GS_ACT_CKPT", c.activation_checkpointing ? "1" : "0"}, {"GS_OFFLOAD", c.offload ? "1" : "0"}};
  gstest::TrainSpec spec;
  spec.steps = 4;
  expect_parity(launch_train(l, dir), reference(spec), 1e-5);
}

const ParityCase kParity[] = {
    {"one rank, full shard, prefetch", 1, "FULL_SHARD", true, 0},
    {"two ranks, full shard, prefetch", 2, "FULL_SHARD", true, 0},
    {"two ranks, full shard, no prefetch", 2, "FULL_SHARD", false, 0},
    {"four ranks, full shard, prefetch", 4, "FULL_SHARD", true, 0},
    {"four ranks, full shard, no prefetch", 4, "FULL_SHARD", false, 0},
    {"one rank, shard grad op", 1, "SHARD_GRAD_OP", true, 0},
    {"two ranks, shard grad op, prefetch", 2, "SHARD_GRAD_OP", true, 0},
    {"two ranks, shard grad op, no prefetch", 2, "SHARD_GRAD_OP", false, 0},
    {"four ranks, shard grad op, prefetch", 4, "SHARD_GRAD_OP", true, 0},
    {"one rank, no shard", 1, "NO_SHARD", true, 0},
    {"two ranks, no shard (DDP baseline)", 2, "NO_SHARD", true, 0},
    {"four ranks, no shard, no prefetch", 4, "NO_SHARD", false, 0},
    {"four ranks, hybrid shard in two groups of two, prefetch", 4, "HYBRID_SHARD", true, 2},
    {"four ranks, hybrid shard in two groups of two, no prefetch", 4, "HYBRID_SHARD", false, 2},
    {"two ranks, hybrid shard with groups of one", 2, "HYBRID_SHARD", true, 1},
    {"two ranks, full shard, every block checkpoints its activations", 2, "FULL_SHARD", true, 0, true, false},
    {"four ranks, shard grad op, activation checkpointing, no prefetch", 4, "SHARD_GRAD_OP", false, 0, true, false},
    {"one rank, full shard, CPU offload", 1, "FULL_SHARD", true, 0, false, true},
    {"two ranks, full shard, CPU offload", 2, "FULL_SHARD", true, 0, false, true},
    {"two ranks, no shard, CPU offload", 2, "NO_SHARD", true, 0, false, true},
    {"four ranks, hybrid shard, CPU offload and activation checkpointing", 4, "HYBRID_SHARD", true, 2, true, true},
};

std::string case_name(const ::testing::TestParamInfo<ParityCase>& info) { return gstest::test_name(info.param.sentence); }

INSTANTIATE_TEST_SUITE_P(Table, Parity, ::testing::ValuesIn(kParity), case_name);

TEST(UnitByUnitInit, PeakMemoryIsShardsPlusOneUnitAndValuesEqualTheWholeModelBuild) {
  const auto c = deferred_config();
  const int world = 4;
  const int64_t total_bytes = greenshard::num_parameters(c) * 4;
  for (const char* sync : {"0", "1"}) {
    SCOPED_TRACE(std::string("sync_module_states ") + sync);
    gstest::TempDir dir;
    gstest::SpawnOptions so;
    so.world_size = world;
    so.timeout = std::chrono::seconds(240);
    so.env = {{"GS_RANK_SCENARIO", "deferred_init"}, {"GS_OUT", dir.file("full.pt")}, {"GS_SYNC", sync},
              {"OMP_NUM_THREADS", "1"}};
    for (const auto& r : gstest::run_ranks({gstest::self_exe()}, so)) ASSERT_EQ(r.exit_code, 0) << r.output;
    for (int rank = 0; rank < world; ++rank) {
      std::ifstream in(dir.file("full.pt.mem." + std::to_string(rank)));
      int64_t baseline = 0, peak = 0, sharded = 0, largest_unit = 0;
      in >> baseline >> peak >> sharded >> largest_unit;
      ASSERT_GT(peak, 0);
      const double bound = (static_cast<double>(total_bytes) / world + largest_unit) * 1.2 + baseline;
      std::printf("  rank %d: model %.1f MB, bound %.1f MB (baseline %.1f), peak RSS %.1f MB\n", rank,
                  total_bytes / 1e6, bound / 1e6, baseline / 1e6, peak / 1e6);
      EXPECT_GT(total_bytes + baseline, bound) << "the model must not fit the per-rank budget, or this proves nothing";
      EXPECT_LE(peak, bound) << "rank " << rank;
      EXPECT_NEAR(sharded, total_bytes / world, total_bytes / world / 50) << "rank " << rank;
    }
    // The same seed, the whole model in one process.
    torch::manual_seed(42);
    greenshard::GPT whole(c);
    auto got = gstest::load_result(dir.file("full.pt"));
    ASSERT_EQ(got.params.size(), whole->named_parameters().size());
    for (const auto& p : whole->named_parameters())
      EXPECT_TRUE(at::equal(got.params.at(p.key()), p.value())) << p.key();
  }
}

// sync_module_states: ranks that built the model from different seeds end
// up with rank 0's values when it is on, and keep their own when it is off.
struct SyncCase {
  const char* sentence;
  const char* strategy;
  bool sync;
  bool deferred;
};

class SyncModuleStates : public ::testing::TestWithParam<SyncCase> {};

TEST_P(SyncModuleStates, RanksSeededDifferentlyEndWithRankZerosValuesOnlyWhenOn) {
  const auto& c = GetParam();
  SCOPED_TRACE(c.sentence);
  const int world = 2;
  gstest::TempDir dir;
  gstest::SpawnOptions so;
  so.world_size = world;
  so.timeout = std::chrono::seconds(120);
  so.env = {{"GS_RANK_SCENARIO", "seeded_by_rank"}, {"GS_OUT", dir.file("params.pt")},
            {"GS_STRATEGY", c.strategy}, {"GS_SYNC", c.sync ? "1" : "0"},
            {"GS_DEFERRED", c.deferred ? "1" : "0"}, {"OMP_NUM_THREADS", "1"}};
  for (const auto& r : gstest::run_ranks({gstest::self_exe()}, so)) ASSERT_EQ(r.exit_code, 0) << r.output;
  // Each rank's model as built from its seed in this process (the
  // unit-by-unit build gives the same values as the whole-model one).
  std::vector<std::map<std::string, at::Tensor>> seeded(world);
  for (int rank = 0; rank < world; ++rank) {
    torch::manual_seed(100 + rank);
    greenshard::GPT whole(seeded_config());
    for (const auto& p : whole->named_parameters()) seeded[rank][p.key()] = p.value().detach().clone();
  }
  int differ_between_seeds = 0;
  for (const auto& [name, t] : seeded[0]) differ_between_seeds += !at::equal(t, seeded[1].at(name));
  ASSERT_GT(differ_between_seeds, 0) << "the seeds must give different models, or this proves nothing";
  const bool replicas = std::string(c.strategy) == "NO_SHARD";
  for (int rank = 0; rank < world; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    auto got = gstest::load_result(dir.file("params.pt." + std::to_string(rank))).params;
    ASSERT_EQ(got.size(), seeded[0].size());
    int differ_from_rank0 = 0;
    for (const auto& [name, t] : seeded[0]) {
      ASSERT_TRUE(got.count(name)) << name;
      const bool equal = at::equal(got.at(name), t);
      differ_from_rank0 += !equal;
      if (c.sync) {
        EXPECT_TRUE(equal) << name << " is not rank 0's value";
      }
      // A replica keeps exactly what its own seed built.
      if (!c.sync && replicas) {
        EXPECT_TRUE(at::equal(got.at(name), seeded[rank].at(name))) << name;
      }
    }
    // Off: rank 1's own values show (its replica, or its shards in the
    // gathered parameters every rank sees).
    if (!c.sync && (rank == 1 || !replicas)) {
      EXPECT_GT(differ_from_rank0, 0);
    }
  }
}

const SyncCase kSync[] = {
    {"full shard, sync on: the gathered parameters are rank 0's", "FULL_SHARD", true, false},
    {"full shard, sync off: rank 1's shards hold its own seed's values", "FULL_SHARD", false, false},
    {"no shard, sync on: every replica is rank 0's", "NO_SHARD", true, false},
    {"no shard, sync off: every replica keeps its own seed's values", "NO_SHARD", false, false},
    {"unit by unit init, full shard, sync on: rank 0's values", "FULL_SHARD", true, true},
    {"unit by unit init, no shard, sync off: own values", "NO_SHARD", false, true},
};

INSTANTIATE_TEST_SUITE_P(Table, SyncModuleStates, ::testing::ValuesIn(kSync),
                         [](const ::testing::TestParamInfo<SyncCase>& info) {
                           return gstest::test_name(info.param.sentence);
                         });

TEST(ActivationCheckpointing, SameGradientsWithLessActivationMemory) {
  shard::RendezvousInfo info{"127.0.0.1", gstest::free_port(), 0, 1, 0, 1};
  auto rdzv = shard::Rendezvous::connect(info);
  greenshard::GPTConfig c;
  c.vocab_size = 64; c.block_size = 64; c.n_layer = 4; c.n_head = 4; c.n_embd = 64;
  auto idx = at::randint(0, 64, {8, 64}, at::kLong);
  std::map<bool, int64_t> activation_bytes;
  std::map<bool, std::vector<at::Tensor>> grads;
  for (bool on : {false, true}) {
    torch::manual_seed(7);
    greenshard::GPT model(c);
    shard::FullyShardOptions o;
    o.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
    if (on)
      o.activation_checkpointing = [](const std::string&, const torch::nn::Module& m) {
        return dynamic_cast<const greenshard::BlockImpl*>(&m) != nullptr;
      };
    shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);
    int checkpointed = 0;
    for (const auto& u : fsdp.units()) checkpointed += u.activation_checkpointing;
    EXPECT_EQ(checkpointed, on ? 4 : 0);
    const int64_t before = shard::host_memory().heap_in_use_bytes;
    auto loss = model->loss(model->forward(idx), idx);
    activation_bytes[on] = shard::host_memory().heap_in_use_bytes - before;  // what the graph keeps
    loss.backward();
    for (auto& p : fsdp.parameters()) grads[on].push_back(p.grad().clone());
  }
  std::printf("  activation bytes kept by forward: off %.2f MB, on %.2f MB\n", activation_bytes[false] / 1e6,
              activation_bytes[true] / 1e6);
  EXPECT_LT(activation_bytes[true], activation_bytes[false] / 2);
  ASSERT_EQ(grads[true].size(), grads[false].size());
  for (size_t i = 0; i < grads[true].size(); ++i)
    EXPECT_LE(rel_err(grads[true][i], grads[false][i]), 1e-6) << "unit " << i;
}

TEST(ActivationCheckpointing, ANestedUnitOrTheClosureFormIsAClearError) {
  shard::RendezvousInfo info{"127.0.0.1", gstest::free_port(), 0, 1, 0, 1};
  auto rdzv = shard::Rendezvous::connect(info);
  greenshard::GPTConfig c;
  c.vocab_size = 16; c.block_size = 8; c.n_layer = 1; c.n_head = 2; c.n_embd = 8;
  {
    greenshard::GPT model(c);
    shard::FullyShardOptions o;
    o.wrap.predicate = [](const std::string& name, const torch::nn::Module&) { return name == "h.0" || name == "h.0.mlp"; };
    o.activation_checkpointing = [](const std::string& name, const torch::nn::Module&) { return name == "h.0"; };
    try {
      shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);
      ADD_FAILURE() << "nested unit accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("contains the unit 'h.0.mlp'"), std::string::npos) << e.what();
    }
  }
  {
    greenshard::GPT model(c);
    shard::FullyShardOptions o;
    o.wrap = shard::WrapPolicy::by_type<greenshard::MLPImpl>();
    o.activation_checkpointing = [](const std::string&, const torch::nn::Module&) { return true; };
    shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);
    auto idx = at::zeros({1, 8}, at::kLong);
    try {
      model->forward(idx);
      ADD_FAILURE() << "closure-form forward_unit accepted for a checkpointed unit";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("forward_unit(module, input, fn)"), std::string::npos) << e.what();
    }
  }
}

TEST(FullyShard, DeferredParametersWithoutParamInitAreRejected) {
  shard::RendezvousInfo info{"127.0.0.1", gstest::free_port(), 0, 1, 0, 1};
  auto rdzv = shard::Rendezvous::connect(info);
  greenshard::GPTConfig c;
  c.vocab_size = 16; c.block_size = 8; c.n_layer = 1; c.n_head = 2; c.n_embd = 8;
  greenshard::GPT model(c, /*deferred=*/true);
  EXPECT_TRUE(shard::is_deferred(model->wte->weight));
  try {
    shard::FullyShardedModel fsdp(model.ptr(), rdzv, {});
    ADD_FAILURE() << "deferred parameters accepted without param_init";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is deferred"), std::string::npos) << e.what();
  }
}

TEST(FullyShard, ClippingAndAccumulationMatchSingleProcess) {
  gstest::TempDir dir;
  Launch l;
  l.world = 2;
  l.env = {{"GS_STRATEGY", "FULL_SHARD"}, {"GS_STEPS", "3"}, {"GS_MICRO", "2"}, {"GS_CLIP", "0.05"}};
  gstest::TrainSpec spec;
  spec.steps = 3;
  spec.micro_batches = 2;
  spec.clip = 0.05;
  const auto& ref = reference(spec);
  auto got = launch_train(l, dir);
  expect_parity(got, ref, 1e-5);
  ASSERT_EQ(got.grad_norms.size(), ref.grad_norms.size());
  for (size_t i = 0; i < ref.grad_norms.size(); ++i) {
    EXPECT_NEAR(got.grad_norms[i], ref.grad_norms[i], 1e-5 * ref.grad_norms[i]);
    EXPECT_GT(ref.grad_norms[i], 0.05) << "clipping must actually trigger in this test";
  }
}

TEST(FullyShard, Bf16MixedPrecisionTracksFp32LossCurve) {
  // Stated tolerance: every step's loss within 2% of the fp32 reference.
  gstest::TempDir dir;
  Launch l;
  l.world = 2;
  l.env = {{"GS_STRATEGY", "FULL_SHARD"}, {"GS_STEPS", "8"}, {"GS_BF16", "1"}};
  gstest::TrainSpec spec;
  spec.steps = 8;
  const auto& ref = reference(spec);
  auto got = launch_train(l, dir);
  ASSERT_EQ(got.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    std::printf("  step %zu: loss bf16 %.5f fp32 %.5f\n", i, got.losses[i], ref.losses[i]);
    EXPECT_LE(std::abs(got.losses[i] - ref.losses[i]) / ref.losses[i], 0.02) << "step " << i;
  }
  EXPECT_LT(got.losses.back(), got.losses.front()) << "bf16 training must reduce the loss";
  // Master weights stay fp32 and differ from the bf16 rounding of themselves.
  for (const auto& [name, t] : got.params) EXPECT_EQ(t.scalar_type(), at::kFloat) << name;
}

TEST(FullyShard, MemoryIsBoundedByRateLimitAndShardedBytesAreOneNth) {
  for (int limit : {1, 2}) {
    for (int world : {2, 4}) {
      SCOPED_TRACE("limit " + std::to_string(limit) + ", world " + std::to_string(world));
      gstest::TempDir dir;
      Launch l;
      l.world = world;
      l.env = {{"GS_STRATEGY", "FULL_SHARD"}, {"GS_STEPS", "2"}, {"GS_LIMIT", std::to_string(limit)}};
      std::vector<std::vector<int64_t>> mems;
      launch_train(l, dir, &mems);
      for (int r = 0; r < world; ++r) {
        const auto& m = mems[r];  // peak, largest unit, sharded bytes, total numel, padded total
        EXPECT_GT(m[0], 0);
        EXPECT_LE(m[0], (limit + 1) * m[1]) << "rank " << r;
        EXPECT_EQ(m[2] * world, m[4] * 4) << "sharded fp32 bytes = padded total / N";
        EXPECT_LT(m[4] - m[3], 4 * world) << "padding below one element per rank per unit";
      }
    }
  }
}

TEST(FullyShard, RankThatExitsMakesSurvivorsFailClearlyWithinDeadline) {
  gstest::SpawnOptions so;
  so.world_size = 2;
  so.timeout = std::chrono::seconds(120);
  so.env = {{"GS_RANK_SCENARIO", "die_before_collective"}, {"GS_TIMEOUT_MS", "5000"}};
  auto results = gstest::run_ranks({gstest::self_exe()}, so);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].exit_code, 3) << results[1].output;
  const auto& r0 = results[0];
  EXPECT_FALSE(r0.timed_out);
  EXPECT_EQ(r0.exit_code, 2) << r0.output;
  EXPECT_NE(r0.output.find("ERROR:"), std::string::npos) << r0.output;
  EXPECT_NE(r0.output.find("all_gather"), std::string::npos) << r0.output;
  EXPECT_NE(r0.output.find("unit '"), std::string::npos) << r0.output;
  EXPECT_NE(r0.output.find("[0, 1]"), std::string::npos) << r0.output;
  // A hang would hit the 120 s spawn deadline (timed_out above); no
  // duration is asserted (shared machines).
  std::printf("  survivor's error: %s", r0.output.substr(r0.output.find("ERROR:")).c_str());
}

TEST(FullyShard, InvalidPolicyValuesAreClearErrors) {
  struct Bad {
    const char* sentence;
    std::function<void(shard::FullyShardOptions&)> set;
    const char* field;
  };
  const Bad cases[] = {
      {"rate limit of zero", [](auto& o) { o.limit_all_gathers = 0; }, "limit_all_gathers"},
      {"hybrid group not dividing the world",
       [](auto& o) { o.strategy = shard::ShardingStrategy::kHybridShard; o.hybrid_shard_group_size = 3; },
       "hybrid_shard_group_size"},
      {"hybrid group size without hybrid strategy", [](auto& o) { o.hybrid_shard_group_size = 2; },
       "hybrid_shard_group_size"},
      {"integer param dtype", [](auto& o) { o.mixed_precision.param_dtype = at::kInt; },
       "mixed_precision.param_dtype"},
      {"zero timeout", [](auto& o) { o.timeout = std::chrono::milliseconds(0); }, "timeout"},
      {"negative size threshold", [](auto& o) { o.wrap.min_num_params = -1; }, "wrap.min_num_params"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.sentence);
    shard::FullyShardOptions o;
    c.set(o);
    try {
      shard::validate(o, 4, 4);
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(shard::parse_sharding_strategy("hybrid_shard"), shard::ShardingStrategy::kHybridShard);
  try {
    shard::parse_sharding_strategy("FULLSHARD", "sharding.strategy");
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sharding.strategy"), std::string::npos);
  }
}

TEST(FullyShard, UnitsFollowTheWrapPolicyAndSharedParametersLiveOnce) {
  // One rank in-process (a real one-member Gloo group).
  gstest::TempDir dir;
  shard::RendezvousInfo info{"127.0.0.1", gstest::free_port(), 0, 1, 0, 1};
  auto rdzv = shard::Rendezvous::connect(info);
  torch::manual_seed(0);
  greenshard::GPTConfig c;
  c.vocab_size = 64; c.block_size = 8; c.n_layer = 2; c.n_head = 2; c.n_embd = 16;
  {
    greenshard::GPT model(c);
    shard::FullyShardOptions o;
    o.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
    shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);
    auto units = fsdp.units();
    ASSERT_EQ(units.size(), 3u);
    EXPECT_EQ(units[0].name, "");
    EXPECT_EQ(units[1].name, "h.0");
    EXPECT_EQ(units[2].name, "h.1");
    int64_t total = 0;
    for (const auto& u : units) total += u.numel;
    EXPECT_EQ(total, greenshard::num_parameters(c));
    // wte (also the lm_head) is in the root once.
    EXPECT_EQ(std::count(units[0].param_names.begin(), units[0].param_names.end(), "wte.weight"), 1);
  }
  {
    greenshard::GPT model(c);
    shard::FullyShardOptions o;
    o.wrap = shard::WrapPolicy::size_based(3000);  // a block has 12*16*16+13*16 = 3280
    shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);
    auto units = fsdp.units();
    ASSERT_EQ(units.size(), 3u);
    EXPECT_EQ(units[1].name, "h.0");
  }
}

TEST(FullyShard, ParameterSharedByTwoUnitsLivesInTheirLowestCommonUnit) {
  shard::RendezvousInfo info{"127.0.0.1", gstest::free_port(), 0, 1, 0, 1};
  auto rdzv = shard::Rendezvous::connect(info);
  auto root = std::make_shared<torch::nn::Module>();
  auto tower = root->register_module("tower", std::make_shared<torch::nn::Module>());
  auto a = tower->register_module("a", torch::nn::Linear(4, 4));
  auto b = tower->register_module("b", torch::nn::Linear(4, 4));
  auto c = root->register_module("c", torch::nn::Linear(4, 4));
  b->register_parameter("tied", a->weight);  // a.weight is also b.tied
  shard::FullyShardOptions o;
  o.wrap.predicate = [](const std::string& name, const torch::nn::Module&) {
    return name == "tower" || name == "tower.a" || name == "tower.b" || name == "c";
  };
  shard::FullyShardedModel fsdp(root, rdzv, o);
  std::map<std::string, std::vector<std::string>> by_unit;
  for (const auto& u : fsdp.units()) by_unit[u.name] = u.param_names;
  using V = std::vector<std::string>;
  EXPECT_EQ(by_unit["tower"], V{"tower.a.weight"}) << "lowest unit holding both tower.a and tower.b";
  EXPECT_EQ(by_unit["tower.a"], V{"tower.a.bias"});
  EXPECT_EQ(by_unit["tower.b"], (V{"tower.b.weight", "tower.b.bias"}));
  EXPECT_EQ(by_unit["c"], (V{"c.weight", "c.bias"}));
  EXPECT_TRUE(by_unit[""].empty());
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* s = std::getenv("GS_RANK_SCENARIO")) return run_scenario(s);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
