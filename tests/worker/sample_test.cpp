// `greenshard-worker sample`: the KV cache gives forward()'s logits; greedy
// decoding is argmax of forward() again and again; sampling is a function
// of the seed; run_sample reads exports (both formats) and checkpoints
// (root or step directory) and rejects bad flags and files by name.
#include "common/spawn.h"
#include "shard/checkpoint.h"
#include "shard/fully_shard.h"
#include "shard/policy.h"
#include "shard/rendezvous.h"
#include "worker/spec/job_spec.h"
#include "worker/model.h"
#include "worker/model_card.h"
#include "worker/sample.h"

#include <ATen/CPUGeneratorImpl.h>
#include <CLI/CLI.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using greenshard::GPT;
using greenshard::GPTConfig;

GPTConfig small_config(int64_t vocab = 50, int64_t context = 16) {
  GPTConfig gc;
  gc.vocab_size = vocab;
  gc.block_size = context;
  gc.n_layer = 2;
  gc.n_head = 2;
  gc.n_embd = 16;
  return gc;
}

// Larger weights than the GPT-2 initialization, so that the distributions
// are far from uniform and greedy choices are clear.
GPT random_model(const GPTConfig& gc, uint64_t seed) {
  torch::manual_seed(seed);
  GPT model(gc);
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
  for (auto& p : model->named_parameters(true))
    if (p.key().find("ln_") == std::string::npos) p.value().normal_(0.0, 0.3, gen);
  model->eval();
  return model;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

at::Tensor random_tokens(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(vocab, {B, T}, gen, at::kLong);
}

// ---------------------------------------------------------------------------
// KV cache

class KVCacheParity : public ::testing::TestWithParam<greenshard::Attention> {};

TEST_P(KVCacheParity, ChunksThroughTheCacheGiveForwardsLogitsAtTheirPositions) {
  GPTConfig gc = small_config();
  gc.attention = GetParam();
  GPT model = random_model(gc, 11);
  const at::Tensor idx = random_tokens(2, gc.block_size, gc.vocab_size, 5);
  at::Tensor full;
  {
    torch::NoGradGuard no_grad;
    full = model->forward(idx);  // (2, 16, V)
  }
  auto cache = model->make_cache(2);
  EXPECT_EQ(cache.capacity(), gc.block_size);
  // A prompt of 5, then one at a time, then 3, then the rest: 5+1+1+1+3+5 = 16.
  int64_t at = 0;
  for (int64_t n : {5, 1, 1, 1, 3, 5}) {
    const at::Tensor out = model->forward_cached(idx.narrow(1, at, n), cache);
    ASSERT_EQ(out.sizes().vec(), (std::vector<int64_t>{2, n, gc.vocab_size}));
    EXPECT_LE(max_abs_diff(out, full.narrow(1, at, n)), 1e-5) << "positions " << at << ".." << at + n - 1;
    at += n;
    EXPECT_EQ(cache.length, at);
  }
  // Full: one more position is refused and the cache stays as it was.
  EXPECT_THROW(model->forward_cached(idx.narrow(1, 0, 1), cache), std::invalid_argument);
  EXPECT_EQ(cache.length, gc.block_size);
  // clear() starts again at position 0.
  cache.clear();
  EXPECT_LE(max_abs_diff(model->forward_cached(idx.narrow(1, 0, 4), cache), full.narrow(1, 0, 4)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Attention, KVCacheParity,
                         ::testing::Values(greenshard::Attention::kExplicit, greenshard::Attention::kSdpa),
                         [](const auto& info) { return std::string(greenshard::to_string(info.param)); });

TEST(KVCache, RejectsBadShapesAndCapacities) {
  GPTConfig gc = small_config();
  GPT model = random_model(gc, 1);
  EXPECT_THROW(model->make_cache(0), std::invalid_argument);
  EXPECT_THROW(model->make_cache(1, gc.block_size + 1), std::invalid_argument);
  auto cache = model->make_cache(1, 4);
  EXPECT_EQ(cache.capacity(), 4);
  EXPECT_THROW(model->forward_cached(random_tokens(2, 2, gc.vocab_size, 1), cache), std::invalid_argument);  // batch
  EXPECT_THROW(model->forward_cached(random_tokens(1, 5, gc.vocab_size, 1), cache), std::invalid_argument);  // > 4
  EXPECT_THROW(model->forward_cached(at::zeros({3}, at::kLong), cache), std::invalid_argument);             // 1-D
  EXPECT_EQ(cache.length, 0);
}

// ---------------------------------------------------------------------------
// generate()

// Greedy decoding without a cache, by the sliding rule sample.h documents:
// the model sees at most `context` tokens; when one more would not fit,
// the window restarts at the newest sample_window_keep(context) tokens.
std::vector<int64_t> greedy_by_forward(GPT& model, std::vector<int64_t> seq, int64_t n) {
  torch::NoGradGuard no_grad;
  const int64_t context = model->config().block_size;
  size_t start = 0;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    if (static_cast<int64_t>(seq.size() - start) > context)
      start = seq.size() - static_cast<size_t>(greenshard::sample_window_keep(context));
    std::vector<int64_t> window(seq.begin() + static_cast<std::ptrdiff_t>(start), seq.end());
    const at::Tensor logits = model->forward(at::tensor(window, at::kLong).view({1, -1}));
    const int64_t next = logits.select(1, -1).select(0, 0).argmax().item<int64_t>();
    seq.push_back(next);
    out.push_back(next);
  }
  return out;
}

TEST(Generate, GreedyIsArgmaxOfForwardRepeatedWithinAndBeyondTheContext) {
  GPTConfig gc = small_config();
  GPT model = random_model(gc, 21);
  const std::vector<int64_t> prompt{3, 14, 15, 9, 2};
  greenshard::GenerateOptions g;
  g.temperature = 0.0;
  g.tokens = 8;  // within the context: 5 + 8 <= 16
  EXPECT_EQ(greenshard::generate(*model, prompt, g), greedy_by_forward(model, prompt, 8));
  g.tokens = 40;  // the window slides (twice and more)
  EXPECT_EQ(greenshard::generate(*model, prompt, g), greedy_by_forward(model, prompt, 40));
  // top-k 1 is greedy whatever the temperature and seed.
  g.temperature = 1.7;
  g.top_k = 1;
  g.seed = 99;
  EXPECT_EQ(greenshard::generate(*model, prompt, g), greedy_by_forward(model, prompt, 40));
}

TEST(Generate, SameSeedSameTokensOtherSeedOtherTokens) {
  GPTConfig gc = small_config();
  GPT model = random_model(gc, 31);
  const std::vector<int64_t> prompt{1, 2, 3};
  greenshard::GenerateOptions g;
  g.tokens = 40;
  g.temperature = 1.0;
  g.seed = 7;
  const auto a = greenshard::generate(*model, prompt, g);
  EXPECT_EQ(greenshard::generate(*model, prompt, g), a);
  g.seed = 8;
  EXPECT_NE(greenshard::generate(*model, prompt, g), a);
  // top-k 3: only tokens among the 3 likeliest at their step.
  g.top_k = 3;
  const auto k = greenshard::generate(*model, prompt, g);
  std::vector<int64_t> seq = prompt;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < k.size(); ++i) {
    if (static_cast<int64_t>(seq.size()) > gc.block_size) break;  // (checked within the first window)
    const at::Tensor logits = model->forward(at::tensor(seq, at::kLong).view({1, -1})).select(1, -1).select(0, 0);
    const at::Tensor top = std::get<1>(logits.topk(3));
    EXPECT_TRUE((top == k[i]).any().item<bool>()) << "step " << i << " drew " << k[i];
    seq.push_back(k[i]);
  }
}

TEST(Generate, NeverDrawsTokensBeyondAllowedVocab) {
  GPTConfig gc = small_config(/*vocab=*/50);
  GPT model = random_model(gc, 41);
  greenshard::GenerateOptions g;
  g.tokens = 200;
  g.temperature = 5.0;  // flat: every token likely
  g.allowed_vocab = 10;
  for (int64_t t : greenshard::generate(*model, {1}, g)) EXPECT_LT(t, 10);
}

TEST(Generate, RejectsBadOptions) {
  GPTConfig gc = small_config();
  GPT model = random_model(gc, 1);
  greenshard::GenerateOptions g;
  EXPECT_THROW(greenshard::generate(*model, {}, g), std::invalid_argument);
  EXPECT_THROW(greenshard::generate(*model, std::vector<int64_t>(gc.block_size, 1), g), std::invalid_argument);
  EXPECT_THROW(greenshard::generate(*model, {gc.vocab_size}, g), std::invalid_argument);
  g.tokens = 0;
  EXPECT_THROW(greenshard::generate(*model, {1}, g), std::invalid_argument);
  g.tokens = 1;
  g.top_k = gc.vocab_size + 1;
  EXPECT_THROW(greenshard::generate(*model, {1}, g), std::invalid_argument);
  g.top_k = 0;
  g.temperature = -1;
  EXPECT_THROW(greenshard::generate(*model, {1}, g), std::invalid_argument);
}

// ---------------------------------------------------------------------------
// run_sample on files

// A byte-level model (vocabulary 260 > 256: run_sample must never draw the
// 4 tokens the byte tokenizer cannot decode), context 32.
GPTConfig byte_config() { return small_config(/*vocab=*/260, /*context=*/32); }

greenshard::ModelCard card_of(const GPTConfig& gc) {
  greenshard::ModelCard c;
  c.layers = gc.n_layer;
  c.heads = gc.n_head;
  c.embd = gc.n_embd;
  c.context = gc.block_size;
  c.vocab = gc.vocab_size;
  return c;  // byte tokenizer
}

// Runs fn on `model` wrapped as a one-rank FullyShardedModel (units: blocks,
// as the trainer wraps them).
void with_fsdp(GPT& model, const std::function<void(shard::FullyShardedModel&)>& fn) {
  shard::RendezvousInfo info{"127.0.0.1", gstest::free_port(), 0, 1, 0, 1};
  auto rdzv = shard::Rendezvous::connect(info);
  shard::FullyShardOptions so;
  so.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
  shard::FullyShardedModel fsdp(model.ptr(), rdzv, so);
  fn(fsdp);
}

std::string sample_text(const greenshard::SampleOptions& o) {
  std::ostringstream out;
  EXPECT_EQ(greenshard::run_sample(o, out), 0);
  return out.str();
}

// What run_sample must print for a byte model: the prompt, then the greedy
// continuation computed here from the original weights.
std::string expected_greedy(GPT& model, const std::string& prompt, int64_t n) {
  std::vector<int64_t> p(prompt.begin(), prompt.end());
  for (auto& t : p) t = static_cast<unsigned char>(t);
  greenshard::GenerateOptions g;
  g.tokens = n;
  g.temperature = 0.0;
  g.allowed_vocab = 256;
  std::string text = prompt;
  for (int64_t t : greenshard::generate(*model, p, g)) text.push_back(static_cast<char>(t));
  return text + "\n";
}

class SampleFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    gc_ = byte_config();
    model_ = random_model(gc_, 51);
    want_ = expected_greedy(model_, "In the beginning", 50);
    // A second copy with the same weights gets wrapped (wrapping replaces
    // the parameters by views).
    GPT wrapped(gc_);
    {
      torch::NoGradGuard no_grad;
      auto src = model_->named_parameters(true);
      for (auto& p : wrapped->named_parameters(true)) p.value().copy_(src[p.key()]);
    }
    const std::string extra =
        nlohmann::json{{"step", 3}, {"card", nlohmann::json::parse(greenshard::to_json(card_of(gc_)))}}.dump();
    with_fsdp(wrapped, [&](shard::FullyShardedModel& fsdp) {
      shard::export_full_state_dict(fsdp, dir_.file("model.pt"), shard::ExportFormat::kLibTorchArchive);
      shard::export_full_state_dict(fsdp, dir_.file("model_ts.pt"), shard::ExportFormat::kTorchSave);
      shard::save_checkpoint(fsdp, nullptr, dir_.file("ckpt"), 3, extra);
      shard::save_checkpoint(fsdp, nullptr, dir_.file("nocard"), 3, "{\"step\": 3}");
    });
    greenshard::write_model_card(dir_.file("model.pt.json"), card_of(gc_));
    greenshard::write_model_card(dir_.file("model_ts.pt.json"), card_of(gc_));
  }

  greenshard::SampleOptions greedy(const std::string& which) {
    greenshard::SampleOptions o;
    if (which == "export") o.export_path = dir_.file("model.pt");
    if (which == "torch_save") o.export_path = dir_.file("model_ts.pt");
    if (which == "root") o.checkpoint = dir_.file("ckpt");
    if (which == "step") o.checkpoint = dir_.file("ckpt/step_00000003");
    o.prompt = "In the beginning";
    o.tokens = 50;
    o.temperature = 0.0;
    return o;
  }

  gstest::TempDir dir_;
  GPTConfig gc_;
  GPT model_{nullptr};
  std::string want_;
};

