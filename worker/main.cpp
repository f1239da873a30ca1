// greenshard-worker (minimal trainer; issue "worker" grows it into the full
// job runner). Trains the GPT on the bytes of a text file with shard/.
//
//   greenshard-worker --nproc 2 --data FILE --steps 60
// starts 2 local ranks itself (like torchrun --standalone); under a launcher
// that sets RANK/WORLD_SIZE/MASTER_ADDR/... it is one rank.
#include "shard/fully_shard.h"
#include "shard/launch.h"
#include "shard/rendezvous.h"
#include "worker/model.h"

#include <torch/torch.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Flags {
  int nproc = 0;
  std::string data;
  int steps = 50;
  int batch = 8;  // sequences per rank per step
  int seq = 64;
  int layers = 4, heads = 4, embd = 128;
  double lr = 3e-3;
  std::string strategy = "FULL_SHARD";
  bool bf16 = false;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "greenshard-worker: " << msg << "\n"
            << "usage: greenshard-worker [--nproc N] --data FILE [--steps N] [--batch N] [--seq N]\n"
            << "       [--layers N] [--heads N] [--embd N] [--lr X] [--strategy FULL_SHARD|SHARD_GRAD_OP|NO_SHARD|HYBRID_SHARD]\n"
            << "       [--bf16]\n";
  std::exit(2);
}

int parse_int(const std::string& flag, const std::string& v, int lo) {
  try {
    size_t pos = 0;
    int x = std::stoi(v, &pos);
    if (pos != v.size() || x < lo) throw std::invalid_argument("");
    return x;
  } catch (...) {
    usage_error(flag + ": expected an integer >= " + std::to_string(lo) + ", got '" + v + "'");
  }
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + ": missing value");
      return argv[++i];
    };
    if (a == "--nproc") f.nproc = parse_int(a, val(), 1);
    else if (a == "--data") f.data = val();
    else if (a == "--steps") f.steps = parse_int(a, val(), 1);
    else if (a == "--batch") f.batch = parse_int(a, val(), 1);
    else if (a == "--seq") f.seq = parse_int(a, val(), 2);
    else if (a == "--layers") f.layers = parse_int(a, val(), 1);
    else if (a == "--heads") f.heads = parse_int(a, val(), 1);
    else if (a == "--embd") f.embd = parse_int(a, val(), 1);
    else if (a == "--lr") {
      std::string v = val();
      try { f.lr = std::stod(v); } catch (...) { usage_error("--lr: expected a number, got '" + v + "'"); }
      if (!(f.lr > 0)) usage_error("--lr: must be > 0");
    } else if (a == "--strategy") f.strategy = val();
    else if (a == "--bf16") f.bf16 = true;
    else if (a == "--help" || a == "-h") usage_error("help");
    else usage_error("unknown flag '" + a + "'");
  }
  if (f.data.empty()) usage_error("--data: required");
  try {
    shard::parse_sharding_strategy(f.strategy, "--strategy");
  } catch (const std::invalid_argument& e) {
    usage_error(e.what());
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags = parse(argc, argv);
  if (flags.nproc > 0 && !std::getenv("RANK")) {
    shard::LocalLaunchOptions lo;
    lo.nproc = flags.nproc;
    lo.env = {{"OMP_NUM_THREADS", "1"}, {"OPENBLAS_NUM_THREADS", "1"}};
    std::vector<std::string> args{"/proc/self/exe"};
    for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
    return shard::launch_local(args, lo).ok ? 0 : 1;
  }
  try {
    auto info = shard::rendezvous_info_from_env();
    at::set_num_threads(1);

    // Data: the bytes of a text file; each rank samples its own windows.
    std::ifstream in(flags.data, std::ios::binary);
    if (!in) throw std::invalid_argument("--data: cannot read '" + flags.data + "'");
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (static_cast<int>(bytes.size()) < flags.seq + 2)
      throw std::invalid_argument("--data: '" + flags.data + "' is shorter than --seq + 2 bytes");
    at::Tensor tokens = at::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, at::kByte).to(at::kLong);

    greenshard::GPTConfig cfg;
    cfg.vocab_size = 256;
    cfg.block_size = flags.seq;
    cfg.n_layer = flags.layers;
    cfg.n_head = flags.heads;
    cfg.n_embd = flags.embd;
    greenshard::validate(cfg);

    auto rdzv = shard::Rendezvous::connect(info);
    torch::manual_seed(42);
    greenshard::GPT model(cfg);
    shard::FullyShardOptions opts;
    opts.strategy = shard::parse_sharding_strategy(flags.strategy, "--strategy");
    opts.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
    if (flags.bf16) opts.mixed_precision.param_dtype = at::kBFloat16;
    shard::FullyShardedModel fsdp(model.ptr(), rdzv, opts);
    torch::optim::AdamW opt(fsdp.parameters(), torch::optim::AdamWOptions(flags.lr).weight_decay(0.1));

    const bool log = info.rank == 0;
    if (log)
      std::printf("greenshard-worker: %d ranks, %s, GPT %lld params (%d layers, %d wide), %s\n", info.world_size,
                  flags.strategy.c_str(), static_cast<long long>(greenshard::num_parameters(cfg)), flags.layers,
                  flags.embd, flags.bf16 ? "bf16" : "fp32");
    auto gen = at::make_generator<at::CPUGeneratorImpl>(7 + info.rank);
    const int64_t n = tokens.numel() - flags.seq - 1;
    for (int step = 1; step <= flags.steps; ++step) {
      auto t0 = std::chrono::steady_clock::now();
      // (B,) window starts -> x, y: (B, T)
      auto starts = at::randint(0, n, {flags.batch}, gen, at::kLong);
      auto offs = at::arange(flags.seq, at::kLong);
      auto x = tokens.index({starts.unsqueeze(1) + offs});
      auto y = tokens.index({starts.unsqueeze(1) + offs + 1});
      opt.zero_grad();
      auto loss = model->loss(model->forward(x), y);
      loss.backward();
      double norm = fsdp.clip_grad_norm(1.0);
      opt.step();
      at::Tensor l = loss.detach().to(at::kDouble).reshape({1});
      rdzv->world()->all_reduce(l, shard::ReduceOp::kAvg)->wait();
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      double tok_s = 1000.0 * flags.batch * flags.seq * info.world_size / ms;
      if (log)
        std::printf("step %4d/%d | loss %.4f | norm %.3f | %.0f ms | %.0f tok/s\n", step, flags.steps,
                    l.item<double>(), norm, ms, tok_s);
      std::fflush(stdout);
    }
    rdzv->world()->barrier()->wait();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "greenshard-worker: error: %s\n", e.what());
    return 1;
  }
}
