#include "worker/tokenizer.h"

#include <dlfcn.h>
#ifndef GREENSHARD_NO_OPENSSL
#include <openssl/evp.h>
#endif
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace greenshard {
namespace {

// libsentencepiece lives in a module loaded locally (sentencepiece_shim.cpp
// says why). Looked for in $GREENSHARD_SPM_MODULE, next to the executable,
// at its build path, then by the loader's search.
struct Spm {
  void* (*load)(const char*, std::string*) = nullptr;
  void (*free)(void*) = nullptr;
  int (*piece_size)(void*) = nullptr;
  int (*unk_id)(void*) = nullptr;
  int (*byte_id)(void*, int) = nullptr;
  bool (*encode)(void*, const char*, size_t, std::vector<int>*, std::string*) = nullptr;
  bool (*decode)(void*, const std::vector<int>*, std::string*, std::string*) = nullptr;
  bool (*train)(const std::unordered_map<std::string, std::string>*, const std::string_view*, unsigned, std::string*,
                std::string*) = nullptr;
};

const Spm& spm() {
  static Spm s;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    constexpr const char* kName = "libgreenshard_spm.so";
#ifdef GREENSHARD_NO_SPM
    // A portable build on a machine without SentencePiece (cmake/Dependencies.cmake).
    error = "this greenshard-worker was built without SentencePiece (no libsentencepiece when it was "
            "built): BPE tokens are not available; use the byte tokenizer";
    return;
#endif
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("GREENSHARD_SPM_MODULE"); env && *env) candidates.emplace_back(env);
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates.push_back((exe.parent_path() / kName).string());
#ifdef GS_SPM_MODULE_PATH
    candidates.emplace_back(GS_SPM_MODULE_PATH);
#endif
    candidates.emplace_back(kName);
    void* h = nullptr;
    std::string tried;
    for (const auto& c : candidates) {
      if (c.find('/') != std::string::npos && !std::filesystem::exists(c)) {
        tried += " " + c + " (missing);";
        continue;
      }
      h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (h) break;
      const char* why = ::dlerror();
      tried += " " + c + " (" + (why ? why : "?") + ");";
    }
    if (!h) {
      error = std::string("SentencePiece support module ") + kName + " not found:" + tried;
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      if (!fn && error.empty()) error = std::string(kName) + ": missing symbol " + name;
    };
    sym(s.load, "gs_spm_load");
    sym(s.free, "gs_spm_free");
    sym(s.piece_size, "gs_spm_piece_size");
    sym(s.unk_id, "gs_spm_unk_id");
    sym(s.byte_id, "gs_spm_byte_id");
    sym(s.encode, "gs_spm_encode");
    sym(s.decode, "gs_spm_decode");
    sym(s.train, "gs_spm_train");
  });
  if (!error.empty()) throw std::runtime_error(error);
  return s;
}

class ByteTokenizerImpl final : public Tokenizer {
 public:
  const TokenizerInfo& info() const override { return info_; }
  void encode(std::string_view text, std::vector<uint32_t>& out) const override {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    out.insert(out.end(), p, p + text.size());
  }
  std::string decode(const std::vector<uint32_t>& tokens) const override {
    std::string s(tokens.size(), '\0');
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] >= 256)
        throw std::invalid_argument("byte tokenizer: token " + std::to_string(tokens[i]) + " is outside the vocabulary 256");
      s[i] = static_cast<char>(tokens[i]);
    }
    return s;
  }

 private:
  TokenizerInfo info_{TokenizerKind::kByte, 256, ""};
};