TEST_F(SampleFiles, GreedyTextFromEitherExportFormatAndFromACheckpointRootOrStepIsTheOriginalModels) {
  for (const char* which : {"export", "torch_save", "root", "step"}) {
    SCOPED_TRACE(which);
    EXPECT_EQ(sample_text(greedy(which)), want_);
  }
  // (The weights matter: another model continues the prompt otherwise.)
  GPT other = random_model(gc_, 52);
  EXPECT_NE(expected_greedy(other, "In the beginning", 50), want_);
}

TEST_F(SampleFiles, ReadCheckpointExtraReturnsTheRecordAndRefusesAnIncompleteCheckpoint) {
  const std::string step = dir_.file("ckpt/step_00000003");
  const auto extra = nlohmann::json::parse(shard::read_checkpoint_extra(step));
  EXPECT_EQ(extra.at("step"), 3);
  EXPECT_EQ(extra.at("card").at("model").at("vocab"), 260);
  fs::remove(step + "/DONE");
  try {
    shard::read_checkpoint_extra(step);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no DONE marker"), std::string::npos) << e.what();
  }
}

TEST_F(SampleFiles, SampledTextIsAFunctionOfTheSeed) {
  auto o = greedy("export");
  o.temperature = 1.0;
  o.top_k = 20;
  o.seed = 1;
  const std::string a = sample_text(o);
  EXPECT_EQ(a.rfind("In the beginning", 0), 0u) << a;
  EXPECT_EQ(a.size(), std::string("In the beginning").size() + 50 + 1);  // bytes: one per token, "\n"
  EXPECT_EQ(sample_text(o), a);
  o.seed = 2;
  EXPECT_NE(sample_text(o), a);
}

