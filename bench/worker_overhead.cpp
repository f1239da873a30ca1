// bench worker_overhead: tokens/s of greenshard-worker (1 rank, NO_SHARD)
// against a plain LibTorch loop over the same model, batch and optimizer in
// this process (the baseline), measured in the same run; then the worker on
// 2 ranks FULL_SHARD with its MFU against this machine's measured fp32
// matmul peak (one thread per rank, as the ranks run).
//
//   scripts/bench.sh worker_overhead [--steps 30] [--layers 4] [--embd 256] [--seq 128] [--batch 8]
#include "bench_flags.h"
#include "worker/model.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Args {
  int steps = 30, layers = 4, embd = 256, seq = 128, batch = 8;
};

Args parse(int argc, char** argv) {
  Args a;
  std::map<std::string, int*> ints{{"--steps", &a.steps}, {"--layers", &a.layers}, {"--embd", &a.embd},
                                   {"--seq", &a.seq},     {"--batch", &a.batch}};
  gsbench::parse_int_flags(argc, argv, ints, "bench_worker_overhead");
  if (a.steps < 6) a.steps = 6;
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// fp32 matmul FLOP/s on one thread: the per-rank peak for MFU.
double measured_peak_flops() {
  at::set_num_threads(1);
  const int64_t n = 1024;
  auto a = torch::randn({n, n}), b = torch::randn({n, n});
  torch::mm(a, b);
  std::vector<double> s;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    auto c = torch::mm(a, b);
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return 2.0 * n * n * n / median(s);
}

// The baseline: the same model and AdamW, no FSDP, no metrics, no logging.
double plain_tokens_per_s(const Args& a) {
  at::set_num_threads(1);
  greenshard::GPTConfig c;
  c.vocab_size = 256;
  c.block_size = a.seq;
  c.n_layer = a.layers;
  c.n_head = std::max(1, a.embd / 64);
  c.n_embd = a.embd;
  torch::manual_seed(0);
  greenshard::GPT model(c);
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(3e-4).weight_decay(0.1));
  std::vector<double> times;
  for (int step = 0; step < a.steps; ++step) {
    auto x = torch::randint(0, 256, {a.batch, a.seq}, torch::kLong);
    auto t0 = Clock::now();
    opt.zero_grad();
    auto loss = model->loss(model->forward(x), x);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    opt.step();
    (void)loss.item<double>();
    if (step >= 2) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return a.batch * a.seq / median(times);
}

struct WorkerRun {
  double tokens_per_s = 0, mfu = 0;
  bool ok = false;
};

// Runs greenshard-worker and reads its JSON log lines (median after 2 steps).
WorkerRun run_worker(const Args& a, const std::string& dir, int nproc, const char* strategy, double peak) {
  std::ostringstream cmd;
  cmd << "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 '" << GS_WORKER_BIN << "' --nproc " << nproc
      << " --data.train " << dir << "/data/train.bin --model.layers " << a.layers << " --model.embd " << a.embd
      << " --model.heads " << std::max(1, a.embd / 64) << " --model.context " << a.seq << " --schedule.batch_size "
      << a.batch << " --schedule.steps " << a.steps << " --schedule.eval_interval 0 --sharding.strategy " << strategy
      << " --log.format json --log.every 1 --peak_flops " << peak << " 2>&1";
  FILE* p = popen(cmd.str().c_str(), "r");
  WorkerRun r;
  if (!p) return r;
  std::vector<double> tps, mfu;
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    if (line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("tokens_per_s")) continue;
    if (j["step"].get<int>() > 2) {
      tps.push_back(j["tokens_per_s"].get<double>());
      mfu.push_back(j["mfu"].get<double>());
    }
  }
  r.ok = WEXITSTATUS(pclose(p)) == 0 && !tps.empty();
  if (r.ok) {
    r.tokens_per_s = median(tps);
    r.mfu = median(mfu);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  // The baseline runs in this process: one BLAS thread like every rank.
  // OpenBLAS reads its thread count when it loads, so re-run with it set.
  if (const char* v = std::getenv("OPENBLAS_NUM_THREADS"); !v || std::string(v) != "1") {
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::execv("/proc/self/exe", argv);
  }
  Args a = parse(argc, argv);
  const std::string dir = (fs::temp_directory_path() / ("gs_bench_worker_" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  const std::string prep = std::string("'") + GS_WORKER_BIN + "' prepare --input /usr/share/common-licenses/GPL-3 --out " +
                           dir + "/data > /dev/null";
  if (std::system(prep.c_str()) != 0) {
    std::fprintf(stderr, "prepare failed\n");
    return 1;
  }
  greenshard::GPTConfig c;
  c.vocab_size = 256;
  c.block_size = a.seq;
  c.n_layer = a.layers;
  c.n_embd = a.embd;
  c.n_head = std::max(1, a.embd / 64);
  const double peak = measured_peak_flops();
  std::printf("# worker_overhead: GPT %.2fM params (%d layers, %d wide), batch %d x seq %d per rank, %d steps "
              "(median after 2), 1 thread per rank\n",
              greenshard::num_parameters(c) / 1e6, a.layers, a.embd, a.batch, a.seq, a.steps);
  std::printf("# measured fp32 matmul peak (1 thread, 1024^3): %.1f GFLOP/s per rank\n#\n", peak / 1e9);
  std::printf("# %-34s %6s %12s %10s %8s\n", "run", "ranks", "tokens/s", "vs plain", "MFU");
  const double plain = plain_tokens_per_s(a);
  std::printf("  %-34s %6d %12.0f %10.3f %8s\n", "plain LibTorch loop (baseline)", 1, plain, 1.0, "-");
  // The worker on one rank (its overhead against the loop) and on two.
  const std::pair<int, const char*> runs[] = {{1, "NO_SHARD"}, {2, "FULL_SHARD"}};
  std::vector<WorkerRun> done;
  for (const auto& [ranks, strategy] : runs) {
    auto r = run_worker(a, dir, ranks, strategy, peak);
    if (!r.ok) {
      std::fprintf(stderr, "worker run (%d rank%s) failed\n", ranks, ranks == 1 ? "" : "s");
      return 1;
    }
    std::printf("  %-34s %6d %12.0f %10.3f %7.1f%%\n", ("greenshard-worker " + std::string(strategy)).c_str(), ranks,
                r.tokens_per_s, r.tokens_per_s / plain, 100 * r.mfu);
    done.push_back(r);
  }
  const auto& one = done[0];
  const auto& two = done[1];
  fs::remove_all(dir);
  std::printf("#\n# goal: worker (1 rank) within 5%% of the plain loop (ratio >= 0.95)\n");
  std::printf("RESULT worker_overhead tokens_per_s_worker_vs_plain=%.3f mfu_2rank=%.4f\n", one.tokens_per_s / plain,
              two.mfu);
  return 0;
}
