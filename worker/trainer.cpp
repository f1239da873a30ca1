// The training loop of one rank. train_rank reads top to bottom:
//   0. device (CUDA device LOCAL_RANK or the CPU, worker/device.h); rendezvous;
//      the checkpoint directory must be usable (all ranks agree)
//   1. data: token shards, memory-mapped; the sampler (batches are a
//      function of the step)
//   2. model: GPT built unit by unit (deferred), sharded with shard/
//   3. optimizer: AdamW over the flat shards, decay on >= 2-D weights only
//   4. the Reporter: log, metrics, energy, emissions, status, summary
//   5. resume from the newest DONE checkpoint (any world size)
//   6. the steps: train_step, validation every eval_interval, checkpoint
//      every interval; stop cleanly (checkpoint, exit 0) when any rank got
//      SIGTERM
//   7. final checkpoint, export, summary
// train_step and validation_loss come first; the set-up helpers after
// train_rank. Output lives in the Reporter (worker/reporter.h), never here.
#include "worker/trainer.h"

#include "shard/checkpoint.h"
#include "shard/fully_shard.h"
#include "shard/object_store_error.h"
#include "shard/object_store_url.h"
#include "shard/rendezvous.h"
#include "worker/data.h"
#include "worker/device.h"
#include "worker/device_facts.h"
#include "worker/model.h"
#include "worker/model_card.h"
#include "worker/reporter.h"
#include "worker/run_state.h"
#include "worker/status.h"
#include "worker/weight_decay.h"

#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

