#include "worker/spec/job_spec.h"

#include "carbon/error.h"
#include "carbon/hardware.h"
#include "shard/object_store_url.h"
#include "shard/rank_env.h"
#include "shard/strategy_names.h"

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <variant>

extern char** environ;

namespace greenshard {
namespace {

using Target = std::variant<int64_t*, uint64_t*, double*, std::string*, bool*>;

struct Field {
  const char* path;
  const char* help;
  std::function<Target(JobConfig&)> target;
};

#define GS_FIELD(path, member, help) \
  Field { path, help, [](JobConfig& c) -> Target { return &c.member; } }

const std::vector<Field>& fields() {
  static const std::string strategy_help = shard::sharding_strategy_names(" | ");
  static const std::vector<Field> f = {
      GS_FIELD("model.layers", model.layers, "transformer blocks (each an FSDP unit)"),
      GS_FIELD("model.heads", model.heads, "attention heads (must divide model.embd)"),
      GS_FIELD("model.embd", model.embd, "model width"),
      GS_FIELD("model.context", model.context, "sequence length trained on (block size)"),
      GS_FIELD("model.vocab", model.vocab, "vocabulary size (256 for the byte tokenizer)"),
      GS_FIELD("model.dropout", model.dropout, "dropout in [0, 1)"),
      GS_FIELD("model.attention", model.attention, "auto (sdpa with LibTorch >= 2, else explicit) | sdpa (LibTorch's scaled-dot-product attention: flash on CUDA) | explicit (matmuls, fp32 softmax)"),
      GS_FIELD("data.train", data.train, "training tokens: a token file or a glob of shards, e.g. data/train-*.bin (greenshard-worker prepare)"),
      GS_FIELD("data.val", data.val, "validation tokens: a token file or a glob of shards (optional)"),
      GS_FIELD("data.seed", data.seed, "sampling seed; batches are a function of (seed, step, rank)"),
      GS_FIELD("optimizer.lr", optimizer.lr, "peak learning rate (AdamW)"),
      GS_FIELD("optimizer.min_lr", optimizer.min_lr, "learning rate at the end of the cosine decay"),
      GS_FIELD("optimizer.warmup_steps", optimizer.warmup_steps, "linear warm-up steps"),
      GS_FIELD("optimizer.weight_decay", optimizer.weight_decay, "AdamW weight decay"),
      GS_FIELD("optimizer.beta1", optimizer.beta1, "AdamW beta1"),
      GS_FIELD("optimizer.beta2", optimizer.beta2, "AdamW beta2"),
      GS_FIELD("optimizer.eps", optimizer.eps, "AdamW epsilon"),
      GS_FIELD("optimizer.grad_clip", optimizer.grad_clip, "global gradient-norm clip (0 = off)"),
      GS_FIELD("schedule.steps", schedule.steps, "optimizer steps in the whole run"),
      GS_FIELD("schedule.batch_size", schedule.batch_size, "sequences per rank per micro-batch"),
      GS_FIELD("schedule.grad_accum", schedule.grad_accum, "micro-batches per step (gradient accumulation)"),
      GS_FIELD("schedule.eval_interval", schedule.eval_interval, "steps between validation losses (0 = never)"),
      GS_FIELD("schedule.eval_batches", schedule.eval_batches, "batches per validation loss"),
      GS_FIELD("sharding.strategy", sharding.strategy, strategy_help.c_str()),
      GS_FIELD("sharding.param_dtype", sharding.param_dtype, "auto (bfloat16 on CUDA, float32 on the CPU) | float32 | bfloat16 (compute; master shards and reductions stay fp32)"),
      GS_FIELD("sharding.limit_all_gathers", sharding.limit_all_gathers, "units prefetched ahead (rate limiter)"),
      GS_FIELD("sharding.hybrid_group_size", sharding.hybrid_group_size, "HYBRID_SHARD shard-group size (0 = local world)"),
      GS_FIELD("sharding.activation_checkpointing", sharding.activation_checkpointing, "recompute every block in backward"),
      GS_FIELD("sharding.cpu_offload", sharding.cpu_offload, "keep shards and optimizer state in host memory"),
      GS_FIELD("sharding.timeout_s", sharding.timeout_s, "deadline of every collective, seconds"),
      GS_FIELD("checkpoint.dir", checkpoint.dir, "checkpoint root: a directory or s3://bucket/prefix ('' = none); env GREENSHARD_CHECKPOINT_DIR"),
      GS_FIELD("checkpoint.interval", checkpoint.interval, "steps between checkpoints (also saved on SIGTERM and at the end)"),
      GS_FIELD("checkpoint.keep_last", checkpoint.keep_last, "DONE checkpoints kept (0 = all)"),
      GS_FIELD("checkpoint.resume", checkpoint.resume, "resume from the newest DONE checkpoint in checkpoint.dir"),
      GS_FIELD("checkpoint.async", checkpoint.async, "interval saves write in the background; training waits only for the copy to host memory"),
      GS_FIELD("metrics.port", metrics.port, "Prometheus /metrics on port + rank (0 = off); env GREENSHARD_METRICS_PORT"),
      GS_FIELD("metrics.bind", metrics.bind, "address the exporter binds"),
      GS_FIELD("carbon.region", carbon.region, "grid region label; env GREENSHARD_REGION"),
      GS_FIELD("carbon.gco2_per_kwh", carbon.gco2_per_kwh, "grid intensity (constant); env GREENSHARD_GRID_INTENSITY"),
      GS_FIELD("carbon.intensity_url", carbon.intensity_url, "GET {\"gco2_per_kwh\": x} every carbon.intensity_poll_s (bearer status.token); env GREENSHARD_INTENSITY_URL"),
      GS_FIELD("carbon.intensity_poll_s", carbon.intensity_poll_s, "seconds between intensity_url polls; env GREENSHARD_INTENSITY_POLL_S"),
      GS_FIELD("carbon.pue", carbon.pue, "data-centre PUE >= 1; env GREENSHARD_PUE"),
      GS_FIELD("carbon.hardware", carbon.hardware, "hardware profile for the embodied term: auto (from the GPU's name, cpu-2s on the CPU), h100-sxm-8, h200-sxm-8, a100-sxm-8, cpu-2s"),
      GS_FIELD("carbon.cpu_tdp_watts", carbon.cpu_tdp_watts, "the host's CPU power at full load, for the modelled estimate when RAPL is unreadable (shared by the local ranks)"),
      GS_FIELD("carbon.resources", carbon.resources, "GPUs (or CPU sockets) each rank reserves"),
      GS_FIELD("log.format", log.format, "text | json (one JSON object per line)"),
      GS_FIELD("log.every", log.every, "steps between log lines"),
      GS_FIELD("status.url", status.url, "rank 0 POSTs progress here; env GREENSHARD_STATUS_URL"),
      GS_FIELD("status.token", status.token, "bearer token for status.url; env GREENSHARD_STATUS_TOKEN"),
      GS_FIELD("status.interval_s", status.interval_s, "seconds between status pushes"),
      GS_FIELD("device", device, "auto (CUDA device LOCAL_RANK when the build and the node have GPUs, else cpu) | cpu | cuda; env GREENSHARD_DEVICE"),
      GS_FIELD("peak_flops", peak_flops, "peak FLOP/s of one rank's device, for MFU (0 = the GPU's dense peak for the compute dtype; 1e12 on the CPU)"),
      GS_FIELD("summary_path", summary_path, "final JSON summary (rank 0); env GREENSHARD_SUMMARY_PATH"),
      GS_FIELD("termination_log", termination_log, "rank 0 also writes a compact summary here, < 4096 bytes (Kubernetes terminationMessagePath); env GREENSHARD_TERMINATION_LOG"),
      GS_FIELD("job_id", job_id, "job label on metrics and logs; env GREENSHARD_JOB_ID"),
      GS_FIELD("export_path", export_path, "consolidated state dict written at the end ('' = none)"),
      GS_FIELD("export_format", export_format, "libtorch (torch::serialize archive) | torch_save (Python torch.load reads it)"),
  };
  return f;
}

const Field* find_field(const std::string& path) {
  for (const auto& f : fields())
    if (path == f.path) return &f;
  return nullptr;
}

[[noreturn]] void bad(const std::string& origin, const std::string& field, const std::string& why) {
  throw ConfigError((origin.empty() ? "" : origin + ": ") + field + ": " + why, field);
}

// Strings go into the resolved config's JSON (to_json), which must be UTF-8.
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c >> 6) != 2) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