// Length of the valid UTF-8 sequence starting at p[0] (of n bytes), or 0
// when p[0] does not start one (overlong forms, surrogates and code points
// above U+10FFFF are invalid, as SentencePiece's normalizer has it).
size_t utf8_length(const unsigned char* p, size_t n) {
  const unsigned c = p[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned cp;
  if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
  else return 0;
  if (n < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0;
  return len;
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path) : spm_(spm()) {
    {
      std::ifstream f(path, std::ios::binary);
      if (!f) throw std::runtime_error(path + ": cannot read the tokenizer model: " + std::strerror(errno));
    }
    if (std::filesystem::is_directory(path)) throw std::runtime_error(path + ": is a directory, not a SentencePiece model");
    std::string why;
    sp_ = spm_.load(path.c_str(), &why);
    if (!sp_) throw std::runtime_error(path + ": not a SentencePiece model (" + why + ")");
    if (spm_.piece_size(sp_) < 2) throw std::runtime_error(path + ": SentencePiece model with fewer than 2 pieces");
    info_.kind = TokenizerKind::kSentencePiece;
    info_.vocab = spm_.piece_size(sp_);
    info_.model_sha256 = file_sha256(path);
    unk_ = spm_.unk_id(sp_);
    byte_of_id_.assign(static_cast<size_t>(info_.vocab), -1);
    for (int b = 0; b < 256; ++b) {
      byte_id_[b] = spm_.byte_id(sp_, b);
      if (byte_id_[b] >= 0) byte_of_id_[static_cast<size_t>(byte_id_[b])] = static_cast<int16_t>(b);
    }
    if (byte_id_['\n'] < 0) {  // a model without byte pieces: whatever it makes of "\n"
      std::vector<int> ids;
      std::string err;
      spm_.encode(sp_, "\n", 1, &ids, &err);
      for (int id : ids) newline_.push_back(static_cast<uint32_t>(id));
    } else {
      newline_.push_back(static_cast<uint32_t>(byte_id_['\n']));
    }
  }
  ~SentencePieceTokenizer() override {
    if (sp_) spm_.free(sp_);
  }

  const TokenizerInfo& info() const override { return info_; }

  void encode(std::string_view text, std::vector<uint32_t>& out) const override {
    std::vector<int> ids;
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t nl = text.find('\n', pos);
      const bool last = nl == std::string_view::npos;
      if (last) nl = text.size();
      encode_line(text.substr(pos, nl - pos), out, ids);
      if (last) break;
      out.insert(out.end(), newline_.begin(), newline_.end());
      pos = nl + 1;
    }
  }

  std::string decode(const std::vector<uint32_t>& tokens) const override {
    std::vector<int> ids(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] >= static_cast<uint64_t>(info_.vocab))
        throw std::invalid_argument("sentencepiece tokenizer: token " + std::to_string(tokens[i]) +
                                    " is outside the vocabulary " + std::to_string(info_.vocab));
      ids[i] = static_cast<int>(tokens[i]);
    }
    // Byte tokens are their bytes (SentencePiece's decoder would turn a
    // byte that is not UTF-8 into U+FFFD); runs of other tokens go through
    // SentencePiece.
    std::string s, part, err;
    std::vector<int> run;
    auto flush = [&] {
      if (run.empty()) return;
      part.clear();
      if (!spm_.decode(sp_, &run, &part, &err)) throw std::invalid_argument("sentencepiece tokenizer: cannot decode: " + err);
      s += part;
      run.clear();
    };
    for (int id : ids) {
      const int b = byte_of_id_[static_cast<size_t>(id)];
      if (b < 0) {
        run.push_back(id);
        continue;
      }
      flush();
      s += static_cast<char>(b);
    }
    flush();
    return s;
  }

 private:
  // One line (no '\n'): its valid UTF-8 runs through SentencePiece; a byte
  // that is not valid UTF-8 (which SentencePiece would turn into U+FFFD)
  // becomes its byte token, so that decoding gives the bytes back.
  void encode_line(std::string_view line, std::vector<uint32_t>& out, std::vector<int>& ids) const {
    const auto* p = reinterpret_cast<const unsigned char*>(line.data());
    size_t start = 0, i = 0;
    auto flush = [&](size_t end) {
      if (end == start) return;
      ids.clear();
      std::string err;
      if (!spm_.encode(sp_, line.data() + start, end - start, &ids, &err))
        throw std::runtime_error("sentencepiece encode failed: " + err);
      for (int id : ids) out.push_back(static_cast<uint32_t>(id));
    };
    while (i < line.size()) {
      if (p[i] < 0x80) {
        ++i;
        continue;
      }
      const size_t len = utf8_length(p + i, line.size() - i);
      if (len > 0) {
        i += len;
        continue;
      }
      flush(i);
      const int id = byte_id_[p[i]];
      out.push_back(static_cast<uint32_t>(id >= 0 ? id : unk_));
      start = ++i;
    }
    flush(i);
  }

  const Spm& spm_;
  void* sp_ = nullptr;
  TokenizerInfo info_;
  int unk_ = 0;
  std::array<int, 256> byte_id_{};
  std::vector<int16_t> byte_of_id_;   // token -> its byte, -1 for other pieces
  std::vector<uint32_t> newline_;
};

}  // namespace

