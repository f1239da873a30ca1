// GPU tests of shard/ on one CUDA device (world size 1, NCCL). Run by
// bench/gpu/run.sh; plain asserts, no GoogleTest (the GPU image has none).
//
//   gpu_tests [--only NAME]
//
// Prints one line per test ("[ PASS ] name (ms)", "[ FAIL ] name: why",
// "[ SKIP ] name: why") and "RESULT gpu_tests passed=P failed=F skipped=S";
// exits with the number of failures. Two tests run only with --only NAME,
// each in a process of its own (run.sh does): checkpoint_device (masters
// on the device; checkpoint.cpp copies them to the host before writing, but
// this path has never run on a GPU, so a crash there must not take the other
// tests with it) and timeout_abort (a deliberate NCCL timeout +
// ncclCommAbort, which may leave the device unusable).
#include "gpu_timing.h"
#include "shard/checkpoint.h"
#include "shard/communicator.h"
#include "shard/fully_shard.h"
#include "shard/launch.h"  // free_loopback_port
#include "shard/rendezvous.h"

#include "flat_param.h"       // shard/src: free_storage / alloc_storage
#include "worker/device.h"
#include "worker/device_facts.h"
#include "worker/energy.h"
#include "worker/model.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/optim/adamw.h>
#include <torch/version.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

#define REQUIRE(cond, msg)                                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::ostringstream os_;                                                             \
      os_ << __FILE__ << ":" << __LINE__ << ": " << #cond << ": " << msg;                 \
      throw std::runtime_error(os_.str());                                                \
    }                                                                                     \
  } while (0)

std::shared_ptr<shard::Rendezvous> g_rdzv;

shard::Rendezvous& rdzv() {
  if (!g_rdzv) {
    shard::RendezvousInfo info;
    info.master_addr = "127.0.0.1";
    info.master_port = shard::free_loopback_port();
    shard::CommunicatorOptions o;
    o.timeout = std::chrono::seconds(60);
    g_rdzv = shard::Rendezvous::connect(info, o);
  }
  return *g_rdzv;
}

at::TensorOptions cuda(at::ScalarType t) { return at::TensorOptions().dtype(t).device(at::kCUDA, 0); }

template <typename F>
std::string expect_comm_error(F&& f) {
  try {
    f();
  } catch (const shard::CommError& e) {
    return e.what();
  }
  throw std::runtime_error("expected a CommError, got none");
}

// ---------------------------------------------------------------------------

