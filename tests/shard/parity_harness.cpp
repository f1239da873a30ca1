#include "parity_harness.h"

#include "shard/checkpoint.h"
#include "shard/fully_shard.h"
#include "shard/rendezvous.h"
#include "worker/model.h"

#include <torch/torch.h>

#include <fstream>
#include <stdexcept>

namespace gstest {
namespace {

greenshard::GPTConfig tiny_config(int n_layer = 3) {
  greenshard::GPTConfig c;
  c.vocab_size = 64;
  c.block_size = 16;
  c.n_layer = n_layer;
  c.n_head = 2;
  c.n_embd = 32;
  return c;
}

greenshard::GPT make_model(int seed = 1234, int n_layer = 3) {
  torch::manual_seed(seed);
  return greenshard::GPT(tiny_config(n_layer));
}

// Global batch of step `step`: (idx, targets), each (global_batch, seq).
// Learnable: every row is an arithmetic progression mod 64 with a random
// start and stride in 1..4, so the next token follows from the context.
std::pair<at::Tensor, at::Tensor> make_batch(const TrainSpec& spec, int step) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + step);
  auto start = at::randint(0, 64, {spec.global_batch, 1}, gen, at::kLong);
  auto stride = at::randint(1, 5, {spec.global_batch, 1}, gen, at::kLong);
  auto idx = (start + stride * at::arange(spec.seq + 1, at::kLong)).remainder(64);
  return {idx.narrow(1, 0, spec.seq).contiguous(), idx.narrow(1, 1, spec.seq).contiguous()};
}

// AdamW normalizes each element's step by its own gradient scale, so a
// gradient that is zero in exact arithmetic (the attention key bias: softmax
// ignores a per-query constant) turns float32 summation-order noise (~1e-9)
// into full +-lr steps whose sign depends on the reduction order. eps = 1e-4
// keeps such noise from being amplified; both sides use the same optimizer.
torch::optim::AdamW make_optimizer(std::vector<at::Tensor> params, const TrainSpec& spec) {
  return torch::optim::AdamW(std::move(params), torch::optim::AdamWOptions(spec.lr).weight_decay(0.1).eps(1e-4));
}

// AdamW's moments, gathered to full and split by parameter, under
// "adam.exp_avg/<name>" and "adam.exp_avg_sq/<name>"; "adam.step" (collective).
void add_optimizer_state(shard::FullyShardedModel& fsdp, torch::optim::AdamW& opt,
                         std::map<std::string, at::Tensor>& out) {
  auto params = fsdp.parameters();
  auto units = fsdp.units();
  auto group = fsdp.shard_group();
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = opt.state().find(c10::guts::to_string(params[i].unsafeGetTensorImpl()));
    if (it == opt.state().end()) continue;
    auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
    out["adam.step"] = at::full({1}, static_cast<double>(st.step()), at::kDouble);
    for (const char* which : {"exp_avg", "exp_avg_sq"}) {
      at::Tensor shard = std::string(which) == "exp_avg" ? st.exp_avg() : st.exp_avg_sq();
      at::Tensor full = at::empty({units[i].padded_numel}, at::kFloat);
      group->all_gather_into(full, shard.contiguous())->wait();
      int64_t offset = 0;
      for (const auto& name : units[i].param_names) {
        const auto& p = out.at(name);
        out[std::string("adam.") + which + "/" + name] = full.narrow(0, offset, p.numel()).view(p.sizes()).clone();
        offset += p.numel();
      }
    }
  }
}

}  // namespace

TrainResult reference_train(const TrainSpec& spec) {
  auto model = make_model();
  if (spec.bf16) throw std::invalid_argument("reference_train: fp32 only");
  auto opt = make_optimizer(model->parameters(), spec);
  TrainResult r;
  const int rows = spec.global_batch / spec.micro_batches;
  for (int step = 0; step < spec.steps; ++step) {
    auto [idx, tgt] = make_batch(spec, step);
    opt.zero_grad();
    double total = 0;
    for (int m = 0; m < spec.micro_batches; ++m) {
      auto loss = model->loss(model->forward(idx.narrow(0, m * rows, rows)), tgt.narrow(0, m * rows, rows)) /
                  spec.micro_batches;
      loss.backward();
      total += loss.item<double>();
    }
    r.losses.push_back(total);
    if (spec.clip > 0) r.grad_norms.push_back(torch::nn::utils::clip_grad_norm_(model->parameters(), spec.clip));
    opt.step();
  }
  for (const auto& p : model->named_parameters()) r.params[p.key()] = p.value().detach().clone();
  return r;
}

