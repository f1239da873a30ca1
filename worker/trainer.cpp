// The training loop of one rank, top to bottom:
//   0. device (CUDA device LOCAL_RANK or the CPU, worker/device.h); rendezvous;
//      check the checkpoint directory is writable (all ranks agree)
//   1. data: token files, the sampler (batches are a function of the step)
//   2. model: GPT built unit by unit (deferred), sharded with shard/
//   3. optimizer: AdamW over the flat shards; warm-up + cosine schedule
//   4. resume from the newest DONE checkpoint (any world size)
//   5. metrics, energy, emissions, status push
//   6. the steps: forward/backward per micro-batch, clip, step, log line;
//      validation every eval_interval; checkpoint every interval; stop
//      cleanly (checkpoint, exit 0) when any rank got SIGTERM
//   7. final checkpoint, summary, export
#include "worker/trainer.h"

#include "carbon/accounting.h"
#include "carbon/hardware.h"
#include "shard/checkpoint.h"
#include "shard/object_store_url.h"
#include "shard/fully_shard.h"
#include "shard/host_memory.h"
#include "shard/rendezvous.h"
#include "worker/data.h"
#include "worker/device.h"
#include "worker/device_facts.h"
#include "worker/energy.h"
#include "worker/exporter.h"
#include "worker/model.h"
#include "worker/status.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

namespace greenshard {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

std::atomic<int> g_preempt_signal{0};

void on_signal(int sig) { g_preempt_signal.store(sig); }

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Warm-up then cosine decay to min_lr (nanoGPT's get_lr).
double learning_rate(const JobConfig::Optimizer& o, int64_t step, int64_t total) {
  if (step < o.warmup_steps) return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  if (total <= o.warmup_steps) return o.lr;
  const double progress = static_cast<double>(step - o.warmup_steps) / static_cast<double>(total - o.warmup_steps);
  return o.min_lr + 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, progress))) * (o.lr - o.min_lr);
}

std::string hms(double s) {
  if (!std::isfinite(s) || s < 0) return "-";
  const auto t = static_cast<long long>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  return buf;
}

// Sum (or mean) of a few doubles across all ranks.
std::vector<double> all_reduce(shard::Rendezvous& rdzv, std::vector<double> v, shard::ReduceOp op) {
  at::Tensor t = at::tensor(v, at::kDouble);
  rdzv.world()->all_reduce(t, op, {{}, "trainer scalars"})->wait();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

// What the checkpoint's "extra" carries besides the shards: the data
// position (the step), running totals, and the RNG state.
struct RunState {
  int64_t step = 0;
  double tokens = 0;           // all ranks
  double best_val = INFINITY, last_val = NAN;
  double energy_j = 0, operational_g = 0, embodied_g = 0;  // all ranks
  double wall_s = 0;
  std::string rng;             // default CPU generator state (bytes)

  std::string to_extra() const {
    json j{{"step", step},     {"tokens", tokens},         {"best_val", std::isfinite(best_val) ? best_val : -1.0},
           {"energy_j", energy_j}, {"operational_g", operational_g}, {"embodied_g", embodied_g},
           {"wall_s", wall_s}, {"rng", hex(rng)}};
    return j.dump();
  }
  static RunState from_extra(const std::string& s, const std::string& dir) {
    RunState r;
    try {
      json j = json::parse(s);
      r.step = j.at("step").get<int64_t>();
      r.tokens = j.at("tokens").get<double>();
      const double b = j.at("best_val").get<double>();
      r.best_val = b < 0 ? INFINITY : b;
      r.energy_j = j.at("energy_j").get<double>();
      r.operational_g = j.at("operational_g").get<double>();
      r.embodied_g = j.at("embodied_g").get<double>();
      r.wall_s = j.at("wall_s").get<double>();
      r.rng = unhex(j.at("rng").get<std::string>());
    } catch (const std::exception& e) {
      throw std::runtime_error("checkpoint " + dir + ": not written by greenshard-worker (" + e.what() + ")");
    }
    return r;
  }
};

std::string rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  at::Tensor s = gen.get_state();
  return std::string(static_cast<const char*>(s.data_ptr()), s.numel());
}

