#include "worker/sample.h"

#include "shard/checkpoint.h"
#include "shard/fully_shard.h"
#include "shard/launch.h"
#include "shard/policy.h"
#include "shard/rendezvous.h"
#include "worker/spec/job_spec.h"

#include <ATen/CPUGeneratorImpl.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <ostream>
#include <regex>
#include <stdexcept>

namespace greenshard {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void bad_flag(const std::string& flag, const std::string& what) {
  throw ConfigError("sample: " + flag + ": " + what, flag);
}

GPTConfig config_of(const ModelCard& card) {
  return gpt_config(card, /*dropout=*/0.0, Attention::kExplicit);
}

// Builds the card's GPT as a one-rank FullyShardedModel (units as the
// trainer wraps them: one per block), runs `load` on it, and returns the
// full parameters in a plain, unsharded GPT.
GPT load_through_fsdp(const ModelCard& card, const std::function<void(shard::FullyShardedModel&)>& load) {
  const GPTConfig gc = config_of(card);
  std::map<std::string, at::Tensor> full;
  {
    GPT sharded(gc, /*deferred=*/true);
    shard::FullyShardOptions so;
    so.wrap = shard::WrapPolicy::by_type<BlockImpl>();
    so.param_init = sharded->param_init();
    so.sync_module_states = false;
    shard::RendezvousInfo info{"127.0.0.1", shard::free_loopback_port(), 0, 1, 0, 1};
    auto rdzv = shard::Rendezvous::connect(info);
    shard::FullyShardedModel fsdp(sharded.ptr(), rdzv, so);
    load(fsdp);
    full = fsdp.full_parameters();
  }
  GPT model(gc);
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters(/*recurse=*/true)) {
    auto it = full.find(p.key());
    if (it == full.end()) throw std::logic_error("sample: no value loaded for parameter " + p.key());
    p.value().copy_(it->second.to(at::kFloat));
  }
  model->eval();
  return model;
}

// "…/step_00000012" (a local path or an S3 URL): one checkpoint, not a root.
bool is_step_dir(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const auto slash = dir.rfind('/');
  const std::string base = slash == std::string::npos ? dir : dir.substr(slash + 1);
  return std::regex_match(base, std::regex("step_[0-9]+"));
}

ModelCard card_from_extra(const std::string& extra, const std::string& dir) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(extra);
  } catch (const nlohmann::json::exception&) {
    throw std::runtime_error("checkpoint " + dir + ": its record is not JSON (not written by greenshard-worker?)");
  }
  if (!j.is_object() || !j.contains("card") || !j["card"].is_object()) {
    throw std::runtime_error("checkpoint " + dir +
                             ": its record holds no model card (saved by an older greenshard-worker?); "
                             "sample an export (--export) instead");
  }
  return model_card_from_json(j["card"].dump(), dir + " (checkpoint record \"card\")");
}

// The next token from logits (V) fp32.
int64_t pick(at::Tensor logits, const GenerateOptions& g, at::Generator& gen) {
  const int64_t V = logits.size(0);
  if (g.allowed_vocab > 0 && g.allowed_vocab < V)
    logits.narrow(0, g.allowed_vocab, V - g.allowed_vocab).fill_(-std::numeric_limits<double>::infinity());
  if (g.temperature == 0.0) return logits.argmax().item<int64_t>();
  logits = logits / g.temperature;
  if (g.top_k > 0 && g.top_k < V) {
    // Everything below the k-th largest value -> -inf (ties at the k-th stay).
    const at::Tensor kth = std::get<0>(logits.topk(g.top_k)).select(0, g.top_k - 1);
    logits = logits.masked_fill(logits < kth, -std::numeric_limits<double>::infinity());
  }
  const at::Tensor probs = at::softmax(logits, 0);
  return at::multinomial(probs, 1, /*replacement=*/false, gen).item<int64_t>();
}

at::Tensor row(const std::vector<int64_t>& tokens, size_t from) {
  std::vector<int64_t> part(tokens.begin() + static_cast<std::ptrdiff_t>(from), tokens.end());
  // (1, T)
  return at::tensor(part, at::kLong).view({1, -1});
}

}  // namespace

