// GPU benchmarks of shard/ on one CUDA device (run by bench/gpu/run.sh):
//  1. measured bf16 matmul peak (8192^3, mean of 10 after 3 warm-ups);
//  2. NCCL all-gather / reduce-scatter through shard::Communicator, world
//     size 1 (an nccl-tests style table: the stream machinery and NCCL's
//     local copy; bus bandwidth is 0 by definition at one rank);
//  3. GPT training, ~1.3B parameters (24 layers, 2048 wide, 16 heads, vocab
//     50304), sequence 2048, bf16 compute with fp32 master shards,
//     FULL_SHARD (each block a unit), AdamW, synthetic tokens: tokens/s and
//     MFU against the measured peak, for worker/model.h's GPT as the worker
//     trains it (built deferred, unit by unit) with each attention kernel:
//       sdpa     - at::scaled_dot_product_attention (flash / memory-efficient
//                  kernels with LibTorch >= 2.0; the worker's default there);
//       explicit - matmuls, causal mask, fp32 softmax (O(T^2) memory).
//
//   gpu_mfu [--models sdpa,explicit] [--steps N] [--warmup N] [--batch-sdpa B]
//           [--batch-explicit B] [--layers L] [--heads H] [--embd E] [--seq T]
//           [--vocab V] [--skip-collectives]
//
// The model flags change the GPT of section 3 (defaults: the ~1.3B above);
// bench/gpu/worker_run.sh measures the worker's ~125M GPT with them, so the
// worker's MFU is compared with this one on the same model.
//
// Every section catches its own failure (printed as "FAILED <section>: why")
// so partial results still print. The last line is
//   RESULT gpu mfu=<x> tokens_per_s=<x> peak_bf16_tflops=<x> explicit_mfu=<x> explicit_tokens_per_s=<x>
// (mfu and tokens_per_s with sdpa attention; nan where a section failed).
#include "gpu_timing.h"
#include "shard/communicator.h"
#include "shard/fully_shard.h"
#include "shard/launch.h"  // free_loopback_port
#include "shard/rendezvous.h"

#include "worker/model.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/adamw.h>
#include <torch/version.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

at::TensorOptions cuda(at::ScalarType t) { return at::TensorOptions().dtype(t).device(at::kCUDA, 0); }

using gsbench::gpu_ms;

// ------------------------------------------------------------- peak

double measure_peak_bf16_tflops() {
  const int64_t n = 8192;
  at::Tensor a = at::randn({n, n}, cuda(at::kBFloat16)), b = at::randn({n, n}, cuda(at::kBFloat16));
  at::Tensor c = at::empty({n, n}, cuda(at::kBFloat16));
  for (int i = 0; i < 3; ++i) at::matmul_out(c, a, b);
  const int iters = 10;
  const double ms = gpu_ms([&] {
    for (int i = 0; i < iters; ++i) at::matmul_out(c, a, b);
  });
  return 2.0 * n * n * n * iters / (ms * 1e-3) / 1e12;
}

// ------------------------------------------------------------- collectives

void collectives_table(shard::Rendezvous& rdzv) {
  auto comm = rdzv.new_group("bench/nccl", {0}, shard::Backend::kNccl);
  std::printf("\n# shard::Communicator backend %s, world size %d (nccl-tests style; busbw = algbw * (n-1)/n)\n",
              comm->backend_name().c_str(), comm->size());
  std::printf("#%11s %12s %9s %16s %10s %12s %12s\n", "size(B)", "count", "type", "op", "time(us)",
              "algbw(GB/s)", "busbw(GB/s)");
  const int n = comm->size();
  for (int64_t bytes = int64_t{1} << 20; bytes <= int64_t{1} << 30; bytes <<= 2) {
    for (auto dt : {at::kBFloat16, at::kFloat}) {
      const int64_t count = bytes / static_cast<int64_t>(c10::elementSize(dt));
      at::Tensor in = at::ones({count / n}, cuda(dt)), out = at::empty({count}, cuda(dt));
      at::Tensor rs_out = at::empty({count / n}, cuda(dt));
      struct Op {
        const char* name;
        std::function<void()> run;
      };
      const Op ops[] = {
          {"all_gather_into", [&] { comm->all_gather_into(out, in)->wait(); }},
          {"reduce_scatter", [&] { comm->reduce_scatter(rs_out, out, shard::ReduceOp::kAvg)->wait(); }},
      };
      for (const auto& op : ops) {
        for (int i = 0; i < 5; ++i) op.run();
        const int iters = bytes >= (int64_t{256} << 20) ? 10 : 40;
        const double ms = gpu_ms([&] {
          for (int i = 0; i < iters; ++i) op.run();
        });
        const double us = ms * 1e3 / iters;
        const double algbw = bytes / (us * 1e-6) / 1e9;
        std::printf(" %11lld %12lld %9s %16s %10.1f %12.2f %12.2f\n", static_cast<long long>(bytes),
                    static_cast<long long>(count), c10::toString(dt), op.name, us, algbw,
                    algbw * (n - 1) / n);
      }
    }
  }
  std::fflush(stdout);
}