void set_rng_state(const std::string& bytes) {
  if (bytes.empty()) return;
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  at::Tensor s = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(s.data_ptr(), bytes.data(), bytes.size());
  gen.set_state(s);
}

// Every rank agrees on an error: one failing rank fails all with its message.
void agree(shard::Rendezvous& rdzv, const std::string& error) {
  auto bad = all_reduce(rdzv, {error.empty() ? 0.0 : 1.0}, shard::ReduceOp::kSum);
  if (!error.empty()) throw ConfigError(error);
  if (bad[0] > 0) throw ConfigError("another rank rejected the configuration (see its log)");
}

// The intensity in force: the configured constant, or polled from a URL
// every carbon.intensity_poll_s (with the status token as bearer).
class Intensity {
 public:
  Intensity(const JobConfig::Carbon& c, std::string token)
      : value_(c.gco2_per_kwh), url_(c.intensity_url), token_(std::move(token)), period_s_(c.intensity_poll_s) {}
  double now(bool* stale) {
    if (url_.empty()) return value_;
    if (!last_poll_ || seconds_since(*last_poll_) >= period_s_) {
      last_poll_ = Clock::now();
      auto got = fetch_intensity(url_, token_);
      if (got) {
        value_ = *got;
        stale_ = false;
      } else {
        stale_ = true;  // keep the last value; the log says so
      }
    }
    if (stale) *stale = stale_;
    return value_;
  }

 private:
  double value_;
  std::string url_, token_;
  double period_s_;
  std::optional<Clock::time_point> last_poll_;
  bool stale_ = false;
};

}  // namespace

void install_preemption_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