void set_from_text(JobConfig& c, const Field& f, const std::string& v, const std::string& origin) {
  Target t = f.target(c);
  if (std::holds_alternative<std::string*>(t) && !valid_utf8(v)) bad(origin, f.path, "expected UTF-8 text");
  try {
    size_t pos = 0;
    if (auto* p = std::get_if<int64_t*>(&t)) {
      int64_t x = std::stoll(v, &pos);
      if (pos != v.size()) throw std::invalid_argument("");
      **p = x;
    } else if (auto* p = std::get_if<uint64_t*>(&t)) {
      if (!v.empty() && v[0] == '-') throw std::invalid_argument("");
      uint64_t x = std::stoull(v, &pos);
      if (pos != v.size()) throw std::invalid_argument("");
      **p = x;
    } else if (auto* p = std::get_if<double*>(&t)) {
      double x = std::stod(v, &pos);
      if (pos != v.size() || !std::isfinite(x)) throw std::invalid_argument("");
      **p = x;
    } else if (auto* p = std::get_if<bool*>(&t)) {
      if (v == "true" || v == "1") **p = true;
      else if (v == "false" || v == "0") **p = false;
      else throw std::invalid_argument("");
    } else {
      *std::get<std::string*>(t) = v;
    }
  } catch (const std::exception&) {
    const char* type = std::holds_alternative<int64_t*>(t)    ? "an integer"
                       : std::holds_alternative<uint64_t*>(t) ? "a non-negative integer"
                       : std::holds_alternative<double*>(t)   ? "a number"
                                                              : "true or false";
    bad(origin, f.path, std::string("expected ") + type + ", got '" + v + "'");
  }
}