// ------------------------------------------------------------- training

struct TrainResult {
  std::string model;
  int64_t params = 0;
  int64_t batch = 0, seq = 0;
  double step_ms = kNaN, tokens_per_s = kNaN, tflops = kNaN, mfu = kNaN, mem_gib = kNaN;
  double first_loss = kNaN, last_loss = kNaN;
  std::string error;
};

bool is_oom(const std::string& m) {
  return m.find("out of memory") != std::string::npos || m.find("CUDA out of memory") != std::string::npos;
}

TrainResult train(const std::string& kind, const greenshard::GPTConfig& cfg, int64_t batch, int warmup,
                  int steps, double peak_tflops, const std::shared_ptr<shard::Rendezvous>& rdzv) {
  TrainResult r;
  r.model = kind;
  r.batch = batch;
  r.seq = cfg.block_size;
  r.params = greenshard::num_parameters(cfg);
  shard::FullyShardOptions so;
  so.strategy = shard::ShardingStrategy::kFullShard;
  so.mixed_precision.param_dtype = at::kBFloat16;
  so.mixed_precision.reduce_dtype = at::kFloat;
  so.compute_device = c10::Device(c10::kCUDA, 0);
  so.timeout = std::chrono::minutes(5);
  const auto t_build = Clock::now();
  greenshard::GPTConfig c = cfg;
  c.attention = greenshard::parse_attention(kind);
  greenshard::GPT m(c, /*deferred=*/true);  // unit by unit, as the worker builds it
  so.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
  so.param_init = m->param_init();
  std::shared_ptr<torch::nn::Module> root = m.ptr();
  auto forward = [m](const at::Tensor& x) mutable { return m->forward(x); };
  shard::FullyShardedModel fsdp(root, rdzv, so);
  torch::optim::AdamW opt(fsdp.parameters(), torch::optim::AdamWOptions(1e-4).weight_decay(0.1));
  std::printf("    %s: built and sharded %.2fB parameters in %.1f s\n", kind.c_str(), r.params / 1e9,
              std::chrono::duration<double>(Clock::now() - t_build).count());
  std::fflush(stdout);
  at::Tensor x = at::randint(0, cfg.vocab_size, {batch, cfg.block_size}, cuda(at::kLong));
  at::Tensor y = at::roll(x, -1, 1);
  at::Tensor last;
  auto step = [&] {
    opt.zero_grad();
    last = greenshard::loss(forward(x), y);
    last.backward();
    opt.step();
  };
  for (int i = 0; i < warmup; ++i) step();
  r.first_loss = last.item<double>();
  cudaDeviceSynchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) step();
  r.last_loss = last.item<double>();
  cudaDeviceSynchronize();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  r.mem_gib = (total_b - free_b) / 1073741824.0;
  r.step_ms = s * 1e3 / steps;
  r.tokens_per_s = static_cast<double>(batch * cfg.block_size * steps) / s;
  r.tflops = r.tokens_per_s * greenshard::flops_per_token(cfg, cfg.block_size) / 1e12;
  r.mfu = peak_tflops > 0 ? r.tflops / peak_tflops : kNaN;
  return r;
}

// Retries with half the batch on out-of-memory.
TrainResult train_fitting(const std::string& kind, const greenshard::GPTConfig& cfg, int64_t batch,
                          int warmup, int steps, double peak,
                          const std::shared_ptr<shard::Rendezvous>& rdzv) {
  for (;;) {
    try {
      return train(kind, cfg, batch, warmup, steps, peak, rdzv);
    } catch (const std::exception& e) {
      const std::string m = e.what();
      c10::cuda::CUDACachingAllocator::emptyCache();
      if (is_oom(m) && batch > 1) {
        std::printf("    %s: out of memory at batch %lld, retrying with %lld\n", kind.c_str(),
                    static_cast<long long>(batch), static_cast<long long>(batch / 2));
        batch /= 2;
        continue;
      }
      TrainResult r;
      r.model = kind;
      r.batch = batch;
      r.seq = cfg.block_size;
      r.params = greenshard::num_parameters(cfg);
      r.error = m.substr(0, 600);
      return r;
    }
  }
}

