// bench fsdp_step: training step time and per-rank memory of a ~25M-parameter
// GPT for NO_SHARD (the DDP baseline), FULL_SHARD (prefetch on and off),
// SHARD_GRAD_OP and HYBRID_SHARD, each as a ratio to NO_SHARD measured in
// the same run. Ranks are real processes (this binary, re-executed) talking
// Gloo on loopback, one thread each.
//
//   scripts/bench.sh fsdp_step [--ranks 2] [--steps 5] [--warmup 1]
//                              [--batch 4] [--seq 128] [--layers 6] [--embd 512] [--vocab 10240]
#include "shard/fully_shard.h"
#include "shard/launch.h"
#include "shard/rendezvous.h"
#include "model_flags.h"

#include <torch/torch.h>

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Args = gsbench::ModelArgs;
using gsbench::model_config;

Args parse(int argc, char** argv) {
  Args d;
  return gsbench::parse_model_flags(argc, argv, d, "bench_fsdp_step");
}

std::string blas_name() {
  using GetConfig = char* (*)();
  if (auto f = reinterpret_cast<GetConfig>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    std::string c = f();
    return "OpenBLAS(" + c.substr(0, c.find(' ', 9)) + ")";
  }
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libblas") != std::string::npos) return line.substr(line.find('/'));
  return "unknown";
}

struct Config {
  const char* name;
  const char* strategy;
  bool prefetch;
};
const Config kConfigs[] = {
    {"NO_SHARD", "NO_SHARD", true},
    {"FULL_SHARD", "FULL_SHARD", true},
    {"FULL_SHARD/no-prefetch", "FULL_SHARD", false},
    {"SHARD_GRAD_OP", "SHARD_GRAD_OP", true},
    {"HYBRID_SHARD", "HYBRID_SHARD", true},
};

// ---- one rank ----
int run_rank(const Args& a, const std::string& config_name) {
  const Config* cfgp = nullptr;
  for (const auto& c : kConfigs)
    if (config_name == c.name) cfgp = &c;
  if (!cfgp) return 3;
  at::set_num_threads(1);
  auto info = shard::rendezvous_info_from_env();
  auto rdzv = shard::Rendezvous::connect(info);
  const greenshard::GPTConfig gc = model_config(a);
  torch::manual_seed(0);
  greenshard::GPT model(gc);
  shard::FullyShardOptions o;
  o.strategy = shard::parse_sharding_strategy(cfgp->strategy);
  o.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
  o.backward_prefetch = cfgp->prefetch ? shard::BackwardPrefetch::kBackwardPre : shard::BackwardPrefetch::kNone;
  o.forward_prefetch = cfgp->prefetch;
  if (o.strategy == shard::ShardingStrategy::kHybridShard) o.hybrid_shard_group_size = std::max(1, info.world_size / 2);
  shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);
  torch::optim::AdamW opt(fsdp.parameters(), torch::optim::AdamWOptions(1e-4));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(info.rank);
  std::vector<double> times;
  for (int step = 0; step < a.warmup + a.steps; ++step) {
    auto x = at::randint(0, a.vocab, {a.batch, a.seq}, gen, at::kLong);
    auto y = at::randint(0, a.vocab, {a.batch, a.seq}, gen, at::kLong);
    rdzv->world()->barrier()->wait();
    if (step == a.warmup) fsdp.reset_peak_memory();
    auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    auto loss = model->loss(model->forward(x), y);
    loss.backward();
    opt.step();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double slowest = gsbench::slowest_rank_ms(*rdzv, ms);
    if (step >= a.warmup) times.push_back(slowest);
  }
  std::sort(times.begin(), times.end());
  auto mem = fsdp.memory();
  int64_t opt_bytes = 0;
  for (auto& kv : opt.state()) {
    auto& s = static_cast<torch::optim::AdamWParamState&>(*kv.second);
    opt_bytes += s.exp_avg().numel() * 4 + s.exp_avg_sq().numel() * 4;
  }
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  if (info.rank == 0)
    std::printf("ROW %s %.3f %lld %lld %lld %lld %ld %lld\n", config_name.c_str(), times[times.size() / 2],
                static_cast<long long>(mem.sharded_param_bytes), static_cast<long long>(mem.sharded_grad_bytes),
                static_cast<long long>(opt_bytes), static_cast<long long>(mem.unsharded_peak_bytes),
                ru.ru_maxrss, static_cast<long long>(mem.total_param_numel));
  std::fflush(stdout);
  rdzv->depart();
  return 0;
}