namespace {

// One rank's run; train() below wraps it so that a throw still reaches the
// controller as a "failed" status. `status` is kept at the latest payload.
int train_rank(const JobConfig& cfg, const shard::RendezvousInfo& info, StatusPusher* pusher, json& status) {
  const auto t_start = Clock::now();
  // ---- 0. device; rendezvous; the checkpoint directory must be writable --
  // A rank whose device cannot be had fails every rank (agree below).
  const DeviceFacts facts = device_facts(info.local_rank);
  DevicePlan plan;
  std::string device_error;
  try {
    plan = plan_device(cfg, info.local_rank, facts);
  } catch (const ConfigError& e) {
    device_error = e.what();
  }
  const c10::Device device = plan.cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(plan.index))
                                       : c10::Device(c10::kCPU);
  // The current CUDA device for everything after (NCCL communicators,
  // the caching allocator, the streams).
  if (plan.cuda) c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(device);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.sharding.timeout_s * 1000));
  auto rdzv = shard::Rendezvous::connect(info, shard::CommunicatorOptions{timeout});
  const int rank = info.rank, world = info.world_size;
  const bool lead = rank == 0;
  auto say = [&](const std::string& line) {
    if (lead) std::cout << line << std::endl;
  };
  agree(*rdzv, device_error);
  for (const auto& note : plan.notes) say(note);
  {
    std::string error;
    if (shard::is_object_store_url(cfg.checkpoint.dir)) {
      // Endpoint, credentials and bucket, checked now (one listing).
      try {
        shard::latest_checkpoint(cfg.checkpoint.dir);
      } catch (const std::exception& e) {
        error = "checkpoint.dir: '" + cfg.checkpoint.dir + "' is not usable: " + e.what();
      }
    } else if (!cfg.checkpoint.dir.empty()) {
      std::error_code ec;
      fs::create_directories(cfg.checkpoint.dir, ec);
      const std::string probe = cfg.checkpoint.dir + "/.writable." + std::to_string(rank);
      std::ofstream f(probe);
      if (!fs::is_directory(cfg.checkpoint.dir) || !(f << "ok") || !f.flush())
        error = "checkpoint.dir: '" + cfg.checkpoint.dir + "' is not a writable directory";
      f.close();
      fs::remove(probe, ec);
    }
    agree(*rdzv, error);
  }

  // ---- 1. data ------------------------------------------------------------
  std::unique_ptr<TokenFile> train_file, val_file;
  {
    std::string error;
    try {
      train_file = std::make_unique<TokenFile>(cfg.data.train);
      if (!cfg.data.val.empty()) val_file = std::make_unique<TokenFile>(cfg.data.val);
      if (train_file->vocab() > cfg.model.vocab)
        error = "model.vocab: " + std::to_string(cfg.model.vocab) + " is smaller than the vocabulary of " +
                cfg.data.train + " (" + std::to_string(train_file->vocab()) + ")";
    } catch (const std::exception& e) {
      error = std::string("data: ") + e.what();
    }
    agree(*rdzv, error);
  }
  const int64_t B = cfg.schedule.batch_size, T = cfg.model.context, A = cfg.schedule.grad_accum;
  Sampler train_sampler(*train_file, T, cfg.data.seed);
  std::optional<Sampler> val_sampler;
  if (val_file) val_sampler.emplace(*val_file, T, cfg.data.seed ^ 0x5eed5eedull);

  // ---- 2. model, built and sharded unit by unit ---------------------------
  GPTConfig gc;
  gc.vocab_size = cfg.model.vocab;
  gc.block_size = cfg.model.context;
  gc.n_layer = cfg.model.layers;
  gc.n_head = cfg.model.heads;
  gc.n_embd = cfg.model.embd;
  gc.dropout = cfg.model.dropout;
  gc.attention = parse_attention(plan.attention, "model.attention");
  torch::manual_seed(static_cast<uint64_t>(cfg.data.seed));
  GPT model(gc, /*deferred=*/true);
  shard::FullyShardOptions so;
  so.strategy = shard::parse_sharding_strategy(cfg.sharding.strategy, "sharding.strategy");
  so.wrap = shard::WrapPolicy::by_type<BlockImpl>();
  so.limit_all_gathers = static_cast<int>(cfg.sharding.limit_all_gathers);
  so.hybrid_shard_group_size = static_cast<int>(cfg.sharding.hybrid_group_size);
  so.timeout = timeout;
  so.param_init = model->param_init();
  so.compute_device = device;
  so.sync_module_states = false;  // every rank computes the same values
  so.offload.offload_params = cfg.sharding.cpu_offload;
  // bf16 compute: fp32 master shards, gradients reduced in fp32.
  if (plan.param_dtype == "bfloat16") so.mixed_precision.param_dtype = at::kBFloat16;
  if (cfg.sharding.activation_checkpointing)
    so.activation_checkpointing = [](const std::string&, const torch::nn::Module& m) {
      return dynamic_cast<const BlockImpl*>(&m) != nullptr;
    };
  shard::validate(so, world, info.local_world_size);
  shard::FullyShardedModel fsdp(model.ptr(), rdzv, so);
  const double flops_per_token = greenshard::flops_per_token(gc, T);
  say("greenshard-worker: job " + cfg.job_id + ", " + std::to_string(world) + " rank(s) " + cfg.sharding.strategy +
      " on " + plan.device + (plan.cuda ? " (" + plan.hardware + ")" : "") + ", " + plan.param_dtype + " compute, " +
      plan.attention + " attention" + (cfg.sharding.cpu_offload ? ", CPU offload" : "") + ", GPT " +
      std::to_string(num_parameters(gc)) + " params (" + std::to_string(gc.n_layer) + " layers x " +
      std::to_string(gc.n_embd) + "), batch " + std::to_string(B) + " x " + std::to_string(T) + " x " +
      std::to_string(A) + " accum per rank, train tokens " + std::to_string(train_file->size()));

  // ---- 3. optimizer -----------------------------------------------------
  torch::optim::AdamW opt(fsdp.parameters(), torch::optim::AdamWOptions(cfg.optimizer.lr)
                                                 .betas({cfg.optimizer.beta1, cfg.optimizer.beta2})
                                                 .eps(cfg.optimizer.eps)
                                                 .weight_decay(cfg.optimizer.weight_decay));

  // ---- 4. resume ---------------------------------------------------------
  RunState st;
  int64_t resumed_from = -1;
  if (!cfg.checkpoint.dir.empty() && cfg.checkpoint.resume) {
    const std::string latest = shard::latest_checkpoint(cfg.checkpoint.dir);
    if (!latest.empty()) {
      auto loaded = shard::load_checkpoint(fsdp, &opt, latest);
      st = RunState::from_extra(loaded.extra, latest);
      set_rng_state(st.rng);
      resumed_from = st.step;
      say("resumed from " + latest + " (step " + std::to_string(st.step) + ", saved by " +
          std::to_string(loaded.saved_world_size) + " ranks)");
    }
  }
  if (st.step >= cfg.schedule.steps) say("nothing to do: step " + std::to_string(st.step) + " >= schedule.steps");

  // ---- 5. metrics, energy, emissions, status ----------------------------
  std::unique_ptr<Exporter> exporter;
  if (cfg.metrics.port > 0) {
    const int port = static_cast<int>(cfg.metrics.port) + rank;
    exporter = std::make_unique<Exporter>(cfg.metrics.bind + ":" + std::to_string(port), cfg.job_id, rank,
                                          cfg.carbon.region);
    say("metrics: http://" + cfg.metrics.bind + ":" + std::to_string(port) + "/metrics (rank r: port + r)");
  }
  // LOCAL_RANK's GPU when NVML reports one (no GPU: no GPU series); the
  // host's CPU package is shared by the local ranks, each reports its share.
  EnergyMeterOptions eo;
  eo.gpu_index = facts.nvml_index;
  eo.cpu_tdp_watts = cfg.carbon.cpu_tdp_watts;
  eo.local_world_size = info.local_world_size;
  EnergyMeter meter(eo);
  const carbon::HardwareProfile& hw = carbon::hardware_profile(plan.hardware);
  carbon::EmissionsAccumulator mine(cfg.carbon.pue, hw, cfg.carbon.resources);  // this rank, this run
  Intensity intensity(cfg.carbon, cfg.status.token);
  const RunState base = st;  // totals before this run
  double last_energy_j = 0;
  auto last_meter = Clock::now();
  double intensity_now = intensity.now(nullptr);

  auto status_json = [&](const std::string& state, double loss, double tps, double mfu, double eta) {
    json j{{"state", state},
           {"step", st.step},
           {"total_steps", cfg.schedule.steps},
           {"tokens", static_cast<int64_t>(st.tokens)},
           {"loss", std::isfinite(loss) ? json(loss) : json(nullptr)},
           {"val_loss", std::isfinite(st.last_val) ? json(st.last_val) : json(nullptr)},
           {"tokens_per_s", tps},
           {"mfu", mfu},
           {"eta_s", eta},
           {"energy_joules", st.energy_j},
           {"operational_grams", st.operational_g},
           {"embodied_grams", st.embodied_g},
           {"message", ""}};
    return j;
  };
  // Meter energy since the last call into this rank's accumulator; then
  // job totals across ranks (collective).
  auto account = [&]() {
    auto r = meter.read();
    const double e = r.total_joules();
    const double dt = seconds_since(last_meter);
    // The interval's energy at the intensity in force during it (the value
    // polled before it began); then the value for the next interval.
    mine.add_seconds(e - last_energy_j, dt, intensity_now);
    bool stale = false;
    intensity_now = intensity.now(&stale);
    last_energy_j = e;
    last_meter = Clock::now();
    auto tot = all_reduce(*rdzv, {mine.energy_joules(), mine.operational_grams(), mine.embodied_grams()},
                          shard::ReduceOp::kSum);
    st.energy_j = base.energy_j + tot[0];
    st.operational_g = base.operational_g + tot[1];
    st.embodied_g = base.embodied_g + tot[2];
    if (exporter) {
      exporter->on_energy(r, e);
      exporter->on_emissions(intensity_now, mine.operational_grams(), mine.embodied_grams(), mine.sci_per_1k_tokens());
      auto hm = shard::host_memory();
      exporter->on_memory(static_cast<double>(hm.rss_bytes), static_cast<double>(hm.peak_rss_bytes),
                          static_cast<double>(fsdp.memory().unsharded_peak_bytes));
    }
    if (stale && lead) std::cout << "warning: carbon.intensity_url unreachable; using the last value " << intensity_now
                                 << " gCO2e/kWh (stale)" << std::endl;
  };
  auto save = [&](const char* why) {
    if (cfg.checkpoint.dir.empty()) return;
    st.rng = rng_state();
    st.wall_s = base.wall_s + seconds_since(t_start);
    shard::CheckpointOptions co;
    co.keep_last = static_cast<int>(cfg.checkpoint.keep_last);
    // Interval saves go to the background; the last one (final, or on
    // SIGTERM) completes the one in flight, then saves and waits.
    co.async = cfg.checkpoint.async && std::string(why) == "interval";
    const auto t0 = Clock::now();
    const std::string dir = shard::save_checkpoint(fsdp, &opt, cfg.checkpoint.dir, st.step, st.to_extra(), co);
    say("checkpoint " + dir + " (" + why + ", " + std::to_string(seconds_since(t0)).substr(0, 5) + " s" +
        (co.async ? " to stage; writing in the background)" : ")"));
  };
  auto validate_loss = [&]() -> double {
    if (!val_sampler) return NAN;
    at::NoGradGuard no_grad;
    model->eval();
    at::Tensor sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device));
    std::vector<int64_t> x, y;
    for (int64_t b = 0; b < cfg.schedule.eval_batches; ++b) {
      val_sampler->batch(st.step, b, rank * B, B, x, y);
      auto idx = at::from_blob(x.data(), {B, T}, at::kLong).to(device);
      auto tgt = at::from_blob(y.data(), {B, T}, at::kLong).to(device);
      sum += model->loss(model->forward(idx), tgt).detach().to(at::kDouble);
    }
    model->train();
    return all_reduce(*rdzv, {sum.item<double>() / static_cast<double>(cfg.schedule.eval_batches)},
                      shard::ReduceOp::kAvg)[0];
  };

  // ---- 6. the steps -------------------------------------------------------
  const bool tty = lead && isatty(STDOUT_FILENO) && cfg.log.format == "text";
  const double tokens_per_step = static_cast<double>(B * T * A * world);
  std::vector<int64_t> x, y;
  // (A, B, T) token ids and targets of one step, in host memory (pinned for
  // asynchronous copies to a GPU), copied to the device once per step.
  const auto host_opts = at::TensorOptions().dtype(at::kLong).pinned_memory(plan.cuda);
  at::Tensor host_idx = at::empty({A, B, T}, host_opts), host_tgt = at::empty({A, B, T}, host_opts);
  double last_loss = NAN, tps = 0, mfu = 0, eta = 0;
  std::optional<Clock::time_point> last_push;
  std::string final_state = "succeeded";
  auto step_window_start = Clock::now();
  int64_t steps_this_run = 0;
  // A background save's failure is raised at the next step; any other
  // error while one is in flight reports the save's failure (its cause).
  try {
    while (st.step < cfg.schedule.steps) {
      shard::check_checkpoint(fsdp);
      const auto t0 = Clock::now();
      const double lr = learning_rate(cfg.optimizer, st.step, cfg.schedule.steps);
      for (auto& group : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
      opt.zero_grad();
      for (int64_t m = 0; m < A; ++m) {
        // (B, T) token ids and next-token targets of this rank's rows
        train_sampler.batch(st.step, m, rank * B, B, x, y);
        std::memcpy(host_idx[m].data_ptr<int64_t>(), x.data(), x.size() * sizeof(int64_t));
        std::memcpy(host_tgt[m].data_ptr<int64_t>(), y.data(), y.size() * sizeof(int64_t));
      }
      // (A, B, T) on the device (no copy on the CPU); the buffers are reused
      // next step, after this step's host syncs (loss, norm).
      const at::Tensor step_idx = host_idx.to(device, /*non_blocking=*/true);
      const at::Tensor step_tgt = host_tgt.to(device, /*non_blocking=*/true);
      // The loss stays on the device until the step's one host read.
      at::Tensor loss_acc = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device));
      for (int64_t m = 0; m < A; ++m) {
        // (B, T) -> (B, T, V) -> scalar
        auto loss = model->loss(model->forward(step_idx[m]), step_tgt[m]) / static_cast<double>(A);
        if (m + 1 < A) {
          auto guard = fsdp.no_sync();  // accumulate unsharded, reduce once
          loss.backward();
        } else {
          loss.backward();
        }
        loss_acc += loss.detach().to(at::kDouble);
      }
      const double loss_sum = loss_acc.item<double>();
      const double norm = cfg.optimizer.grad_clip > 0 ? fsdp.clip_grad_norm(cfg.optimizer.grad_clip) : NAN;
      opt.step();
      // One collective for the log and for preemption: mean loss, and whether
      // any rank was asked to stop.
      const auto t_coll = Clock::now();
      auto agreed = all_reduce(*rdzv, {loss_sum / world, g_preempt_signal.load() ? 1.0 : 0.0}, shard::ReduceOp::kSum);
      const double coll_s = seconds_since(t_coll);
      last_loss = agreed[0];
      const bool preempt = agreed[1] > 0;
      st.step += 1;
      st.tokens += tokens_per_step;
      ++steps_this_run;
      const double dt = seconds_since(t0);
      tps = tokens_per_step / dt;
      mfu = plan.peak_flops > 0 ? flops_per_token * (tps / world) / plan.peak_flops : 0.0;
      eta = seconds_since(step_window_start) / static_cast<double>(steps_this_run) *
            static_cast<double>(cfg.schedule.steps - st.step);
      mine.add_tokens(static_cast<double>(B * T * A));

      if (cfg.schedule.eval_interval > 0 && (st.step % cfg.schedule.eval_interval == 0 || st.step == cfg.schedule.steps)) {
        st.last_val = validate_loss();
        if (std::isfinite(st.last_val)) {
          st.best_val = std::min(st.best_val, st.last_val);
          if (exporter) exporter->on_validation(st.last_val);
        }
      }
      const bool log_now = st.step % cfg.log.every == 0 || st.step == cfg.schedule.steps || preempt;
      if (log_now) account();
      if (exporter) {
        StepMetrics sm;
        sm.step_seconds = dt;
        sm.tokens = static_cast<double>(B * T * A);
        sm.loss = last_loss;
        sm.tokens_per_second = tps;
        sm.mfu = mfu;
        sm.model_flops = flops_per_token * B * T * A;
        sm.progress = static_cast<double>(st.step) / cfg.schedule.steps;
        sm.eta_seconds = eta;
        sm.collective_seconds = coll_s;
        exporter->on_step(sm);
      }
      if (log_now && lead) {
        if (cfg.log.format == "json") {
          json j{{"step", st.step}, {"steps", cfg.schedule.steps}, {"loss", last_loss}, {"lr", lr},
                 {"grad_norm", std::isfinite(norm) ? json(norm) : json(nullptr)}, {"ms", dt * 1000}, {"tokens_per_s", tps},
                 {"mfu", mfu}, {"eta_s", eta}, {"energy_joules", st.energy_j},
                 {"operational_grams", st.operational_g}, {"embodied_grams", st.embodied_g}};
          if (std::isfinite(st.last_val)) j["val_loss"] = st.last_val;
          std::cout << j.dump() << std::endl;
        } else {
          char line[320];
          std::snprintf(line, sizeof line,
                        "step %5lld/%lld | loss %.4f | lr %.2e | norm %6.3f | %8.1f ms | %9.0f tok/s | MFU %5.2f%% | "
                        "%.3f gCO2e | ETA %s",
                        static_cast<long long>(st.step), static_cast<long long>(cfg.schedule.steps), last_loss, lr, norm,
                        dt * 1000, tps, 100 * mfu, st.operational_g + st.embodied_g, hms(eta).c_str());
          if (tty) {
            const int width = 20, done = static_cast<int>(width * st.step / cfg.schedule.steps);
            std::cout << "\r" << line << " [" << std::string(done, '#') << std::string(width - done, '.') << "]"
                      << (st.step == cfg.schedule.steps ? "\n" : "") << std::flush;
          } else {
            std::cout << line << (std::isfinite(st.last_val) && st.step % std::max<int64_t>(1, cfg.schedule.eval_interval) == 0
                                      ? " | val " + std::to_string(st.last_val).substr(0, 6)
                                      : "")
                      << std::endl;
          }
        }
      }
      // Status every status.interval_s seconds (the first after the first
      // step); only rank 0 pushes, so only it keeps the latest payload.
      if (pusher) {
        status = status_json("running", last_loss, tps, mfu, eta);
        if (!last_push || seconds_since(*last_push) >= cfg.status.interval_s) {
          pusher->push(status.dump());
          last_push = Clock::now();
        }
      }
      if (preempt) {
        say(std::string("preempted (signal ") + std::to_string(g_preempt_signal.load()) + " on some rank): saving and stopping");
        final_state = "preempted";
        break;
      }
      if (st.step % cfg.checkpoint.interval == 0 && st.step < cfg.schedule.steps) save("interval");
    }

    // ---- 7. final checkpoint, summary, export -------------------------------
    account();
    save(final_state == "preempted" ? "preempted" : "final");
  } catch (const std::exception&) {
    shard::wait_for_checkpoint(fsdp);
    throw;
  }
  if (!cfg.export_path.empty() && final_state == "succeeded")
    shard::export_full_state_dict(fsdp, cfg.export_path,
                                  cfg.export_format == "torch_save" ? shard::ExportFormat::kTorchSave
                                                                    : shard::ExportFormat::kLibTorchArchive);
  if (lead) {
    const double sci = st.tokens > 0 ? (st.operational_g + st.embodied_g) / (st.tokens / 1000.0) : NAN;
    json summary{{"state", final_state},
                 {"job_id", cfg.job_id},
                 {"steps", st.step},
                 {"total_steps", cfg.schedule.steps},
                 {"tokens", static_cast<int64_t>(st.tokens)},
                 {"world_size", world},
                 {"final_loss", std::isfinite(last_loss) ? json(last_loss) : json(nullptr)},
                 {"final_val_loss", std::isfinite(st.last_val) ? json(st.last_val) : json(nullptr)},
                 {"best_val_loss", std::isfinite(st.best_val) ? json(st.best_val) : json(nullptr)},
                 {"wall_s", base.wall_s + seconds_since(t_start)},
                 {"tokens_per_s", tps},
                 {"mfu", mfu},
                 {"energy_joules", st.energy_j},
                 {"operational_grams", st.operational_g},
                 {"embodied_grams", st.embodied_g},
                 {"sci_per_1k_tokens", std::isfinite(sci) ? json(sci) : json(nullptr)},
                 {"region", cfg.carbon.region},
                 {"grid_intensity_gco2_per_kwh", intensity_now},
                 {"resumed_from_step", resumed_from >= 0 ? json(resumed_from) : json(nullptr)}};
    if (!cfg.summary_path.empty()) {
      const std::string tmp = cfg.summary_path + ".tmp";
      std::ofstream(tmp) << summary.dump(2) << "\n";
      fs::rename(tmp, cfg.summary_path);
    }
    if (!cfg.termination_log.empty()) {
      // Kubernetes keeps at most 4096 bytes of it: the fields the controller reads.
      json brief = json::object();
      for (const char* k : {"state", "steps", "tokens", "final_val_loss", "energy_joules", "operational_grams",
                            "embodied_grams"})
        if (summary.contains(k)) brief[k] = summary[k];
      std::ofstream(cfg.termination_log, std::ios::trunc) << brief.dump() << "\n";
    }
    say("done: " + final_state + ", " + std::to_string(st.step) + " steps, loss " + std::to_string(last_loss) +
        ", energy " + std::to_string(st.energy_j / 3600.0) + " Wh, " + std::to_string(st.operational_g) +
        " g operational + " + std::to_string(st.embodied_g) + " g embodied CO2e");
    status = status_json(final_state, last_loss, tps, mfu, 0);
    if (pusher) {
      pusher->push(status.dump());
      pusher->flush(std::chrono::seconds(5));
    }
  }
  rdzv->world()->barrier()->wait();
  return kExitOk;
}

}  // namespace

int train(const JobConfig& cfg) {
  const auto info = shard::rendezvous_info_from_env();
  std::unique_ptr<StatusPusher> pusher;
  if (info.rank == 0 && !cfg.status.url.empty())
    pusher = std::make_unique<StatusPusher>(cfg.status.url, cfg.status.token);
  json status{{"state", "running"}, {"step", 0}, {"total_steps", cfg.schedule.steps}, {"message", ""}};
  try {
    return train_rank(cfg, info, pusher.get(), status);
  } catch (const std::exception& e) {
    // The controller hears of the failure (rank 0; the exit code says the rest).
    if (pusher) {
      status["state"] = "failed";
      status["eta_s"] = 0;
      status["message"] = std::string(e.what()).substr(0, 4000);  // the controller takes <= 4096 bytes
      pusher->push(status.dump());
      pusher->flush(std::chrono::seconds(5));
    }
    throw;
  }
}

}  // namespace greenshard