CLI::App* add_sample_command(CLI::App& app, SampleOptions& o) {
  auto* s = app.add_subcommand("sample", "generate text from a checkpoint or an export (KV cache, CPU)");
  s->add_option("--checkpoint", o.checkpoint, "checkpoint root (its newest DONE checkpoint) or step directory, local or s3://");
  s->add_option("--export", o.export_path, "consolidated state dict (export_full_state_dict), model card at FILE.json");
  s->add_option("--prompt", o.prompt, "text the generation starts from (fewer tokens than the context)")->required();
  s->add_option("--tokens", o.tokens, "how many tokens to generate (>= 1)")->required();
  s->add_option("--temperature", o.temperature, "softmax temperature; 0 = greedy (argmax) [default 1.0]");
  s->add_option("--top-k", o.top_k, "draw among the K likeliest tokens; 0 = all [default 0]");
  s->add_option("--seed", o.seed, "seed of the sampling generator [default 1337]");
  s->add_option("--tokenizer-model", o.tokenizer_model,
                "SentencePiece .model to use instead of the card's path (same SHA-256)");
  return s;
}

SampleModel load_sample_model(const SampleOptions& o) {
  if (o.checkpoint.empty() == o.export_path.empty()) bad_flag("--checkpoint/--export", "give exactly one of them");
  SampleModel out;
  if (!o.export_path.empty()) {
    const std::string& file = o.export_path;
    if (!fs::is_regular_file(file)) bad_flag("--export", "no such file " + file);
    const std::string card_path = file + ".json";
    if (!fs::is_regular_file(card_path))
      throw std::runtime_error("sample: --export " + file + ": its model card " + card_path + " is missing");
    out.card = read_model_card(card_path);
    out.model = load_through_fsdp(out.card, [&](shard::FullyShardedModel& m) { shard::import_full_state_dict(m, file); });
    return out;
  }
  std::string dir = o.checkpoint;
  const bool s3 = dir.rfind("s3://", 0) == 0;
  if (!s3 && !fs::is_directory(dir)) bad_flag("--checkpoint", "no such directory " + dir);
  if (!is_step_dir(dir)) {
    const std::string latest = shard::latest_checkpoint(dir);
    if (latest.empty()) bad_flag("--checkpoint", dir + " holds no complete checkpoint (no step_* with a DONE marker)");
    dir = latest;
  }
  out.card = card_from_extra(shard::read_checkpoint_extra(dir), dir);
  out.model = load_through_fsdp(out.card, [&](shard::FullyShardedModel& m) { shard::load_checkpoint(m, nullptr, dir); });
  return out;
}

std::vector<int64_t> generate(GPTImpl& model, const std::vector<int64_t>& prompt, const GenerateOptions& g) {
  const int64_t context = model.config().block_size;
  const int64_t V = model.config().vocab_size;
  if (g.tokens < 1) throw std::invalid_argument("generate: tokens must be >= 1, got " + std::to_string(g.tokens));
  if (!(g.temperature >= 0.0) || !std::isfinite(g.temperature))
    throw std::invalid_argument("generate: temperature must be finite and >= 0");
  if (g.top_k < 0 || g.top_k > V)
    throw std::invalid_argument("generate: top_k must be in [0, " + std::to_string(V) + "], got " + std::to_string(g.top_k));
  if (g.allowed_vocab < 0 || g.allowed_vocab > V)
    throw std::invalid_argument("generate: allowed_vocab must be in [0, " + std::to_string(V) + "]");
  if (prompt.empty() || static_cast<int64_t>(prompt.size()) >= context) {
    throw std::invalid_argument("generate: the prompt must have 1 to " + std::to_string(context - 1) +
                                " tokens (context " + std::to_string(context) + "), got " +
                                std::to_string(prompt.size()));
  }
  for (int64_t t : prompt)
    if (t < 0 || t >= V) throw std::invalid_argument("generate: prompt token " + std::to_string(t) + " outside the vocabulary");

  torch::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(g.seed);
  KVCache cache = model.make_cache(1, context);
  std::vector<int64_t> seq = prompt;
  // (1, P, V) -> the last position's (V), fp32
  at::Tensor logits = model.forward_cached(row(seq, 0), cache).select(1, -1).select(0, 0).to(at::kFloat);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(g.tokens));
  for (int64_t i = 0; i < g.tokens; ++i) {
    const int64_t next = pick(logits, g, gen);
    seq.push_back(next);
    out.push_back(next);
    if (i + 1 == g.tokens) break;
    at::Tensor step;
    if (cache.length == context) {
      // Full: slide the window to the newest tokens, positions from 0.
      cache.clear();
      step = model.forward_cached(row(seq, seq.size() - static_cast<size_t>(sample_window_keep(context))), cache);
    } else {
      step = model.forward_cached(row(seq, seq.size() - 1), cache);
    }
    logits = step.select(1, -1).select(0, 0).to(at::kFloat);
  }
  return out;
}