std::string fmt(double v, const char* f = "%.3f") {
  if (std::isnan(v)) return "nan";
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  std::string models = "sdpa,explicit";
  int steps = 5, warmup = 2, layers = 24, heads = 16, embd = 2048, seq = 2048, vocab = 50304;
  int64_t batch_sdpa = 8, batch_explicit = 4;
  bool collectives = true;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    const std::string a = argv[i];
    if (a == "--models") models = next();
    else if (a == "--steps") steps = std::stoi(next());
    else if (a == "--warmup") warmup = std::stoi(next());
    else if (a == "--batch-sdpa") batch_sdpa = std::stoll(next());
    else if (a == "--batch-explicit") batch_explicit = std::stoll(next());
    else if (a == "--layers") layers = std::stoi(next());
    else if (a == "--heads") heads = std::stoi(next());
    else if (a == "--embd") embd = std::stoi(next());
    else if (a == "--seq") seq = std::stoi(next());
    else if (a == "--vocab") vocab = std::stoi(next());
    else if (a == "--skip-collectives") collectives = false;
  }
  double peak = kNaN;
  std::vector<TrainResult> results;
  try {
    if (c10::cuda::device_count() < 1) throw std::runtime_error("no CUDA device");
    c10::cuda::set_device(0);
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    std::printf("# device: %s, %d SMs, %.1f GiB; LibTorch %d.%d; SDPA attention: %s\n", prop.name,
                prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, TORCH_VERSION_MAJOR,
                TORCH_VERSION_MINOR, greenshard::default_attention() == greenshard::Attention::kSdpa ? "yes" : "no (LibTorch < 2.0: explicit matmuls)");
  } catch (const std::exception& e) {
    std::printf("FAILED setup: %s\n", e.what());
  }
  try {
    peak = measure_peak_bf16_tflops();
    std::printf("# measured bf16 matmul peak (8192^3): %.1f TFLOP/s\n", peak);
  } catch (const std::exception& e) {
    std::printf("FAILED peak: %s\n", e.what());
  }
  std::fflush(stdout);
  std::shared_ptr<shard::Rendezvous> rdzv;
  try {
    shard::RendezvousInfo info;
    info.master_addr = "127.0.0.1";
    info.master_port = shard::free_loopback_port();
    rdzv = shard::Rendezvous::connect(info);
    if (collectives) collectives_table(*rdzv);
  } catch (const std::exception& e) {
    std::printf("FAILED collectives: %s\n", e.what());
  }
  greenshard::GPTConfig cfg;
  cfg.vocab_size = vocab;
  cfg.block_size = seq;
  cfg.n_layer = layers;
  cfg.n_head = heads;
  cfg.n_embd = embd;
  if (rdzv) {
    for (const std::string kind : {"sdpa", "explicit"}) {
      if (models.find(kind) == std::string::npos) continue;
      std::printf("\n# training %s ...\n", kind.c_str());
      std::fflush(stdout);
      results.push_back(train_fitting(kind, cfg, kind == "sdpa" ? batch_sdpa : batch_explicit,
                                      kind == "sdpa" ? warmup : 1, kind == "sdpa" ? steps : std::max(2, steps - 2),
                                      peak, rdzv));
      if (!results.back().error.empty()) std::printf("FAILED train %s: %s\n", kind.c_str(), results.back().error.c_str());
      std::fflush(stdout);
    }
  }
  std::printf("\n# GPT training, FULL_SHARD, bf16 params / fp32 reduce + master, AdamW, seq %lld, world size 1\n",
              static_cast<long long>(cfg.block_size));
  std::printf("#%8s %9s %6s %10s %12s %9s %8s %9s %12s\n", "model", "params", "batch", "step(ms)", "tokens/s",
              "TFLOP/s", "MFU", "mem(GiB)", "loss");
  double mfu = kNaN, tps = kNaN, explicit_mfu = kNaN, explicit_tps = kNaN;
  for (const auto& r : results) {
    std::printf(" %8s %8.2fB %6lld %10s %12s %9s %8s %9s %5s->%s%s\n", r.model.c_str(), r.params / 1e9,
                static_cast<long long>(r.batch), fmt(r.step_ms, "%.1f").c_str(),
                fmt(r.tokens_per_s, "%.0f").c_str(), fmt(r.tflops, "%.1f").c_str(), fmt(r.mfu).c_str(),
                fmt(r.mem_gib, "%.1f").c_str(), fmt(r.first_loss, "%.2f").c_str(), fmt(r.last_loss, "%.2f").c_str(),
                r.error.empty() ? "" : "  (failed)");
    if (r.model == "sdpa") mfu = r.mfu, tps = r.tokens_per_s;
    if (r.model == "explicit") explicit_mfu = r.mfu, explicit_tps = r.tokens_per_s;
  }
  std::printf("RESULT gpu mfu=%s tokens_per_s=%s peak_bf16_tflops=%s explicit_mfu=%s explicit_tokens_per_s=%s\n",
              fmt(mfu).c_str(), fmt(tps, "%.0f").c_str(), fmt(peak, "%.1f").c_str(), fmt(explicit_mfu).c_str(),
              fmt(explicit_tps, "%.0f").c_str());
  std::fflush(stdout);
  std::_Exit(0);
}