void test_nccl_collectives() {
  auto comm = rdzv().new_group("t/nccl", {0}, shard::Backend::kNccl);
  REQUIRE(comm->backend_name() == "nccl", comm->backend_name());
  REQUIRE(comm->size() == 1 && comm->rank() == 0, "size " << comm->size());
  shard::CollectiveOptions o;
  o.tag = "gpu test";
  // all-gather, fp32 and bf16 (bytes moved as they are)
  for (auto dt : {at::kFloat, at::kBFloat16}) {
    at::Tensor in = at::arange(1 << 20, cuda(at::kFloat)).to(dt);
    at::Tensor out = at::full({1 << 20}, -1, cuda(dt));
    comm->all_gather_into(out, in, o)->wait();
    REQUIRE(at::equal(out, in), "all_gather_into " << c10::toString(dt));
  }
  // reduce-scatter avg: fp32 (ncclAvg), bf16 (fp32 accumulation), fp16
  for (auto dt : {at::kFloat, at::kBFloat16, at::kHalf}) {
    at::Tensor in = at::randn({3 << 18}, cuda(at::kFloat)).to(dt);
    at::Tensor out = at::zeros({3 << 18}, cuda(dt));
    comm->reduce_scatter(out, in, shard::ReduceOp::kAvg, o)->wait();
    REQUIRE(at::equal(out, in), "reduce_scatter " << c10::toString(dt));
  }
  // all-reduce sum (int, in place) and avg (bf16)
  {
    at::Tensor t = at::arange(1000, cuda(at::kInt));
    at::Tensor ref = t.clone();
    comm->all_reduce(t, shard::ReduceOp::kSum, o)->wait();
    REQUIRE(at::equal(t, ref), "all_reduce int");
    at::Tensor b = at::randn({4097}, cuda(at::kBFloat16));
    at::Tensor bref = b.clone();
    comm->all_reduce(b, shard::ReduceOp::kAvg, o)->wait();
    REQUIRE(at::equal(b, bref), "all_reduce bf16");
  }
  // broadcast, barrier
  {
    at::Tensor t = at::randn({12345}, cuda(at::kFloat));
    at::Tensor ref = t.clone();
    comm->broadcast(t, 0, o)->wait();
    REQUIRE(at::equal(t, ref), "broadcast");
    comm->barrier(o)->wait();
  }
  // host tensors: staged through the device, blocking
  {
    at::Tensor t = at::full({3}, 2.5, at::kDouble);
    auto w = comm->all_reduce(t, shard::ReduceOp::kSum, o);
    w->wait();
    REQUIRE(w->is_completed(), "staged work not complete after wait");
    REQUIRE(t.allclose(at::full({3}, 2.5, at::kDouble)), "staged all_reduce " << t);
    at::Tensor all = at::empty({1}, at::kDouble);
    comm->all_gather_into(all, at::full({1}, 7.0, at::kDouble), o)->wait();
    REQUIRE(all.item<double>() == 7.0, "staged all_gather");
  }
  // refusals name the backend
  {
    at::Tensor nc = at::zeros({8, 8}, cuda(at::kFloat)).t();
    auto m = expect_comm_error([&] { comm->all_gather_into(at::zeros({64}, cuda(at::kFloat)), nc, o); });
    REQUIRE(m.find("backend nccl does not support non-contiguous") != std::string::npos, m);
    auto m2 = expect_comm_error([&] {
      comm->reduce_scatter(at::zeros({4}, cuda(at::kBool)), at::zeros({4}, cuda(at::kBool)),
                           shard::ReduceOp::kSum, o);
    });
    REQUIRE(m2.find("backend nccl does not support reduce_scatter of dtype") != std::string::npos, m2);
    auto m3 = expect_comm_error([&] {
      comm->all_gather_into(at::zeros({4}, cuda(at::kFloat)), at::zeros({4}, at::kFloat), o);
    });
    REQUIRE(m3.find("mixing cpu and cuda") != std::string::npos, m3);
  }
  REQUIRE(comm->bytes_sent() == 0, "world size 1 sends nothing, got " << comm->bytes_sent());
}

// The collective's stream waits for the caller's stream at issue time and
// the caller's stream waits for the collective at wait(); a collective
// issued before a long computation overlaps it; issuing and waiting do not
// block the host.
void test_stream_overlap() {
  auto comm = rdzv().new_group("t/overlap", {0}, shard::Backend::kNccl);
  shard::CollectiveOptions o;
  o.tag = "overlap test";
  auto compute = c10::cuda::getCurrentCUDAStream(0);
  at::Tensor a = at::randn({8192, 8192}, cuda(at::kBFloat16));
  const int64_t n = int64_t{1} << 30;  // 2 GiB of bf16
  at::Tensor in = at::empty({n}, cuda(at::kBFloat16));
  at::Tensor out = at::empty({n}, cuda(at::kBFloat16));
  auto timed = gsbench::gpu_ms;  // on `compute`, device 0's current stream
  auto mm = [&](int k) {
    for (int i = 0; i < k; ++i) at::matmul(a, a);
  };
  // Ordering: the input is written by the compute stream behind long work;
  // the gather must see the final values.
  for (int rep = 0; rep < 2; ++rep) {
    mm(20);
    in.fill_(static_cast<double>(rep + 3));
    comm->all_gather_into(out, in, o)->wait();
    REQUIRE(out.min().item<float>() == rep + 3 && out.max().item<float>() == rep + 3,
          "all-gather did not wait for the compute stream (rep " << rep << ")");
  }
  const double t_ag = timed([&] { comm->all_gather_into(out, in, o)->wait(); });
  int k = 1;
  double t_mm = timed([&] { mm(k); });
  k = std::max(1, static_cast<int>(std::lround(t_ag / t_mm)));
  t_mm = timed([&] { mm(k); });
  double host_ms = 0;
  const double t_both = timed([&] {
    const auto h0 = Clock::now();
    auto w = comm->all_gather_into(out, in, o);  // issued first: overlaps what follows
    mm(k);
    w->wait();
    host_ms = std::chrono::duration<double, std::milli>(Clock::now() - h0).count();
  });
  const double overlap = (t_ag + t_mm - t_both) / std::min(t_ag, t_mm);
  std::printf("    all-gather 2 GiB %.2f ms, %d matmuls %.2f ms, together %.2f ms: overlap %.0f %% of the "
              "shorter; host time issuing+waiting %.2f ms\n",
              t_ag, k, t_mm, t_both, 100 * overlap, host_ms);
  // The overlap and the host time are reported, not asserted: a timing
  // threshold fails on a busy or differently clocked device (at world size 1
  // NCCL's "all-gather" is a device copy that competes with the matmuls for
  // SMs: 2.5 % overlap on one run, 20 % on another).
}