struct Row {
  double ms = 0;
  long long param = 0, grad = 0, opt = 0, peak = 0, rss_kb = 0, numel = 0;
  long long state() const { return param + grad + opt; }
};

// ---- the parent: one gang per config ----
bool run_config(const Args& a, const Config& c, char** argv, Row* row) {
  shard::LocalLaunchOptions lo;
  lo.nproc = a.ranks;
  lo.env = {{"OMP_NUM_THREADS", "1"}, {"OPENBLAS_NUM_THREADS", "1"}, {"GS_BENCH_CONFIG", c.name}};
  lo.capture_rank0_stdout = true;
  lo.timeout = std::chrono::seconds(1800);
  std::vector<std::string> args{"/proc/self/exe"};
  for (int i = 1; argv[i]; ++i) args.push_back(argv[i]);
  auto res = shard::launch_local(args, lo);
  const bool ok = res.ok;
  const std::string& out = res.rank0_stdout;
  auto pos = out.find("ROW ");
  if (!ok || pos == std::string::npos) {
    std::fprintf(stderr, "config %s failed:\n%s\n", c.name, out.c_str());
    return false;
  }
  std::istringstream in(out.substr(pos + 4));
  std::string name;
  in >> name >> row->ms >> row->param >> row->grad >> row->opt >> row->peak >> row->rss_kb >> row->numel;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (auto rc = gsbench::run_as_rank_if("GS_BENCH_CONFIG", [&](const std::string& cfg) { return run_rank(a, cfg); }))
    return *rc;
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  torch::mm(torch::ones({8, 8}), torch::ones({8, 8}));  // load BLAS
  const std::string blas = blas_name();
  const greenshard::GPTConfig gc = model_config(a);
  std::printf("# fsdp_step: GPT %.1fM params (%d layers, %d wide, vocab %d), batch %d x seq %d per rank\n",
              greenshard::num_parameters(gc) / 1e6, a.layers, a.embd, a.vocab, a.batch, a.seq);
  std::printf("# ranks %d (processes, Gloo on loopback, 1 thread each), BLAS %s, median of %d steps after %d warm-up\n",
              a.ranks, blas.c_str(), a.steps, a.warmup);
  std::printf("#\n# %-24s %10s %10s %9s %12s %9s %14s %10s\n", "config", "step(ms)", "tok/s", "time/NS",
              "state(MB)", "bytes/NS", "peak-unsh(MB)", "rss(MB)");
  std::map<std::string, Row> rows;
  for (const auto& c : kConfigs) {
    Row r;
    if (!run_config(a, c, argv, &r)) return 1;
    rows[c.name] = r;
    const Row& ns = rows["NO_SHARD"];
    double tok_s = 1000.0 * a.batch * a.seq * a.ranks / r.ms;
    std::printf("  %-24s %10.1f %10.0f %9.3f %12.1f %9.3f %14.1f %10.1f\n", c.name, r.ms, tok_s, r.ms / ns.ms,
                r.state() / 1e6, double(r.state()) / ns.state(), r.peak / 1e6, r.rss_kb / 1e3);
    std::fflush(stdout);
  }
  const Row& ns = rows["NO_SHARD"];
  const Row& fs = rows["FULL_SHARD"];
  const Row& fs_off = rows["FULL_SHARD/no-prefetch"];
  double bytes_ratio = double(fs.state()) / ns.state();
  std::printf("#\n# goals: FULL_SHARD time <= 1.05x NO_SHARD; state bytes <= (1/N + 0.10) = %.3fx NO_SHARD\n",
              1.0 / a.ranks + 0.10);
  std::string blas_word = blas;
  for (auto& ch : blas_word)
    if (ch == ' ') ch = '_';
  std::printf("RESULT fsdp_step ranks=%d time_full_vs_noshard=%.3f bytes_full_vs_noshard=%.3f time_prefetch_on_vs_off=%.3f blas=%s\n",
              a.ranks, fs.ms / ns.ms, bytes_ratio, fs.ms / fs_off.ms, blas_word.c_str());
  return 0;
}