TrainResult fsdp_train(const TrainSpec& spec, const shard::FullyShardOptions& options, RankMemory* mem) {
  auto info = shard::rendezvous_info_from_env();
  auto rdzv = shard::Rendezvous::connect(info, shard::CommunicatorOptions{options.timeout});
  auto model = make_model(spec.model_seed, spec.n_layer);
  shard::FullyShardedModel fsdp(model.ptr(), rdzv, options);
  auto opt = make_optimizer(fsdp.parameters(), spec);
  const int world = info.world_size, rank = info.rank;
  const int rows = spec.global_batch / spec.micro_batches;  // per micro-batch, all ranks
  if (rows % world != 0) throw std::invalid_argument("micro-batch rows not divisible by world size");
  const int mine = rows / world;
  TrainResult r;
  if (!spec.resume_dir.empty()) {
    const std::string dir = spec.resume_dir == "latest" ? shard::latest_checkpoint(spec.ckpt_root) : spec.resume_dir;
    if (dir.empty()) throw std::runtime_error("no DONE checkpoint under " + spec.ckpt_root);
    auto loaded = shard::load_checkpoint(fsdp, &opt, dir);
    r.first_step = static_cast<int>(loaded.step);
    if (loaded.extra != "data-position=" + std::to_string(loaded.step))
      throw std::runtime_error("extra state not restored: '" + loaded.extra + "'");
  }
  if (!spec.import_path.empty()) shard::import_full_state_dict(fsdp, spec.import_path);
  auto save = [&](int step) {
    shard::CheckpointOptions co;
    co.async = spec.async_save;
    co.keep_last = spec.keep_last;
    shard::save_checkpoint(fsdp, &opt, spec.ckpt_root, step, "data-position=" + std::to_string(step), co);
  };
  // A failed background save is raised at the next step; any other error
  // while one is in flight reports the save's failure first (it is the
  // cause: the other ranks stopped because of it).
  try {
    for (int step = r.first_step; step < spec.steps; ++step) {
      shard::check_checkpoint(fsdp);
      if (step == spec.save_at || (spec.save_every > 0 && step > 0 && step % spec.save_every == 0)) save(step);
      auto [idx, tgt] = make_batch(spec, step);
      opt.zero_grad();
      double total = 0;
      for (int m = 0; m < spec.micro_batches; ++m) {
        auto x = idx.narrow(0, m * rows + rank * mine, mine);
        auto y = tgt.narrow(0, m * rows + rank * mine, mine);
        auto loss = model->loss(model->forward(x), y) / spec.micro_batches;
        if (m + 1 < spec.micro_batches) {
          auto guard = fsdp.no_sync();
          loss.backward();
        } else {
          loss.backward();
        }
        total += loss.item<double>();
      }
      // Global mean loss for the log.
      at::Tensor l = at::full({1}, total, at::kDouble);
      rdzv->world()->all_reduce(l, shard::ReduceOp::kAvg)->wait();
      r.losses.push_back(l.item<double>());
      if (spec.clip > 0) r.grad_norms.push_back(fsdp.clip_grad_norm(spec.clip));
      opt.step();
    }
    if (spec.save_at == spec.steps && r.first_step < spec.steps) save(spec.steps);
  } catch (const std::exception&) {
    shard::wait_for_checkpoint(fsdp);
    throw;
  }
  shard::wait_for_checkpoint(fsdp);
  auto stats = fsdp.memory();
  if (mem) {
    mem->peak_unsharded = stats.unsharded_peak_bytes;
    mem->largest_unit = stats.largest_unit_unsharded_bytes;
    mem->sharded_param_bytes = stats.sharded_param_bytes;
    mem->total_numel = stats.total_param_numel;
    for (const auto& u : fsdp.units()) mem->padded_total += u.padded_numel;
  }
  if (!spec.export_path.empty())
    shard::export_full_state_dict(fsdp, spec.export_path,
                                  spec.export_torch_save ? shard::ExportFormat::kTorchSave
                                                         : shard::ExportFormat::kLibTorchArchive);
  r.params = fsdp.full_parameters();
  if (spec.dump_optimizer) add_optimizer_state(fsdp, opt, r.params);
  rdzv->world()->barrier()->wait();
  return r;
}

void save_result(const TrainResult& r, const std::string& path) {
  std::vector<at::Tensor> tensors;
  tensors.push_back(at::tensor(r.losses, at::kDouble));
  tensors.push_back(at::tensor(r.grad_norms.empty() ? std::vector<double>{} : r.grad_norms, at::kDouble));
  for (const auto& [name, t] : r.params) tensors.push_back(t);
  torch::save(tensors, path);
  std::ofstream names(path + ".names");
  for (const auto& [name, t] : r.params) names << name << "\n";
}

TrainResult load_result(const std::string& path) {
  std::vector<at::Tensor> tensors;
  torch::load(tensors, path);
  std::ifstream names(path + ".names");
  TrainResult r;
  auto to_vec = [](const at::Tensor& t) {
    return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  };
  r.losses = to_vec(tensors.at(0));
  r.grad_norms = to_vec(tensors.at(1));
  std::string name;
  for (size_t i = 2; i < tensors.size() && std::getline(names, name); ++i) r.params[name] = tensors[i];
  return r;
}

}  // namespace gstest