// free_storage / alloc_storage on a CUDA tensor keep views valid.
void test_cuda_storage() {
  at::Tensor flat = at::zeros({1 << 24}, cuda(at::kBFloat16));
  at::Tensor view = flat.narrow(0, 1000, 5000).view({50, 100});
  shard::free_storage(flat);
  REQUIRE(!shard::storage_allocated(flat), "still allocated");
  // No new view can be made of a freed storage (LibTorch 2 checks the bounds
  // against its size 0); the views made before keep their shape.
  REQUIRE(view.sizes() == at::IntArrayRef({50, 100}), "view shape changed");
  shard::alloc_storage(flat);
  REQUIRE(shard::storage_allocated(flat), "not allocated");
  flat.fill_(1);
  // Summed in fp32: 5000 is not a bf16 number (its neighbours are 4992, 5008).
  REQUIRE(view.sum(at::kFloat).item<float>() == 5000.0f, "view does not see the new block");
  shard::free_storage(flat);
  shard::free_storage(flat);  // twice is fine
}

struct Gpt {
  greenshard::GPTConfig cfg;
  greenshard::GPT model{nullptr};
  std::unique_ptr<shard::FullyShardedModel> fsdp;
  std::unique_ptr<torch::optim::AdamW> opt;
};

greenshard::GPTConfig small_cfg() {
  greenshard::GPTConfig c;
  c.vocab_size = 512;
  c.block_size = 128;
  c.n_layer = 4;
  c.n_head = 4;
  c.n_embd = 256;
  return c;
}

std::unique_ptr<Gpt> make_gpt(at::ScalarType param_dtype, bool offload, bool fsdp = true,
                              greenshard::Attention attention = greenshard::Attention::kExplicit) {
  auto g = std::make_unique<Gpt>();
  g->cfg = small_cfg();
  g->cfg.attention = attention;
  torch::manual_seed(1234);
  g->model = greenshard::GPT(g->cfg);
  if (fsdp) {
    shard::FullyShardOptions so;
    so.strategy = shard::ShardingStrategy::kFullShard;
    so.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
    so.mixed_precision.param_dtype = param_dtype;
    so.compute_device = c10::Device(c10::kCUDA, 0);
    so.offload.offload_params = offload;
    g->fsdp = std::make_unique<shard::FullyShardedModel>(g->model.ptr(), g_rdzv, so);
    g->opt = std::make_unique<torch::optim::AdamW>(g->fsdp->parameters(),
                                                   torch::optim::AdamWOptions(1e-3));
  } else {
    g->model->to(at::Device(at::kCUDA, 0));
    g->opt = std::make_unique<torch::optim::AdamW>(g->model->parameters(),
                                                   torch::optim::AdamWOptions(1e-3));
  }
  return g;
}

std::pair<at::Tensor, at::Tensor> batch(const greenshard::GPTConfig& c, int step) {
  auto gen_opts = at::TensorOptions().dtype(at::kLong);
  torch::manual_seed(100 + step);
  at::Tensor x = at::randint(0, c.vocab_size, {4, c.block_size}, gen_opts);
  at::Tensor y = at::roll(x, -1, 1);
  return {x.to(at::Device(at::kCUDA, 0)), y.to(at::Device(at::kCUDA, 0))};
}

double train_step(Gpt& g, int step) {
  auto [x, y] = batch(g.cfg, step);
  g.opt->zero_grad();
  at::Tensor loss = g.model->loss(g.model->forward(x), y);
  loss.backward();
  g.opt->step();
  return loss.item<double>();
}