namespace greenshard {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

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

// Sum (or mean) of a few doubles across all ranks.
std::vector<double> all_reduce(shard::Rendezvous& rdzv, std::vector<double> v, shard::ReduceOp op) {
  at::Tensor t = at::tensor(v, at::kDouble);
  rdzv.world()->all_reduce(t, op, {{}, "trainer scalars"})->wait();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

// Every rank agrees on an error: one failing rank fails all with its message.
// A configuration error (ConfigError: exit 2, retrying will not help) unless
// `transient`: a passing outage (an object store that cannot be reached),
// a plain failure (exit 1) after which the controller restarts the gang. A
// configuration error on any rank wins over a transient one.
void agree(shard::Rendezvous& rdzv, const std::string& error, bool transient = false) {
  const bool bad_config = !error.empty() && !transient, bad_transient = !error.empty() && transient;
  auto bad = all_reduce(rdzv, {bad_config ? 1.0 : 0.0, bad_transient ? 1.0 : 0.0}, shard::ReduceOp::kSum);
  if (bad_config) throw ConfigError(error);
  if (bad[0] > 0) throw ConfigError("another rank rejected the configuration (see its log)");
  if (bad_transient) throw std::runtime_error(error);
  if (bad[1] > 0) throw std::runtime_error("another rank could not reach checkpoint.dir (see its log)");
}

// What one step works on; the same objects every step.
struct Training {
  const JobConfig& cfg;
  shard::Rendezvous& rdzv;
  shard::FullyShardedModel& fsdp;
  GPT& model;
  torch::optim::AdamW& opt;
  MaskedWeightDecay& decay;
  const Sampler& sampler;
  c10::Device device;
  int rank, world;
  // (A, B, T) token ids and targets of one step in host memory (pinned for
  // asynchronous copies to a GPU), reused every step.
  at::Tensor host_idx, host_tgt;
};

// One optimizer step: A micro-batches (gradients accumulated unsharded,
// reduced once), clipping, weight decay, AdamW at the scheduled rate, and one
// closing all-reduce for the mean loss and the preemption flag.
StepResult train_step(Training& t, int64_t step) {
  const auto t0 = Clock::now();
  const JobConfig& cfg = t.cfg;
  const int64_t B = cfg.schedule.batch_size, A = cfg.schedule.grad_accum;
  StepResult r;
  r.lr = learning_rate(cfg.optimizer, step, cfg.schedule.steps);
  for (auto& group : t.opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(r.lr);
  t.opt.zero_grad();
  std::vector<int64_t> x, y;
  for (int64_t m = 0; m < A; ++m) {
    // (B, T) token ids and next-token targets of this rank's rows
    t.sampler.batch(step, m, t.rank * B, B, x, y);
    std::memcpy(t.host_idx[m].data_ptr<int64_t>(), x.data(), x.size() * sizeof(int64_t));
    std::memcpy(t.host_tgt[m].data_ptr<int64_t>(), y.data(), y.size() * sizeof(int64_t));
  }
  // (A, B, T) on the device (no copy on the CPU); the host buffers are
  // reused next step, after this step's host syncs (loss, norm).
  const at::Tensor idx = t.host_idx.to(t.device, /*non_blocking=*/true);
  const at::Tensor tgt = t.host_tgt.to(t.device, /*non_blocking=*/true);
  // The loss stays on the device until the step's one host read.
  at::Tensor loss_acc = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(t.device));
  for (int64_t m = 0; m < A; ++m) {
    // (B, T) -> (B, T, V) -> scalar
    auto loss = t.model->loss(t.model->forward(idx[m]), tgt[m]) / static_cast<double>(A);
    if (m + 1 < A) {
      auto guard = t.fsdp.no_sync();  // accumulate unsharded, reduce once
      loss.backward();
    } else {
      loss.backward();
    }
    loss_acc += loss.detach().to(at::kDouble);
  }
  const double loss_sum = loss_acc.item<double>();
  r.grad_norm = cfg.optimizer.grad_clip > 0 ? t.fsdp.clip_grad_norm(cfg.optimizer.grad_clip) : NAN;
  t.decay.apply(r.lr);  // p <- p (1 - lr wd) on >= 2-D elements, as AdamW's decayed group
  t.opt.step();
  const auto t_coll = Clock::now();
  auto agreed = all_reduce(t.rdzv, {loss_sum / t.world, g_preempt_signal.load() ? 1.0 : 0.0}, shard::ReduceOp::kSum);
  r.collective_seconds = seconds_since(t_coll);
  r.loss = agreed[0];
  r.preempt = agreed[1] > 0;
  r.seconds = seconds_since(t0);
  return r;
}

// Mean validation loss over eval_batches batches and all ranks (NaN when
// there is no validation data).
double validation_loss(Training& t, const std::optional<Sampler>& val, int64_t step) {
  if (!val) return NAN;
  const int64_t B = t.cfg.schedule.batch_size, T = t.cfg.model.context, n = t.cfg.schedule.eval_batches;
  c10::NoGradGuard no_grad;
  t.model->eval();
  at::Tensor sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(t.device));
  std::vector<int64_t> x, y;
  for (int64_t b = 0; b < n; ++b) {
    val->batch(step, b, t.rank * B, B, x, y);
    auto idx = at::from_blob(x.data(), {B, T}, at::kLong).to(t.device);  // (B, T)
    auto tgt = at::from_blob(y.data(), {B, T}, at::kLong).to(t.device);
    sum += t.model->loss(t.model->forward(idx), tgt).detach().to(at::kDouble);
  }
  t.model->train();
  return all_reduce(t.rdzv, {sum.item<double>() / static_cast<double>(n)}, shard::ReduceOp::kAvg)[0];
}

std::string check_checkpoint_dir(const JobConfig& cfg, int rank, bool* transient);
std::string open_data(const JobConfig& cfg, std::optional<TokenDataset>& train, std::optional<TokenDataset>& val);
GPTConfig gpt_config(const JobConfig& cfg, const DevicePlan& plan);
shard::FullyShardOptions shard_options(const JobConfig& cfg, const DevicePlan& plan, GPT& model, c10::Device device,
                                       const shard::RendezvousInfo& info);
ModelCard model_card(const JobConfig& cfg, const TokenDataset& train);
std::string banner(const JobConfig& cfg, const DevicePlan& plan, const GPTConfig& gc, const TokenDataset& train,
                   const MaskedWeightDecay& decay, int world);
void save(shard::FullyShardedModel& fsdp, torch::optim::AdamW& opt, const JobConfig& cfg, RunState& st,
          const Reporter& report, const std::string& why);
std::string rng_state();
void set_rng_state(const std::string& bytes);

// One rank's run; train() below wraps it so that a throw still reaches the
// controller as a "failed" status (`status` holds the latest payload).
int train_rank(const JobConfig& cfg, const shard::RendezvousInfo& info, StatusPusher* pusher,
               std::optional<StatusPush>& status) {
  // ---- 0. device; rendezvous; the checkpoint directory -------------------
  const DeviceFacts facts = device_facts(info.local_rank);
  DevicePlan plan;
  std::string device_error;  // a rank whose device cannot be had fails every rank
  try {
    plan = plan_device(cfg, info.local_rank, facts);
  } catch (const ConfigError& e) {
    device_error = e.what();
  }
  const c10::Device device = plan.cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(plan.index))
                                       : c10::Device(c10::kCPU);
  // The current CUDA device for everything after (NCCL, allocator, streams).
  if (plan.cuda) c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(device);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.sharding.timeout_s * 1000));
  auto rdzv = shard::Rendezvous::connect(info, shard::CommunicatorOptions{timeout});
  const int rank = info.rank, world = info.world_size;
  agree(*rdzv, device_error);
  bool ckpt_transient = false;
  const std::string ckpt_error = check_checkpoint_dir(cfg, rank, &ckpt_transient);
  agree(*rdzv, ckpt_error, ckpt_transient);

  // ---- 1. data: memory-mapped shards -------------------------------------
  std::optional<TokenDataset> train_data, val_data;
  agree(*rdzv, open_data(cfg, train_data, val_data));
  const int64_t B = cfg.schedule.batch_size, T = cfg.model.context, A = cfg.schedule.grad_accum;
  const Sampler train_sampler(*train_data, T, cfg.data.seed);
  std::optional<Sampler> val_sampler;
  if (val_data) val_sampler.emplace(*val_data, T, cfg.data.seed ^ 0x5eed5eedull);

  // ---- 2. model, built and sharded unit by unit --------------------------
  const GPTConfig gc = gpt_config(cfg, plan);
  torch::manual_seed(static_cast<uint64_t>(cfg.data.seed));
  GPT model(gc, /*deferred=*/true);
  shard::FullyShardedModel fsdp(model.ptr(), rdzv, shard_options(cfg, plan, model, device, info));

  // ---- 3. optimizer: AdamW over the flat shards (decay: the mask below) --
  torch::optim::AdamW opt(fsdp.parameters(), torch::optim::AdamWOptions(cfg.optimizer.lr)
                                                 .betas({cfg.optimizer.beta1, cfg.optimizer.beta2})
                                                 .eps(cfg.optimizer.eps)
                                                 .weight_decay(0.0));
  MaskedWeightDecay decay(fsdp, cfg.optimizer.weight_decay);

  // ---- 4. everything the run reports -------------------------------------
  ReporterContext ctx;
  ctx.rank = rank;
  ctx.world = world;
  ctx.local_world_size = info.local_world_size;
  ctx.nvml_index = facts.nvml_index;
  ctx.hardware = plan.hardware;
  ctx.peak_flops = plan.peak_flops;
  ctx.flops_per_token = flops_per_token(gc, T);
  ctx.tokens_per_rank_step = static_cast<double>(B * T * A);
  ctx.sum_over_ranks = [&](std::vector<double> v) { return all_reduce(*rdzv, std::move(v), shard::ReduceOp::kSum); };
  ctx.unsharded_peak_bytes = [&] { return static_cast<double>(fsdp.memory().unsharded_peak_bytes); };
  Reporter report(cfg, std::move(ctx), pusher, status);
  for (const auto& note : plan.notes) report.say(note);
  report.say(banner(cfg, plan, gc, *train_data, decay, world));

  // ---- 5. resume ---------------------------------------------------------
  RunState st;
  int64_t resumed_from = -1;
  const std::string latest =
      cfg.checkpoint.dir.empty() || !cfg.checkpoint.resume ? "" : shard::latest_checkpoint(cfg.checkpoint.dir);
  if (!latest.empty()) {
    auto loaded = shard::load_checkpoint(fsdp, &opt, latest);
    st = RunState::from_extra(loaded.extra, latest);
    set_rng_state(st.rng);
    resumed_from = st.step;
    report.say("resumed from " + latest + " (step " + std::to_string(st.step) + ", saved by " +
               std::to_string(loaded.saved_world_size) + " ranks)");
  }
  if (st.step >= cfg.schedule.steps) report.say("nothing to do: step " + std::to_string(st.step) + " >= schedule.steps");
  st.card = to_json(model_card(cfg, *train_data));
  report.begin(st);

  // ---- 6. the steps ------------------------------------------------------
  const auto host = at::TensorOptions().dtype(at::kLong).pinned_memory(plan.cuda);
  Training t{cfg, *rdzv, fsdp, model, opt, decay, train_sampler, device, rank, world,
             at::empty({A, B, T}, host), at::empty({A, B, T}, host)};
  RunEnd end = RunEnd::kSucceeded;
  // A background save's failure is raised at the next step; any other error
  // while one is in flight reports the save's failure (its cause).
  try {
    while (st.step < cfg.schedule.steps) {
      shard::check_checkpoint(fsdp);
      const StepResult r = train_step(t, st.step);
      st.step += 1;
      st.tokens += static_cast<double>(B * T * A * world);
      const int64_t every = cfg.schedule.eval_interval;
      if (every > 0 && (st.step % every == 0 || st.step == cfg.schedule.steps))
        report.on_validation(validation_loss(t, val_sampler, st.step), st);
      report.on_step(r, st);
      if (r.preempt) {
        end = RunEnd::kPreempted;
        break;
      }
      if (st.step % cfg.checkpoint.interval == 0 && st.step < cfg.schedule.steps) save(fsdp, opt, cfg, st, report, "interval");
    }

    // ---- 7. final checkpoint, export, summary ----------------------------
    report.account(st);
    save(fsdp, opt, cfg, st, report, end == RunEnd::kPreempted ? "preempted" : "final");
  } catch (const std::exception&) {
    shard::wait_for_checkpoint(fsdp);
    throw;
  }
  if (!cfg.export_path.empty() && end == RunEnd::kSucceeded) {
    shard::export_full_state_dict(fsdp, cfg.export_path,
                                  cfg.export_format == "torch_save" ? shard::ExportFormat::kTorchSave
                                                                    : shard::ExportFormat::kLibTorchArchive);
    if (rank == 0) write_model_card(cfg.export_path + ".json", model_card_from_json(st.card, "this run"));
  }
  report.finish(end, st, resumed_from);
  rdzv->depart();  // not a barrier: see Rendezvous::depart
  return kExitOk;
}

