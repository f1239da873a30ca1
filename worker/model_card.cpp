#include "worker/model_card.h"

#include "worker/spec/job_spec.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace greenshard {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kCardFormat = "greenshard-gpt/1";

[[noreturn]] void bad(const std::string& origin, const std::string& field, const std::string& what) {
  throw ConfigError(origin + ": model card field " + field + ": " + what, field);
}

const json& member(const json& obj, const std::string& key, const std::string& origin, const std::string& field) {
  if (!obj.is_object()) bad(origin, field, "missing (its parent is not an object)");
  auto it = obj.find(key);
  if (it == obj.end()) bad(origin, field, "missing");
  return *it;
}

int64_t positive_int(const json& obj, const std::string& key, const std::string& origin, const std::string& parent) {
  const std::string field = parent + "." + key;
  const json& v = member(obj, key, origin, field);
  if (!v.is_number_integer()) bad(origin, field, "must be an integer, got " + v.dump());
  const int64_t n = v.get<int64_t>();
  if (n <= 0) bad(origin, field, "must be positive, got " + std::to_string(n));
  return n;
}

std::string string_field(const json& obj, const std::string& key, const std::string& origin, const std::string& parent) {
  const std::string field = parent.empty() ? key : parent + "." + key;
  const json& v = member(obj, key, origin, field);
  if (!v.is_string()) bad(origin, field, "must be a string, got " + v.dump());
  return v.get<std::string>();
}

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string to_json(const ModelCard& card) {
  json j{{"format", kCardFormat},
         {"model",
          {{"layers", card.layers},
           {"heads", card.heads},
           {"embd", card.embd},
           {"context", card.context},
           {"vocab", card.vocab}}},
         {"tokenizer",
          {{"kind", to_string(card.tokenizer.kind)},
           {"vocab", card.tokenizer.vocab},
           {"model", card.tokenizer_model},
           {"sha256", card.tokenizer.model_sha256}}}};
  return j.dump(2);
}

ModelCard model_card_from_json(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw ConfigError(origin + ": not a model card (invalid JSON: " + e.what() + ")", "");
  }
  if (!j.is_object()) throw ConfigError(origin + ": not a model card (not a JSON object)", "");
  const std::string format = string_field(j, "format", origin, "");
  if (format != kCardFormat) bad(origin, "format", "must be \"" + std::string(kCardFormat) + "\", got \"" + format + "\"");

  ModelCard card;
  const json& m = member(j, "model", origin, "model");
  card.layers = positive_int(m, "layers", origin, "model");
  card.heads = positive_int(m, "heads", origin, "model");
  card.embd = positive_int(m, "embd", origin, "model");
  card.context = positive_int(m, "context", origin, "model");
  card.vocab = positive_int(m, "vocab", origin, "model");
  if (card.embd % card.heads != 0) {
    bad(origin, "model.embd",
        "must be divisible by model.heads (" + std::to_string(card.embd) + " % " + std::to_string(card.heads) + " != 0)");
  }

  const json& t = member(j, "tokenizer", origin, "tokenizer");
  const std::string kind = string_field(t, "kind", origin, "tokenizer");
  card.tokenizer.vocab = positive_int(t, "vocab", origin, "tokenizer");
  card.tokenizer_model = string_field(t, "model", origin, "tokenizer");
  card.tokenizer.model_sha256 = string_field(t, "sha256", origin, "tokenizer");
  if (kind == "byte") {
    card.tokenizer.kind = TokenizerKind::kByte;
    if (card.tokenizer.vocab != 256)
      bad(origin, "tokenizer.vocab", "must be 256 for the byte tokenizer, got " + std::to_string(card.tokenizer.vocab));
    if (!card.tokenizer_model.empty()) bad(origin, "tokenizer.model", "must be empty for the byte tokenizer");
    if (!card.tokenizer.model_sha256.empty()) bad(origin, "tokenizer.sha256", "must be empty for the byte tokenizer");
  } else if (kind == "sentencepiece") {
    card.tokenizer.kind = TokenizerKind::kSentencePiece;
    if (card.tokenizer_model.empty()) bad(origin, "tokenizer.model", "must name the SentencePiece .model file");
    if (!is_sha256_hex(card.tokenizer.model_sha256))
      bad(origin, "tokenizer.sha256", "must be 64 lower-case hex digits, got \"" + card.tokenizer.model_sha256 + "\"");
  } else {
    bad(origin, "tokenizer.kind", "must be byte or sentencepiece, got \"" + kind + "\"");
  }
  if (card.tokenizer.vocab > card.vocab) {
    bad(origin, "tokenizer.vocab",
        std::to_string(card.tokenizer.vocab) + " tokens do not fit the model's vocabulary (model.vocab " +
            std::to_string(card.vocab) + ")");
  }
  return card;
}

void write_model_card(const std::string& path, const ModelCard& card) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("model card: cannot write " + tmp);
    out << to_json(card) << "\n";
    out.flush();
    if (!out) throw std::runtime_error("model card: cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("model card: cannot rename " + tmp + " to " + path + ": " + ec.message());
}

ModelCard read_model_card(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("model card: missing or unreadable file " + path, "");
  std::ostringstream ss;
  ss << in.rdbuf();
  return model_card_from_json(ss.str(), path);
}

std::unique_ptr<Tokenizer> open_tokenizer(const ModelCard& card, const std::string& override_model) {
  if (card.tokenizer.kind == TokenizerKind::kByte) {
    if (!override_model.empty()) {
      throw std::runtime_error("tokenizer: " + override_model +
                               " given, but the model card names the byte tokenizer (no .model file)");
    }
    return make_byte_tokenizer();
  }
  const std::string path = override_model.empty() ? card.tokenizer_model : override_model;
  if (!fs::exists(path)) throw std::runtime_error("tokenizer: missing SentencePiece model file " + path);
  const std::string sha = file_sha256(path);
  if (sha != card.tokenizer.model_sha256) {
    throw std::runtime_error("tokenizer: " + path + " has SHA-256 " + sha + ", the model card records " +
                             card.tokenizer.model_sha256 + " (another tokenizer than the model was trained with)");
  }
  auto tok = load_sentencepiece(path);
  if (tok->vocab() != card.tokenizer.vocab) {
    throw std::runtime_error("tokenizer: " + path + " has " + std::to_string(tok->vocab()) +
                             " tokens, the model card records " + std::to_string(card.tokenizer.vocab));
  }
  return tok;
}

}  // namespace greenshard