int run_sample(const SampleOptions& o, std::ostream& out) {
  // Flags first, before any file is read.
  if (o.checkpoint.empty() == o.export_path.empty()) bad_flag("--checkpoint/--export", "give exactly one of them");
  if (o.tokens < 1) bad_flag("--tokens", "must be at least 1, got " + std::to_string(o.tokens));
  if (!std::isfinite(o.temperature) || o.temperature < 0.0)
    bad_flag("--temperature", "must be finite and >= 0 (0 = greedy), got " + std::to_string(o.temperature));
  if (o.top_k < 0) bad_flag("--top-k", "must be >= 0 (0 = all tokens), got " + std::to_string(o.top_k));
  if (o.prompt.empty()) bad_flag("--prompt", "must not be empty");
  if (!o.tokenizer_model.empty() && !fs::is_regular_file(o.tokenizer_model))
    bad_flag("--tokenizer-model", "no such file " + o.tokenizer_model);

  SampleModel m = load_sample_model(o);
  const std::unique_ptr<Tokenizer> tok = open_tokenizer(m.card, o.tokenizer_model);
  if (o.top_k > m.card.vocab)
    bad_flag("--top-k", "must be at most the vocabulary (" + std::to_string(m.card.vocab) + "), got " + std::to_string(o.top_k));

  const std::vector<uint32_t> encoded = tok->encode(o.prompt);
  if (encoded.empty()) bad_flag("--prompt", "encodes to no tokens");
  if (static_cast<int64_t>(encoded.size()) >= m.card.context) {
    bad_flag("--prompt", "has " + std::to_string(encoded.size()) + " tokens; the model's context is " +
                             std::to_string(m.card.context) + " (at most " + std::to_string(m.card.context - 1) + ")");
  }
  std::vector<int64_t> prompt(encoded.begin(), encoded.end());
  GenerateOptions g;
  g.tokens = o.tokens;
  g.temperature = o.temperature;
  g.top_k = o.top_k;
  g.seed = o.seed;
  g.allowed_vocab = tok->vocab();
  const std::vector<int64_t> generated = generate(*m.model, prompt, g);

  // The prompt as given, then the continuation's text: the text of prompt +
  // generated past the prompt's own text where it extends it (a
  // SentencePiece piece may join the prompt's last word), else the
  // generated tokens decoded alone.
  std::vector<uint32_t> all(encoded);
  for (int64_t t : generated) all.push_back(static_cast<uint32_t>(t));
  const std::string prompt_text = tok->decode(encoded);
  const std::string all_text = tok->decode(all);
  std::string continuation;
  if (all_text.compare(0, prompt_text.size(), prompt_text) == 0) {
    continuation = all_text.substr(prompt_text.size());
  } else {
    continuation = tok->decode(std::vector<uint32_t>(all.begin() + static_cast<std::ptrdiff_t>(encoded.size()), all.end()));
  }
  out << o.prompt << continuation << "\n";
  out.flush();
  return 0;
}

}  // namespace greenshard