void test_bf16_parity() {
  auto ref = make_gpt(at::kFloat, false, /*fsdp=*/false);  // plain GPU model
  auto f32 = make_gpt(at::kFloat, false);
  auto b16 = make_gpt(at::kBFloat16, false);
  double worst32 = 0, worst16 = 0;
  for (int s = 0; s < 6; ++s) {
    const double lr = train_step(*ref, s), l32 = train_step(*f32, s), l16 = train_step(*b16, s);
    worst32 = std::max(worst32, std::abs(l32 - lr) / lr);
    worst16 = std::max(worst16, std::abs(l16 - lr) / lr);
    std::printf("    step %d loss: plain fp32 %.5f  FSDP fp32 %.5f  FSDP bf16 %.5f\n", s, lr, l32, l16);
  }
  REQUIRE(worst32 < 1e-4, "FSDP fp32 vs plain fp32: relative loss difference " << worst32);
  REQUIRE(worst16 < 2e-2, "FSDP bf16 vs plain fp32: relative loss difference " << worst16);
  // Deterministic memory: no growth from step to step (no recordStream).
  size_t free0 = 0, free1 = 0, total = 0;
  train_step(*b16, 10);
  cudaDeviceSynchronize();
  cudaMemGetInfo(&free0, &total);
  for (int s = 11; s < 14; ++s) train_step(*b16, s);
  cudaDeviceSynchronize();
  cudaMemGetInfo(&free1, &total);
  std::printf("    device memory in use after step 10: %.1f MiB, after step 13: %.1f MiB\n",
              (total - free0) / 1048576.0, (total - free1) / 1048576.0);
  REQUIRE(free1 + (size_t{8} << 20) >= free0, "device memory grew by " << (free0 - free1) / 1048576.0 << " MiB");
}

// The worker's attention kernels on the GPU: SDPA (flash with LibTorch >= 2)
// and explicit matmuls train the same bf16 FSDP model to the same losses
// (bf16 rounding differs); SDPA needs less memory for the (T, T) scores.
void test_sdpa_parity() {
  auto ex = make_gpt(at::kBFloat16, false, true, greenshard::Attention::kExplicit);
  auto sd = make_gpt(at::kBFloat16, false, true, greenshard::Attention::kSdpa);
  double worst = 0;
  for (int s = 0; s < 4; ++s) {
    const double le = train_step(*ex, s), ls = train_step(*sd, s);
    worst = std::max(worst, std::abs(ls - le) / le);
    std::printf("    step %d loss: explicit %.5f  sdpa %.5f\n", s, le, ls);
  }
  REQUIRE(worst < 2e-2, "sdpa vs explicit (bf16): relative loss difference " << worst);
  // Peak memory of one forward+backward at a longer sequence, each kernel.
  auto peak_of = [](greenshard::Attention a) {
    // vocab 512, seq 2048, 2 layers, 16 heads, width 1024, no dropout
    const greenshard::GPTConfig c{512, 2048, 2, 16, 1024, 0.0, a};
    torch::manual_seed(7);
    greenshard::GPT m(c);
    m->to(at::Device(at::kCUDA, 0), at::kBFloat16);
    at::Tensor x = at::randint(0, c.vocab_size, {4, c.block_size}, cuda(at::kLong));
    cudaDeviceSynchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();
    c10::cuda::CUDACachingAllocator::resetPeakStats(0);
    greenshard::loss(m->forward(x), at::roll(x, -1, 1)).backward();
    cudaDeviceSynchronize();
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
    return static_cast<double>(stats.allocated_bytes[0].peak) / 1048576.0;
  };
  const double mem_ex = peak_of(greenshard::Attention::kExplicit), mem_sd = peak_of(greenshard::Attention::kSdpa);
  std::printf("    peak memory, 2 blocks x 1024, seq 2048, batch 4, bf16: explicit %.0f MiB, sdpa %.0f MiB (LibTorch %d)\n",
              mem_ex, mem_sd, TORCH_VERSION_MAJOR);
  if (TORCH_VERSION_MAJOR >= 2) REQUIRE(mem_sd < mem_ex, "SDPA did not reduce memory: " << mem_sd << " vs " << mem_ex);
}

