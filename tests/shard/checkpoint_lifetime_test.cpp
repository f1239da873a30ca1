// The CPU analog of bench/gpu's checkpoint_device (docs/gpu.md: the one GPU
// run crashed there, after "loaded step 3"). Two real rank processes each
// run the GPU test's sequence, in its order and with its lifetimes:
//   - one rendezvous for the whole process (a global, as gpu_tests.cpp's
//     g_rdzv: destroyed after main returns, after everything else);
//   - model a: trained 3 steps, saved through its CheckpointSaver (whose
//     collectives run on a side communicator of its own, created by the
//     first save and cached by name in the rendezvous) — synchronously, and
//     then once more asynchronously while a trains on;
//   - model b: built, loads a's checkpoint;
//   - both gather their full parameters (the step that crashed on the GPU),
//     compare them, and take the same step (same loss);
//   - b is destroyed, then a (whose Runtime owns the saver, its thread and
//     its staging image), then the rendezvous at exit.
// scripts/sanitize.sh runs it under ASan + UBSan and TSan.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adamw.h>
#include <torch/utils.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "common/spawn.h"
#include "shard/checkpoint.h"
#include "shard/fully_shard.h"
#include "shard/rendezvous.h"
#include "worker/model.h"

namespace {

std::shared_ptr<shard::Rendezvous> g_rdzv;  // as gpu_tests.cpp: the process's one rendezvous

struct Trained {
  greenshard::GPT model{nullptr};
  std::unique_ptr<shard::FullyShardedModel> fsdp;
  std::unique_ptr<torch::optim::AdamW> opt;
};

std::unique_ptr<Trained> make_gpt() {
  torch::manual_seed(1234);
  greenshard::GPTConfig c;
  c.vocab_size = 64;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  auto t = std::make_unique<Trained>();
  t->model = greenshard::GPT(c);
  shard::FullyShardOptions o;
  o.timeout = std::chrono::seconds(60);
  t->fsdp = std::make_unique<shard::FullyShardedModel>(t->model.ptr(), g_rdzv, o);
  t->opt = std::make_unique<torch::optim::AdamW>(t->fsdp->parameters(), torch::optim::AdamWOptions(1e-2).eps(1e-4));
  return t;
}

double train_step(Trained& t, int step) {
  const int rank = g_rdzv->info().rank;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + step * 2 + rank);
  auto idx = at::randint(0, 64, {2, 17}, gen, at::kLong);
  t.opt->zero_grad();
  auto loss = t.model->loss(t.model->forward(idx.narrow(1, 0, 16)), idx.narrow(1, 1, 16));
  loss.backward();
  t.opt->step();
  at::Tensor l = at::full({1}, loss.item<double>(), at::kDouble);
  g_rdzv->world()->all_reduce(l, shard::ReduceOp::kAvg)->wait();
  return l.item<double>();
}

#define REQUIRE(cond, what)                                                              \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "rank %d: %s:%d: %s: %s\n", g_rdzv ? g_rdzv->info().rank : -1, \
                   __FILE__, __LINE__, #cond, std::string(what).c_str());                \
      std::exit(3);                                                                      \
    }                                                                                    \
  } while (0)

int run_rank() {
  g_rdzv = shard::Rendezvous::connect(shard::rendezvous_info_from_env(),
                                      shard::CommunicatorOptions{std::chrono::seconds(60)});
  const std::string root = std::getenv("GS_LIFETIME_ROOT");
  {
    auto a = make_gpt();
    for (int s = 0; s < 3; ++s) train_step(*a, s);
    const std::string dir = shard::save_checkpoint(*a->fsdp, a->opt.get(), root, 3, "extra");
    std::printf("saved %s\n", dir.c_str());
    auto b = make_gpt();
    auto loaded = shard::load_checkpoint(*b->fsdp, b->opt.get(), dir);
    REQUIRE(loaded.step == 3 && loaded.extra == "extra", "loaded step " + std::to_string(loaded.step));
    auto pa = a->fsdp->full_parameters();
    auto pb = b->fsdp->full_parameters();
    REQUIRE(pa.size() == pb.size() && !pa.empty(), "parameter count");
    for (auto& [name, t] : pa) REQUIRE(at::equal(t, pb.at(name)), "parameter " + name + " differs");
    const double la = train_step(*a, 3), lb = train_step(*b, 3);
    REQUIRE(la == lb, "loss after loading " + std::to_string(lb) + " vs " + std::to_string(la));
    // An asynchronous save of a, in flight while a trains on and b is torn
    // down; a waits for it, then a goes too (its saver last).
    shard::CheckpointOptions async;
    async.async = true;
    shard::save_checkpoint(*a->fsdp, a->opt.get(), root, 4, "extra-4", async);
    b.reset();
    train_step(*a, 4);
    shard::wait_for_checkpoint(*a->fsdp);
    REQUIRE(shard::read_checkpoint_extra(root + "/step_00000004") == "extra-4", "async save");
    std::printf("done\n");
  }
  return 0;  // g_rdzv goes at exit, after both models
}

TEST(CheckpointLifetime, SaveLoadGatherStepAndDestroyInTheGpuTestsOrder) {
  gstest::TempDir dir;
  gstest::SpawnOptions so;
  so.world_size = 2;
  so.timeout = std::chrono::seconds(300);
  so.env["GS_LIFETIME_RANK"] = "1";
  so.env["GS_LIFETIME_ROOT"] = dir.path();
  so.env["OMP_NUM_THREADS"] = "1";
  auto ranks = gstest::run_ranks({gstest::self_exe()}, so);
  for (const auto& r : ranks) {
    EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << " (signal " << r.signal << "):\n" << r.output;
    EXPECT_NE(r.output.find("done"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(shard::latest_checkpoint(dir.path()).empty());
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("GS_LIFETIME_RANK")) return run_rank();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