// The error run_sample throws: its type's name, and its message.
std::pair<std::string, std::string> error_of(const greenshard::SampleOptions& o) {
  std::ostringstream out;
  try {
    greenshard::run_sample(o, out);
  } catch (const greenshard::ConfigError& e) {
    return {"ConfigError", e.what()};
  } catch (const std::exception& e) {
    return {"other", e.what()};
  }
  return {"none", out.str()};
}

TEST_F(SampleFiles, BadFlagsAreConfigErrorsNamingTheFlag) {
  struct Case {
    const char* what;
    std::function<void(greenshard::SampleOptions&)> change;
    const char* flag;
  };
  const std::vector<Case> cases = {
      {"both sources", [&](auto& o) { o.checkpoint = dir_.file("ckpt"); }, "--checkpoint/--export"},
      {"no source", [](auto& o) { o.export_path.clear(); }, "--checkpoint/--export"},
      {"zero tokens", [](auto& o) { o.tokens = 0; }, "--tokens"},
      {"negative temperature", [](auto& o) { o.temperature = -0.5; }, "--temperature"},
      {"negative top-k", [](auto& o) { o.top_k = -1; }, "--top-k"},
      {"top-k above the vocabulary", [](auto& o) { o.top_k = 261; }, "--top-k"},
      {"empty prompt", [](auto& o) { o.prompt.clear(); }, "--prompt"},
      {"prompt as long as the context", [](auto& o) { o.prompt = std::string(32, 'a'); }, "--prompt"},
      {"missing export", [&](auto& o) { o.export_path = dir_.file("nope.pt"); }, "--export"},
      {"missing checkpoint dir", [&](auto& o) { o.export_path.clear(); o.checkpoint = dir_.file("nope"); }, "--checkpoint"},
      {"checkpoint root without checkpoints",
       [&](auto& o) {
         fs::create_directories(dir_.file("empty"));
         o.export_path.clear();
         o.checkpoint = dir_.file("empty");
       },
       "--checkpoint"},
      {"missing tokenizer model", [&](auto& o) { o.tokenizer_model = dir_.file("nope.model"); }, "--tokenizer-model"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto o = greedy("export");
    c.change(o);
    auto [kind, message] = error_of(o);
    EXPECT_EQ(kind, "ConfigError") << message;
    EXPECT_NE(message.find(c.flag), std::string::npos) << message;
  }
  // A prompt of context - 1 tokens is fine.
  auto o = greedy("export");
  o.prompt = std::string(31, 'a');
  o.tokens = 3;
  EXPECT_EQ(error_of(o).first, "none");
}

TEST_F(SampleFiles, BadFilesAreErrorsNamingTheFile) {
  auto expect_error = [](const greenshard::SampleOptions& o, const std::string& needle) {
    auto [kind, message] = error_of(o);
    EXPECT_NE(kind, "none") << message;
    EXPECT_NE(message.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << message;
  };
  // The export's card is missing.
  fs::remove(dir_.file("model.pt.json"));
  expect_error(greedy("export"), dir_.file("model.pt.json"));
  // A card for another shape: the import names the file and the parameter.
  auto other = card_of(gc_);
  other.embd = 32;
  greenshard::write_model_card(dir_.file("model.pt.json"), other);
  expect_error(greedy("export"), dir_.file("model.pt"));
  // A corrupt card.
  std::ofstream(dir_.file("model.pt.json")) << "{\"format\": \"greenshard-gpt/1\", \"model\": {\"layers\": 0}}";
  expect_error(greedy("export"), "model.layers");
  // A corrupt export.
  greenshard::write_model_card(dir_.file("model.pt.json"), card_of(gc_));
  std::ofstream(dir_.file("model.pt"), std::ios::trunc) << "garbage";
  expect_error(greedy("export"), dir_.file("model.pt"));
  // A checkpoint whose record has no card.
  auto o = greedy("root");
  o.checkpoint = dir_.file("nocard");
  expect_error(o, "no model card");
  // A corrupt checkpoint shard.
  {
    std::fstream f(dir_.file("ckpt/step_00000003/rank_0.bin"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    const char c = static_cast<char>(f.get());
    f.seekp(100);
    f.put(static_cast<char>(c ^ 0x55));
  }
  expect_error(greedy("step"), "rank_0.bin");
}

TEST_F(SampleFiles, ATokenizerWhoseSha256DiffersFromTheCardsIsAnErrorNamingIt) {
  // A SentencePiece card: the recorded SHA-256 is not the file's.
  const std::string sp = dir_.file("other.model");
  std::ofstream(sp) << "not the tokenizer the model was trained with";
  auto card = card_of(gc_);
  card.tokenizer.kind = greenshard::TokenizerKind::kSentencePiece;
  card.tokenizer.vocab = 200;
  card.tokenizer.model_sha256 = std::string(64, 'a');
  card.tokenizer_model = sp;
  greenshard::write_model_card(dir_.file("model.pt.json"), card);
  auto [kind, message] = error_of(greedy("export"));
  EXPECT_NE(message.find(sp), std::string::npos) << message;
  EXPECT_NE(message.find("SHA-256"), std::string::npos) << message;
  // --tokenizer-model: the same check on the override.
  const std::string sp2 = dir_.file("override.model");
  std::ofstream(sp2) << "another";
  auto o = greedy("export");
  o.tokenizer_model = sp2;
  std::tie(kind, message) = error_of(o);
  EXPECT_NE(message.find(sp2), std::string::npos) << message;
  // The byte tokenizer takes no .model file.
  greenshard::write_model_card(dir_.file("model.pt.json"), card_of(gc_));
  std::tie(kind, message) = error_of(o);
  EXPECT_NE(message.find(sp2), std::string::npos) << message;
}

// ---------------------------------------------------------------------------
// The subcommand's flags

TEST(SampleCommand, FlagsFillTheOptionsAndPromptAndTokensAreRequired) {
  CLI::App app;
  greenshard::SampleOptions o;
  CLI::App* sample = greenshard::add_sample_command(app, o);
  app.parse("sample --export m.pt --prompt \"In the\" --tokens 5 --temperature 0.5 --top-k 3 --seed 9 "
            "--tokenizer-model t.model",
            /*program_name_included=*/false);
  EXPECT_TRUE(sample->parsed());
  EXPECT_EQ(o.export_path, "m.pt");
  EXPECT_EQ(o.checkpoint, "");
  EXPECT_EQ(o.prompt, "In the");
  EXPECT_EQ(o.tokens, 5);
  EXPECT_EQ(o.temperature, 0.5);
  EXPECT_EQ(o.top_k, 3);
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.tokenizer_model, "t.model");

  CLI::App app2;
  greenshard::SampleOptions o2;
  greenshard::add_sample_command(app2, o2);
  app2.parse("sample --checkpoint ckpt --prompt x --tokens 1", false);
  EXPECT_EQ(o2.checkpoint, "ckpt");
  EXPECT_EQ(o2.temperature, 1.0);  // defaults
  EXPECT_EQ(o2.top_k, 0);
  EXPECT_EQ(o2.seed, 1337u);
  CLI::App app3;
  greenshard::SampleOptions o3;
  greenshard::add_sample_command(app3, o3);
  EXPECT_THROW(app3.parse("sample --checkpoint ckpt --prompt x", false), CLI::ParseError);  // no --tokens
}

// ---------------------------------------------------------------------------
// Model card

TEST(ModelCard, RoundTripsThroughJsonAndNamesTheBadField) {
  greenshard::ModelCard c;
  c.layers = 3;
  c.heads = 2;
  c.embd = 8;
  c.context = 16;
  c.vocab = 300;
  c.tokenizer.kind = greenshard::TokenizerKind::kSentencePiece;
  c.tokenizer.vocab = 300;
  c.tokenizer.model_sha256 = std::string(64, 'b');
  c.tokenizer_model = "/abs/tok.model";
  const auto back = greenshard::model_card_from_json(greenshard::to_json(c), "here");
  EXPECT_EQ(back.layers, 3);
  EXPECT_EQ(back.heads, 2);
  EXPECT_EQ(back.embd, 8);
  EXPECT_EQ(back.context, 16);
  EXPECT_EQ(back.vocab, 300);
  EXPECT_EQ(back.tokenizer.kind, greenshard::TokenizerKind::kSentencePiece);
  EXPECT_EQ(back.tokenizer.vocab, 300);
  EXPECT_EQ(back.tokenizer.model_sha256, c.tokenizer.model_sha256);
  EXPECT_EQ(back.tokenizer_model, "/abs/tok.model");

  auto j = nlohmann::json::parse(greenshard::to_json(c));
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> bad = {
      {[](auto& j) { j["format"] = "gpt/2"; }, "format"},
      {[](auto& j) { j["model"].erase("heads"); }, "model.heads"},
      {[](auto& j) { j["model"]["embd"] = 9; }, "model.embd"},
      {[](auto& j) { j["model"]["context"] = "16"; }, "model.context"},
      {[](auto& j) { j["tokenizer"]["kind"] = "bpe"; }, "tokenizer.kind"},
      {[](auto& j) { j["tokenizer"]["vocab"] = 301; }, "tokenizer.vocab"},
      {[](auto& j) { j["tokenizer"]["sha256"] = "xyz"; }, "tokenizer.sha256"},
      {[](auto& j) { j["tokenizer"]["model"] = ""; }, "tokenizer.model"},
  };
  for (const auto& [change, field] : bad) {
    SCOPED_TRACE(field);
    auto k = j;
    change(k);
    try {
      greenshard::model_card_from_json(k.dump(), "card.json");
      ADD_FAILURE() << "accepted";
    } catch (const greenshard::ConfigError& e) {
      EXPECT_EQ(e.field, field);
      EXPECT_NE(std::string(e.what()).find("card.json"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(greenshard::model_card_from_json("{", "x"), greenshard::ConfigError);
}

}  // namespace