// The worker's device choice on this machine: LOCAL_RANK 0 computes on
// cuda:0 in bf16, with SDPA on LibTorch >= 2, against the GPU's peak; NVML
// names the GPU; a local rank without a GPU of its own is refused.
void test_worker_device() {
  const greenshard::DeviceFacts f = greenshard::device_facts(0);
  std::printf("    facts: cuda build %d, %d visible, NVML name '%s', LibTorch %d\n", f.cuda_build, f.cuda_devices,
              f.gpu_name.c_str(), f.torch_major);
  REQUIRE(f.cuda_build, "shard/ was not built with GREENSHARD_CUDA");
  REQUIRE(f.cuda_devices == c10::cuda::device_count(), "device count " << f.cuda_devices);
  REQUIRE(f.nvml_index >= 0, "NVML has no device for LOCAL_RANK 0");
  REQUIRE(!f.gpu_name.empty(), "NVML gave no name for LOCAL_RANK 0's GPU");
  greenshard::JobConfig cfg;
  const greenshard::DevicePlan p = greenshard::plan_device(cfg, 0, f);
  std::printf("    plan: %s, %s, %s attention, peak %.1f TFLOP/s, hardware %s\n", p.device.c_str(),
              p.param_dtype.c_str(), p.attention.c_str(), p.peak_flops / 1e12, p.hardware.c_str());
  for (const auto& n : p.notes) std::printf("    note: %s\n", n.c_str());
  REQUIRE(p.cuda && p.device == "cuda:0", p.device);
  REQUIRE(p.param_dtype == "bfloat16", p.param_dtype);
  REQUIRE(p.attention == std::string(TORCH_VERSION_MAJOR >= 2 ? "sdpa" : "explicit"), p.attention);
  const std::string name = f.gpu_name;
  if (name.find("H200") != std::string::npos || name.find("H100") != std::string::npos ||
      name.find("A100") != std::string::npos)
    REQUIRE(p.peak_flops > 0 && p.hardware != "cpu-2s", "peak " << p.peak_flops << " hardware " << p.hardware);
  bool refused = false;
  try {
    greenshard::plan_device(cfg, f.cuda_devices, f);
  } catch (const greenshard::ConfigError& e) {
    refused = std::string(e.what()).find("device: LOCAL_RANK") != std::string::npos;
  }
  REQUIRE(refused, "LOCAL_RANK " << f.cuda_devices << " was given a GPU it does not have");
}

void checkpoint_round_trip(bool offload) {
  const std::string root = (fs::temp_directory_path() / ("gs_gpu_ckpt_" + std::to_string(::getpid()) +
                                                         (offload ? "_off" : "_dev")))
                               .string();
  fs::remove_all(root);
  auto a = make_gpt(at::kBFloat16, offload);
  for (int s = 0; s < 3; ++s) train_step(*a, s);
  std::printf("    trained 3 steps\n");
  std::fflush(stdout);
  const std::string dir = shard::save_checkpoint(*a->fsdp, a->opt.get(), root, 3, "extra");
  std::printf("    saved %s\n", dir.c_str());
  std::fflush(stdout);
  auto b = make_gpt(at::kBFloat16, offload);
  auto loaded = shard::load_checkpoint(*b->fsdp, b->opt.get(), dir);
  std::printf("    loaded step %lld\n", static_cast<long long>(loaded.step));
  std::fflush(stdout);
  REQUIRE(loaded.step == 3 && loaded.extra == "extra", "step " << loaded.step);
  auto pa = a->fsdp->full_parameters();
  std::printf("    gathered the saved model\n");
  std::fflush(stdout);
  auto pb = b->fsdp->full_parameters();
  std::printf("    gathered the loaded model\n");
  std::fflush(stdout);
  for (auto& [name, t] : pa) REQUIRE(at::equal(t.cpu(), pb.at(name).cpu()), "parameter " << name << " differs");
  const double la = train_step(*a, 3);
  std::printf("    stepped the saved model\n");
  std::fflush(stdout);
  const double lb = train_step(*b, 3);
  REQUIRE(la == lb, "loss after loading " << lb << " vs " << la);
  fs::remove_all(root);
}

void test_checkpoint_offload() { checkpoint_round_trip(true); }
void test_checkpoint_device() { checkpoint_round_trip(false); }