// ---- set-up helpers, in the order train_rank uses them --------------------

// "" when checkpoint.dir is usable: an object-store URL that lists, or a
// local directory this rank can write; else the error naming the field.
// *transient: the object store could not be reached (no connection, DNS,
// timeout, HTTP 5xx, after the client's retries): it may come back, so it
// is no configuration error. A bad URL or variable, refused credentials or
// a missing bucket are.
std::string check_checkpoint_dir(const JobConfig& cfg, int rank, bool* transient) {
  *transient = false;
  if (cfg.checkpoint.dir.empty()) return "";
  if (shard::is_object_store_url(cfg.checkpoint.dir)) {
    try {
      shard::latest_checkpoint(cfg.checkpoint.dir);  // endpoint, credentials, bucket: one listing
    } catch (const shard::ObjectStoreError& e) {
      *transient = e.transient;
      return "checkpoint.dir: '" + cfg.checkpoint.dir + "' " +
             (e.transient ? "cannot be reached (retryable): " : "is not usable: ") + e.what();
    } catch (const std::exception& e) {
      return "checkpoint.dir: '" + cfg.checkpoint.dir + "' is not usable: " + e.what();
    }
    return "";
  }
  std::error_code ec;
  fs::create_directories(cfg.checkpoint.dir, ec);
  const std::string probe = cfg.checkpoint.dir + "/.writable." + std::to_string(rank);
  std::ofstream f(probe);
  const bool ok = fs::is_directory(cfg.checkpoint.dir) && (f << "ok") && f.flush();
  f.close();
  fs::remove(probe, ec);
  return ok ? "" : "checkpoint.dir: '" + cfg.checkpoint.dir + "' is not a writable directory";
}