const char* to_string(TokenizerKind k) { return k == TokenizerKind::kByte ? "byte" : "sentencepiece"; }

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizerImpl>(); }

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path) {
  return std::make_unique<SentencePieceTokenizer>(model_path);
}

std::string file_sha256(const std::string& path) {
#ifdef GREENSHARD_NO_OPENSSL
  throw std::runtime_error(path + ": cannot hash: this greenshard-worker was built without OpenSSL");
#else
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error(path + ": cannot read: " + std::strerror(errno));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
    std::fclose(f);
    EVP_MD_CTX_free(ctx);
    throw std::runtime_error(path + ": SHA-256 unavailable");
  }
  std::vector<unsigned char> buf(1 << 16);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) EVP_DigestUpdate(ctx, buf.data(), n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned md_len = 0;
  EVP_DigestFinal_ex(ctx, md, &md_len);
  EVP_MD_CTX_free(ctx);
  if (failed) throw std::runtime_error(path + ": read error while hashing");
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < md_len; ++i) {
    hex += kHex[md[i] >> 4];
    hex += kHex[md[i] & 15];
  }
  return hex;
#endif
}

void check_bpe_vocab(int64_t vocab) {
  if (vocab < kMinBpeVocab || vocab > kMaxVocab)
    throw std::invalid_argument("--vocab: must be in [" + std::to_string(kMinBpeVocab) + ", " +
                                std::to_string(kMaxVocab) + "] for a BPE tokenizer (256 byte tokens + unk, bos, eos + " +
                                "pieces; the trainer's model.vocab limit), got " + std::to_string(vocab));
}

void train_bpe_tokenizer(std::string_view sample, const std::string& model_path, const BpeTrainOptions& opt) {
  check_bpe_vocab(opt.vocab);
  if (opt.threads < 1) throw std::invalid_argument("--threads: must be >= 1");
  std::unordered_map<std::string, std::string> args{
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(opt.vocab)},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"max_sentence_length", "65536"},
      {"input_sentence_size", "0"},         // every line of the (already bounded) sample
      {"shuffle_input_sentence", "false"},
      {"num_threads", std::to_string(opt.threads)},
      {"minloglevel", "2"},
  };
  std::string proto, why;
  if (!spm().train(&args, &sample, opt.seed, &proto, &why))
    throw std::invalid_argument("--vocab " + std::to_string(opt.vocab) + ": SentencePiece could not train a BPE model on " +
                                "the sample of the input (" + why + ")");
  const std::string tmp = model_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(tmp + ": cannot write: " + std::strerror(errno));
    out.write(proto.data(), static_cast<std::streamsize>(proto.size()));
    if (!out.flush()) throw std::runtime_error(tmp + ": write failed");
  }
  std::filesystem::rename(tmp, model_path);
}

}  // namespace greenshard