void test_nvml() {
  greenshard::EnergyMeter meter(c10::cuda::current_device(), 300);
  REQUIRE(meter.has_gpu(), "NVML not available (libnvidia-ml.so.1 not loadable?)");
  auto r0 = meter.read();
  at::Tensor a = at::randn({8192, 8192}, cuda(at::kBFloat16));
  const auto end = Clock::now() + std::chrono::milliseconds(1500);
  while (Clock::now() < end) {
    for (int i = 0; i < 20; ++i) at::matmul(a, a);
    cudaDeviceSynchronize();
  }
  auto r1 = meter.read();
  REQUIRE(!r1.gpus.empty(), "no GPU reading");
  const auto& g = r1.gpus[0];
  std::printf("    NVML: utilization %.0f %%, memory used %.1f GiB, power %.0f W, energy %.1f J over the test\n",
              100 * g.utilization, g.memory_used_bytes / 1073741824.0, g.power_watts, g.energy_joules);
  REQUIRE(g.memory_used_bytes > 0, "memory used not readable");
  REQUIRE(g.power_watts > 0, "power not readable");
  REQUIRE(g.energy_joules > 0, "energy did not increase under load");
  (void)r0;
}

// A collective that cannot finish before its deadline (it waits behind
// long compute) is reported as a timeout naming op, tag, group and rank;
// the communicator is aborted and later calls fail at once.
void test_timeout_abort() {
  auto comm = rdzv().new_group("t/timeout", {0}, shard::Backend::kNccl);
  at::Tensor a = at::randn({8192, 8192}, cuda(at::kBFloat16));
  at::Tensor in = at::zeros({1024}, cuda(at::kFloat)), out = at::zeros({1024}, cuda(at::kFloat));
  for (int i = 0; i < 200; ++i) at::matmul(a, a);  // ~0.3 s of queued work
  shard::CollectiveOptions o;
  o.tag = "unit 'h.7' all-gather";
  o.timeout = std::chrono::milliseconds(20);
  auto w = comm->all_gather_into(out, in, o);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::string m = expect_comm_error([&] { w->wait(); });
  std::printf("    error: %s\n", m.c_str());
  REQUIRE(m.find("all_gather_into (tag: unit 'h.7' all-gather) on group 't/timeout' (global ranks [0]) at "
               "global rank 0 (group rank 0) failed: timed out after 20 ms") != std::string::npos,
        m);
  std::string m2 = expect_comm_error([&] { comm->all_gather_into(out, in, {})->wait(); });
  REQUIRE(m2.find("aborted by an earlier error") != std::string::npos, m2);
  cudaDeviceSynchronize();
  REQUIRE(cudaGetLastError() == cudaSuccess, "the device is in an error state after the abort");
}

}  // namespace

int main(int argc, char** argv) {
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
  }
  std::printf("gpu_tests: LibTorch %d.%d, %d CUDA device(s)\n", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,
              static_cast<int>(c10::cuda::device_count()));
  if (c10::cuda::device_count() < 1) {
    std::printf("[ FAIL ] no CUDA device\nRESULT gpu_tests passed=0 failed=1 skipped=0\n");
    return 1;
  }
  c10::cuda::set_device(0);
  const std::vector<std::pair<std::string, void (*)()>> tests = {
      {"nccl_collectives", test_nccl_collectives},
      {"stream_overlap", test_stream_overlap},
      {"cuda_storage", test_cuda_storage},
      {"bf16_parity", test_bf16_parity},
      {"sdpa_parity", test_sdpa_parity},
      {"worker_device", test_worker_device},
      {"checkpoint_offload", test_checkpoint_offload},
      {"checkpoint_device", test_checkpoint_device},
      {"nvml", test_nvml},
      {"timeout_abort", test_timeout_abort},
  };
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& [name, fn] : tests) {
    if (!only.empty() && name != only) continue;
    if (only.empty() && (name == "timeout_abort" || name == "checkpoint_device")) {
      std::printf("[ SKIP ] %s: runs in its own process (--only %s)\n", name.c_str(), name.c_str());
      ++skipped;
      continue;
    }
    std::printf("[ RUN  ] %s\n", name.c_str());
    std::fflush(stdout);
    const auto t0 = Clock::now();
    try {
      rdzv();
      fn();
      cudaDeviceSynchronize();
      std::printf("[ PASS ] %s (%.0f ms)\n", name.c_str(),
                  std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      ++passed;
    } catch (const std::exception& e) {
      std::printf("[ FAIL ] %s: %s\n", name.c_str(), e.what());
      ++failed;
    }
    std::fflush(stdout);
  }
  std::printf("RESULT gpu_tests passed=%d failed=%d skipped=%d\n", passed, failed, skipped);
  std::fflush(stdout);
  // The timeout test aborted a communicator on purpose: leave without
  // running destructors that might touch it.
  std::_Exit(failed);
}