std::string type_name(const Target& t) {
  if (std::holds_alternative<int64_t*>(t)) return "int";
  if (std::holds_alternative<uint64_t*>(t)) return "uint";
  if (std::holds_alternative<double*>(t)) return "number";
  if (std::holds_alternative<bool*>(t)) return "bool";
  return "string";
}

std::string value_text(const Target& t) {
  std::ostringstream os;
  std::visit([&](auto* p) { os << *p; }, t);
  std::string s = os.str();
  if (std::holds_alternative<bool*>(t)) s = *std::get<bool*>(t) ? "true" : "false";
  return s;
}

void walk(JobConfig& c, const YAML::Node& node, const std::string& prefix, const std::string& origin) {
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) bad(origin, prefix.empty() ? "(top level)" : prefix, "a key that is not a string");
    const std::string key = kv.first.as<std::string>();
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (kv.second.IsMap()) {
      bool is_section = false;
      for (const auto& f : fields())
        if (std::string(f.path).rfind(path + ".", 0) == 0) is_section = true;
      if (!is_section) bad(origin, path, find_field(path) ? "expected a value, got a mapping" : "unknown field");
      walk(c, kv.second, path, origin);
      continue;
    }
    const Field* f = find_field(path);
    if (!f) bad(origin, path, "unknown field");
    if (!kv.second.IsScalar()) bad(origin, path, "expected a value, got a list or null");
    set_from_text(c, *f, kv.second.Scalar(), origin);
  }
}

}  // namespace

std::vector<FieldDoc> config_fields() {
  JobConfig defaults;
  std::vector<FieldDoc> out;
  for (const auto& f : fields()) {
    Target t = f.target(defaults);
    out.push_back({f.path, type_name(t), value_text(t), f.help});
  }
  return out;
}