// Opens data.train and data.val (files or globs of shards); "" or the error
// naming the field: unreadable shards, a tokenizer larger than model.vocab,
// validation tokens of another tokenizer.
std::string open_data(const JobConfig& cfg, std::optional<TokenDataset>& train, std::optional<TokenDataset>& val) {
  try {
    train.emplace(cfg.data.train);
  } catch (const std::exception& e) {
    return std::string("data.train: ") + e.what();
  }
  const TokenizerInfo& tok = train->tokenizer();
  if (tok.vocab > cfg.model.vocab)
    return "model.vocab: " + std::to_string(cfg.model.vocab) + " is smaller than the vocabulary of the " +
           to_string(tok.kind) + " tokenizer of " + cfg.data.train + " (" + std::to_string(tok.vocab) +
           "); set model.vocab to at least " + std::to_string(tok.vocab);
  if (cfg.data.val.empty()) return "";
  try {
    val.emplace(cfg.data.val);
  } catch (const std::exception& e) {
    return std::string("data.val: ") + e.what();
  }
  const TokenizerInfo& v = val->tokenizer();
  if (v.kind != tok.kind || v.vocab != tok.vocab || v.model_sha256 != tok.model_sha256)
    return "data.val: " + val->describe() + " was made with another tokenizer than data.train (" + train->describe() + ")";
  return "";
}

