// bench activation_checkpointing: training step time and activation memory
// of a GPT with every block checkpointing its activations, against the same
// run without (the baseline), FULL_SHARD on real rank processes (this
// binary, re-executed) talking Gloo on loopback, one thread each.
// Activation bytes = heap in use after forward minus before it (what the
// autograd graph keeps for backward), on rank 0.
//
//   scripts/bench.sh activation_checkpointing [--ranks 2] [--steps 5] [--warmup 1]
//                   [--batch 8] [--seq 128] [--layers 6] [--embd 384] [--vocab 4096]
#include "shard/fully_shard.h"
#include "shard/host_memory.h"
#include "shard/launch.h"
#include "shard/rendezvous.h"
#include "model_flags.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Args = gsbench::ModelArgs;
using gsbench::model_config;

Args parse(int argc, char** argv) {
  Args d;
  d.batch = 8;
  d.embd = 384;
  d.vocab = 4096;
  return gsbench::parse_model_flags(argc, argv, d, "bench_activation_checkpointing");
}

int run_rank(const Args& a, bool on) {
  at::set_num_threads(1);
  auto info = shard::rendezvous_info_from_env();
  auto rdzv = shard::Rendezvous::connect(info);
  torch::manual_seed(0);
  greenshard::GPT model(model_config(a));
  shard::FullyShardOptions o;
  o.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
  if (on)
    o.activation_checkpointing = [](const std::string&, const torch::nn::Module& m) {
      return dynamic_cast<const greenshard::BlockImpl*>(&m) != nullptr;
    };
  shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);
  torch::optim::AdamW opt(fsdp.parameters(), torch::optim::AdamWOptions(1e-4));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(info.rank);
  std::vector<double> times, act;
  for (int step = 0; step < a.warmup + a.steps; ++step) {
    auto x = at::randint(0, a.vocab, {a.batch, a.seq}, gen, at::kLong);
    rdzv->world()->barrier()->wait();
    auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    const int64_t before = shard::host_memory().heap_in_use_bytes;
    auto loss = model->loss(model->forward(x), x);
    const int64_t kept = shard::host_memory().heap_in_use_bytes - before;
    loss.backward();
    opt.step();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double slowest = gsbench::slowest_rank_ms(*rdzv, ms);
    if (step >= a.warmup) {
      times.push_back(slowest);
      act.push_back(static_cast<double>(kept));
    }
  }
  std::sort(times.begin(), times.end());
  std::sort(act.begin(), act.end());
  if (info.rank == 0) std::printf("ROW %.3f %.0f\n", times[times.size() / 2], act[act.size() / 2]);
  std::fflush(stdout);
  rdzv->depart();
  return 0;
}

bool run_config(const Args& a, bool on, char** argv, double* ms, double* act) {
  shard::LocalLaunchOptions lo;
  lo.nproc = a.ranks;
  lo.env = {{"OMP_NUM_THREADS", "1"}, {"OPENBLAS_NUM_THREADS", "1"}, {"GS_BENCH_AC", on ? "1" : "0"}};
  lo.capture_rank0_stdout = true;
  lo.timeout = std::chrono::seconds(1800);
  std::vector<std::string> args{"/proc/self/exe"};
  for (int i = 1; argv[i]; ++i) args.push_back(argv[i]);
  auto res = shard::launch_local(args, lo);
  auto pos = res.rank0_stdout.find("ROW ");
  if (!res.ok || pos == std::string::npos) {
    std::fprintf(stderr, "run failed:\n%s\n", res.rank0_stdout.c_str());
    return false;
  }
  std::istringstream in(res.rank0_stdout.substr(pos + 4));
  in >> *ms >> *act;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (auto rc = gsbench::run_as_rank_if("GS_BENCH_AC", [&](const std::string& ac) { return run_rank(a, ac == "1"); }))
    return *rc;
  const auto gc = model_config(a);
  std::printf("# activation_checkpointing: GPT %.1fM params (%d layers, %d wide), batch %d x seq %d per rank, "
              "%d ranks FULL_SHARD, median of %d steps after %d warm-up\n",
              greenshard::num_parameters(gc) / 1e6, a.layers, a.embd, a.batch, a.seq, a.ranks, a.steps, a.warmup);
  std::printf("#\n# %-26s %10s %10s %9s %16s %10s\n", "config", "step(ms)", "tok/s", "time/off", "activations(MB)",
              "bytes/off");
  double off_ms = 0, off_act = 0, on_ms = 0, on_act = 0;
  if (!run_config(a, false, argv, &off_ms, &off_act) || !run_config(a, true, argv, &on_ms, &on_act)) return 1;
  auto row = [&](const char* name, double ms, double act) {
    std::printf("  %-26s %10.1f %10.0f %9.3f %16.1f %10.3f\n", name, ms, 1000.0 * a.batch * a.seq * a.ranks / ms,
                ms / off_ms, act / 1e6, act / off_act);
  };
  row("off (baseline)", off_ms, off_act);
  row("every block checkpointed", on_ms, on_act);
  std::printf("#\n# the recompute adds one forward of every block to each step\n");
  std::printf("RESULT activation_checkpointing time_on_vs_off=%.3f activation_bytes_on_vs_off=%.3f\n", on_ms / off_ms,
              on_act / off_act);
  return 0;
}