void apply_config_text(JobConfig& c, const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ": not valid JSON or YAML: " + e.what());
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) throw ConfigError(origin + ": expected a mapping of sections at the top level");
  walk(c, root, "", origin);
}

void apply_config_file(JobConfig& c, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("--config: cannot read '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  apply_config_text(c, ss.str(), path);
}

void apply_field(JobConfig& c, const std::string& path, const std::string& value, const std::string& origin) {
  const Field* f = find_field(path);
  if (!f) throw ConfigError(origin + ": unknown field '" + path + "'", path);
  set_from_text(c, *f, value, origin);
}

void apply_environment(JobConfig& c, const std::map<std::string, std::string>& env) {
  static const std::pair<const char*, const char*> kVars[] = {
      {"GREENSHARD_JOB_ID", "job_id"},
      {"GREENSHARD_CHECKPOINT_DIR", "checkpoint.dir"},
      {"GREENSHARD_SUMMARY_PATH", "summary_path"},
      {"GREENSHARD_TERMINATION_LOG", "termination_log"},
      {"GREENSHARD_METRICS_PORT", "metrics.port"},
      {"GREENSHARD_REGION", "carbon.region"},
      {"GREENSHARD_GRID_INTENSITY", "carbon.gco2_per_kwh"},
      {"GREENSHARD_INTENSITY_URL", "carbon.intensity_url"},
      {"GREENSHARD_INTENSITY_POLL_S", "carbon.intensity_poll_s"},
      {"GREENSHARD_PUE", "carbon.pue"},
      {"GREENSHARD_STATUS_URL", "status.url"},
      {"GREENSHARD_STATUS_TOKEN", "status.token"},
      {"GREENSHARD_DEVICE", "device"},
  };
  for (const auto& [var, path] : kVars) {
    auto it = env.find(var);
    if (it != env.end()) apply_field(c, path, it->second, std::string("environment ") + var);
  }
}

void validate(const JobConfig& c) {
  auto need = [](bool ok, const char* field, const std::string& why) {
    if (!ok) throw ConfigError(std::string(field) + ": " + why, field);
  };
  need(c.model.layers >= 1, "model.layers", "must be >= 1");
  need(c.model.heads >= 1, "model.heads", "must be >= 1");
  need(c.model.embd >= 1 && c.model.embd % c.model.heads == 0, "model.embd", "must be >= 1 and divisible by model.heads");
  need(c.model.context >= 2, "model.context", "must be >= 2");
  need(c.model.vocab >= 2 && c.model.vocab <= kMaxVocab, "model.vocab", "must be in [2, " + std::to_string(kMaxVocab) + "]");
  need(c.model.dropout >= 0 && c.model.dropout < 1, "model.dropout", "must be in [0, 1)");
  // A file or a glob of shards. Whether it exists is the worker's check at
  // start (TokenDataset), not this one's: the controller validates specs
  // without the worker's files.
  need(!c.data.train.empty(), "data.train", "required (a token file or a glob of shards from 'greenshard-worker prepare')");
  need(c.optimizer.lr > 0, "optimizer.lr", "must be > 0");
  need(c.optimizer.min_lr >= 0 && c.optimizer.min_lr <= c.optimizer.lr, "optimizer.min_lr", "must be in [0, optimizer.lr]");
  need(c.optimizer.warmup_steps >= 0, "optimizer.warmup_steps", "must be >= 0");
  need(c.optimizer.weight_decay >= 0, "optimizer.weight_decay", "must be >= 0");
  need(c.optimizer.beta1 >= 0 && c.optimizer.beta1 < 1, "optimizer.beta1", "must be in [0, 1)");
  need(c.optimizer.beta2 >= 0 && c.optimizer.beta2 < 1, "optimizer.beta2", "must be in [0, 1)");
  need(c.optimizer.eps > 0, "optimizer.eps", "must be > 0");
  need(c.optimizer.grad_clip >= 0, "optimizer.grad_clip", "must be >= 0");
  need(c.schedule.steps >= 1, "schedule.steps", "must be >= 1");
  need(c.schedule.batch_size >= 1, "schedule.batch_size", "must be >= 1");
  need(c.schedule.grad_accum >= 1, "schedule.grad_accum", "must be >= 1");
  need(c.schedule.eval_interval >= 0, "schedule.eval_interval", "must be >= 0");
  need(c.schedule.eval_batches >= 1, "schedule.eval_batches", "must be >= 1");
  // The names shard/ parses (case-insensitive, shard/strategy_names.h).
  need(shard::find_sharding_strategy(c.sharding.strategy).has_value(), "sharding.strategy",
       "must be " + shard::sharding_strategy_names() + ", got '" + c.sharding.strategy + "'");
  need(c.sharding.param_dtype == "auto" || c.sharding.param_dtype == "float32" || c.sharding.param_dtype == "bfloat16",
       "sharding.param_dtype", "must be auto, float32 or bfloat16, got '" + c.sharding.param_dtype + "'");
  need(c.model.attention == "auto" || c.model.attention == "sdpa" || c.model.attention == "explicit", "model.attention",
       "must be auto, sdpa or explicit, got '" + c.model.attention + "'");
  need(c.device == "auto" || c.device == "cpu" || c.device == "cuda", "device",
       "must be auto, cpu or cuda, got '" + c.device + "'");
  need(c.sharding.limit_all_gathers >= 1, "sharding.limit_all_gathers", "must be >= 1");
  need(c.sharding.hybrid_group_size >= 0, "sharding.hybrid_group_size", "must be >= 0");
  need(c.sharding.timeout_s > 0, "sharding.timeout_s", "must be > 0");
  need(c.checkpoint.interval >= 1, "checkpoint.interval", "must be >= 1");
  need(c.checkpoint.keep_last >= 0, "checkpoint.keep_last", "must be >= 0");
  if (shard::is_object_store_url(c.checkpoint.dir)) {
    try {
      shard::parse_object_store_url(c.checkpoint.dir);
    } catch (const std::invalid_argument& e) {
      need(false, "checkpoint.dir", e.what());
    }
  }
  need(c.metrics.port >= 0 && c.metrics.port <= 65535, "metrics.port", "must be in [0, 65535]");
  need(c.carbon.gco2_per_kwh >= 0, "carbon.gco2_per_kwh", "must be >= 0");
  need(c.carbon.pue >= 1.0, "carbon.pue", "must be >= 1.0");
  try {
    if (c.carbon.hardware != "auto") carbon::hardware_profile(c.carbon.hardware);
  } catch (const carbon::CarbonError& e) {
    need(false, "carbon.hardware", e.what());  // "unknown hardware profile 'x' (known: ...)"
  }
  need(c.carbon.cpu_tdp_watts > 0, "carbon.cpu_tdp_watts", "must be > 0");
  need(c.carbon.resources > 0, "carbon.resources", "must be > 0");
  need(c.log.format == "text" || c.log.format == "json", "log.format", "must be text or json, got '" + c.log.format + "'");
  need(c.log.every >= 1, "log.every", "must be >= 1");
  need(c.export_format == "libtorch" || c.export_format == "torch_save", "export_format",
       "must be libtorch or torch_save, got '" + c.export_format + "'");
  need(c.status.interval_s > 0, "status.interval_s", "must be > 0");
  need(c.peak_flops >= 0, "peak_flops", "must be >= 0 (0 = from the device)");
  need(!c.job_id.empty() && c.job_id.size() <= 128, "job_id", "must be 1..128 characters");
  if (!c.status.url.empty())
    need(c.status.url.rfind("http://", 0) == 0 || c.status.url.rfind("https://", 0) == 0, "status.url",
         "must start with http:// or https://");
  need(c.carbon.intensity_poll_s > 0 && c.carbon.intensity_poll_s <= 86400, "carbon.intensity_poll_s",
       "must be in (0, 86400]");
  if (!c.carbon.intensity_url.empty())
    need(c.carbon.intensity_url.rfind("http://", 0) == 0 || c.carbon.intensity_url.rfind("https://", 0) == 0,
         "carbon.intensity_url", "must start with http:// or https://");
}

std::string to_json(const JobConfig& c_in, int indent) {
  JobConfig c = c_in;
  nlohmann::ordered_json j;
  for (const auto& f : fields()) {
    Target t = f.target(c);
    nlohmann::ordered_json* node = &j;
    std::string path = f.path;
    size_t dot;
    while ((dot = path.find('.')) != std::string::npos) {
      node = &(*node)[path.substr(0, dot)];
      path = path.substr(dot + 1);
    }
    std::visit([&](auto* p) { (*node)[path] = *p; }, t);
  }
  nlohmann::ordered_json redacted = j;
  if (!c.status.token.empty()) redacted["status"]["token"] = "<redacted>";
  return redacted.dump(indent);
}

LaunchPlan resolve_launch(const std::map<std::string, std::string>& env, int nproc_flag) {
  auto get = [&](const char* k) -> const std::string* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : &it->second;
  };
  auto as_int = [&](const char* k, int lo) {
    const std::string* v = get(k);
    try {
      size_t pos = 0;
      int x = std::stoi(*v, &pos);
      if (pos != v->size() || x < lo) throw std::invalid_argument("");
      return x;
    } catch (...) {
      throw ConfigError(std::string("environment ") + k + ": expected an integer >= " + std::to_string(lo) +
                        ", got '" + *v + "'");
    }
  };
  LaunchPlan p;
  if (get(kPetNnodesVar) && !get(kPetNnodesVar)->empty()) {
    // Kubernetes (Indexed Job): one process per pod starts the local ranks.
    p.nnodes = as_int(kPetNnodesVar, 1);
    p.nproc_per_node = get(kPetNprocPerNodeVar) ? as_int(kPetNprocPerNodeVar, 1) : 1;
    if (get(kPetNodeRankVar)) p.node_rank = as_int(kPetNodeRankVar, 0);
    else if (get(kJobCompletionIndexVar)) p.node_rank = as_int(kJobCompletionIndexVar, 0);
    else throw ConfigError("environment PET_NODE_RANK: required with PET_NNODES (or JOB_COMPLETION_INDEX)");
    if (p.node_rank >= p.nnodes)
      throw ConfigError("environment PET_NODE_RANK: " + std::to_string(p.node_rank) + " is not below PET_NNODES " +
                        std::to_string(p.nnodes));
    const std::string* addr = get(kPetMasterAddrVar) ? get(kPetMasterAddrVar) : get(shard::kMasterAddrVar);
    if (!addr || addr->empty()) throw ConfigError("environment PET_MASTER_ADDR: required with PET_NNODES");
    p.master_addr = *addr;
    p.master_port = get(kPetMasterPortVar) ? as_int(kPetMasterPortVar, 1) : get(shard::kMasterPortVar) ? as_int(shard::kMasterPortVar, 1) : 29500;
    if (p.master_port > 65535) throw ConfigError("environment PET_MASTER_PORT: must be <= 65535");
    p.spawn_local = true;
    return p;
  }
  if (get(shard::kRankVar) || get(shard::kWorldSizeVar)) {
    if (nproc_flag > 0) throw ConfigError("--nproc: not allowed when RANK/WORLD_SIZE are set (already one rank of a gang)");
    return p;  // torchrun-style: this process is one rank (validated by shard's rendezvous)
  }
  if (nproc_flag > 0) {
    p.spawn_local = true;
    p.nproc_per_node = nproc_flag;
    p.master_addr = "127.0.0.1";
    return p;
  }
  p.standalone = true;
  return p;
}

std::map<std::string, std::string> environment_map() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::string config_error_in(const std::string& text, size_t max_bytes) {
  const std::string prefix = kConfigErrorPrefix;
  std::string found;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind(prefix, 0) == 0 && line.size() > prefix.size()) found = line.substr(prefix.size());
  }
  if (found.size() > max_bytes) found = found.substr(0, max_bytes >= 3 ? max_bytes - 3 : 0) + "...";
  return found;
}

}  // namespace greenshard