GPTConfig gpt_config(const JobConfig& cfg, const DevicePlan& plan) {
  return gpt_config(cfg.model, cfg.model.dropout, parse_attention(plan.attention, "model.attention"));
}

shard::FullyShardOptions shard_options(const JobConfig& cfg, const DevicePlan& plan, GPT& model, c10::Device device,
                                       const shard::RendezvousInfo& info) {
  shard::FullyShardOptions so;
  so.strategy = shard::parse_sharding_strategy(cfg.sharding.strategy, "sharding.strategy");
  so.wrap = shard::WrapPolicy::by_type<BlockImpl>();
  so.limit_all_gathers = static_cast<int>(cfg.sharding.limit_all_gathers);
  so.hybrid_shard_group_size = static_cast<int>(cfg.sharding.hybrid_group_size);
  so.timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.sharding.timeout_s * 1000));
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
  shard::validate(so, info.world_size, info.local_world_size);
  return so;
}

// The card a checkpoint and an export carry: the model's shape and the
// tokenizer of the training data (a SentencePiece model is prepare's
// DIR/tokenizer.model next to the first shard).
ModelCard model_card(const JobConfig& cfg, const TokenDataset& train) {
  ModelCard card;
  static_cast<ModelShape&>(card) = cfg.model;
  card.tokenizer = train.tokenizer();
  if (card.tokenizer.kind == TokenizerKind::kSentencePiece)
    card.tokenizer_model = fs::absolute(fs::path(train.shard(0).path()).parent_path() / "tokenizer.model").string();
  return card;
}

std::string banner(const JobConfig& cfg, const DevicePlan& plan, const GPTConfig& gc, const TokenDataset& train,
                   const MaskedWeightDecay& decay, int world) {
  return "greenshard-worker: job " + cfg.job_id + ", " + std::to_string(world) + " rank(s) " + cfg.sharding.strategy +
         " on " + plan.device + (plan.cuda ? " (" + plan.hardware + ")" : "") + ", " + plan.param_dtype + " compute, " +
         plan.attention + " attention" + (cfg.sharding.cpu_offload ? ", CPU offload" : "") + ", GPT " +
         std::to_string(num_parameters(gc)) + " params (" + std::to_string(gc.n_layer) + " layers x " +
         std::to_string(gc.n_embd) + ", vocabulary " + std::to_string(gc.vocab_size) + "), batch " +
         std::to_string(cfg.schedule.batch_size) + " x " + std::to_string(gc.block_size) + " x " +
         std::to_string(cfg.schedule.grad_accum) + " accum per rank, weight decay " +
         std::to_string(decay.weight_decay()).substr(0, 6) + " on " + std::to_string(decay.decayed_numel()) +
         " shard elements (>= 2-D weights); data " + train.describe();
}

// Saves a checkpoint of step st.step with the run's record. Interval saves
// go to the background; the last one (final, or on SIGTERM) completes the
// one in flight, then saves and waits.
void save(shard::FullyShardedModel& fsdp, torch::optim::AdamW& opt, const JobConfig& cfg, RunState& st,
          const Reporter& report, const std::string& why) {
  if (cfg.checkpoint.dir.empty()) return;
  st.rng = rng_state();
  st.wall_s = report.wall_s();
  shard::CheckpointOptions co;
  co.keep_last = static_cast<int>(cfg.checkpoint.keep_last);
  co.async = cfg.checkpoint.async && why == "interval";
  const auto t0 = Clock::now();
  const std::string dir = shard::save_checkpoint(fsdp, &opt, cfg.checkpoint.dir, st.step, st.to_extra(), co);
  report.say("checkpoint " + dir + " (" + why + ", " + std::to_string(seconds_since(t0)).substr(0, 5) + " s" +
             (co.async ? " to stage; writing in the background)" : ")"));
}

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

}  // namespace

void install_preemption_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int train(const JobConfig& cfg) {
  const auto info = shard::rendezvous_info_from_env();
  std::unique_ptr<StatusPusher> pusher;
  if (info.rank == 0 && !cfg.status.url.empty())
    pusher = std::make_unique<StatusPusher>(cfg.status.url, cfg.status.token);
  std::optional<StatusPush> status;
  try {
    return train_rank(cfg, info, pusher.get(), status);
  } catch (const std::exception& e) {
    // The controller hears of the failure (rank 0; the exit code says the rest).
    if (pusher) pusher->push(failed_status(status, cfg.schedule.steps, e.what()));
    if (pusher) pusher->flush(std::chrono::seconds(5));
    throw;
  }
}

}  // namespace greenshard
