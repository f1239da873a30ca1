#include "worker/prepare.h"

#include "worker/data.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace greenshard {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void bad_input(const std::string& path, const std::string& why) {
  throw std::invalid_argument("--input: '" + path + "': " + why);
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw std::invalid_argument("--input: at least one text file is required");
  std::vector<std::string> out;
  for (const auto& in : inputs) {
    if (in.empty()) throw std::invalid_argument("--input: empty path");
    if (in.find_first_of("*?[") != std::string::npos && !fs::exists(in)) {
      glob_t g{};
      const int rc = ::glob(in.c_str(), GLOB_ERR, nullptr, &g);
      if (rc == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
      ::globfree(&g);
      if (rc == GLOB_NOMATCH) bad_input(in, "the pattern matches no file");
      if (rc != 0) bad_input(in, "cannot expand the pattern (read error)");
    } else {
      out.push_back(in);
    }
  }
  return out;
}

// Offset of the first byte that is not valid UTF-8 in s, or npos.
size_t first_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return i;
    i += len;
  }
  return std::string_view::npos;
}

struct Chunk {
  int64_t seq = 0;
  std::string text;
};

// The inputs as a sequence of chunks of whole lines (see prepare.h). The
// cut depends only on the bytes, never on how read() happens to return them.
class ChunkReader {
 public:
  explicit ChunkReader(std::vector<std::string> paths) : paths_(std::move(paths)) { scratch_.resize(kChunkBytes); }
  ~ChunkReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  int64_t bytes() const { return bytes_; }
  const std::vector<std::pair<std::string, int64_t>>& files() const { return done_files_; }

  // The next chunk; false at the end of the last input.
  bool next(Chunk& c) {
    for (;;) {
      if (fd_ < 0) {
        if (next_path_ == paths_.size()) return false;
        open_next();
      }
      while (!eof_ && pending_.size() < kChunkBytes) fill();
      if (pending_.empty()) {  // this input is done
        if (file_bytes_ == 0) bad_input(paths_[next_path_ - 1], "empty file");
        done_files_.emplace_back(paths_[next_path_ - 1], file_bytes_);
        ::close(fd_);
        fd_ = -1;
        continue;
      }
      size_t cut = pending_.size();
      if (pending_.size() >= kChunkBytes) {
        const auto nl = std::string_view(pending_.data(), kChunkBytes).rfind('\n');
        if (nl != std::string_view::npos) {
          cut = nl + 1;
        } else {  // a line longer than a chunk: cut before a UTF-8 continuation byte run
          cut = kChunkBytes;
          for (int back = 0; back < 3 && cut > 1 && (static_cast<unsigned char>(pending_[cut]) & 0xC0) == 0x80; ++back)
            --cut;
        }
      }
      c.seq = seq_++;
      c.text.assign(pending_, 0, cut);
      pending_.erase(0, cut);
      if (first_chunk_) {
        first_chunk_ = false;
        const auto& path = paths_[next_path_ - 1];
        if (const auto z = c.text.find('\0'); z != std::string::npos)
          bad_input(path, "not a text file (NUL byte at offset " + std::to_string(z) + ")");
        // The first chunk may end inside a character only at a hard cut
        // (handled above) or at the end of the file.
        if (const auto bad = first_invalid_utf8(c.text); bad != std::string_view::npos)
          bad_input(path, "not UTF-8 text (invalid byte at offset " + std::to_string(bad) + ")");
      }
      return true;
    }
  }

 private:
  void open_next() {
    const auto& path = paths_[next_path_++];
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) bad_input(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) == 0 && S_ISDIR(st.st_mode)) bad_input(path, "is a directory");
    eof_ = false;
    first_chunk_ = true;
    file_bytes_ = 0;
  }
  void fill() {
    const ssize_t n = ::read(fd_, scratch_.data(), scratch_.size());
    if (n < 0) {
      if (errno == EINTR) return;
      bad_input(paths_[next_path_ - 1], std::string("read error: ") + std::strerror(errno));
    }
    if (n == 0) {
      eof_ = true;
      return;
    }
    pending_.append(scratch_.data(), static_cast<size_t>(n));
    file_bytes_ += n;
    bytes_ += n;
  }

  std::vector<std::string> paths_;
  size_t next_path_ = 0;
  int fd_ = -1;
  bool eof_ = false, first_chunk_ = false;
  int64_t file_bytes_ = 0, bytes_ = 0, seq_ = 0;
  std::string pending_, scratch_;
  std::vector<std::pair<std::string, int64_t>> done_files_;
};

// One split's shards: a new file every shard_tokens tokens.
class ShardSeq {
 public:
  ShardSeq(std::string dir, std::string prefix, TokenizerInfo tok, int64_t shard_tokens)
      : dir_(std::move(dir)), prefix_(std::move(prefix)), tok_(std::move(tok)), shard_tokens_(shard_tokens) {}
  void append(const unsigned char* packed, int64_t n, int width) {
    while (n > 0) {
      if (!cur_) {
        char name[32];
        std::snprintf(name, sizeof name, "-%05zu.bin", files_.size());
        files_.push_back(dir_ + "/" + prefix_ + name);
        cur_ = std::make_unique<TokenFileWriter>(files_.back(), tok_);
      }
      const int64_t take = std::min(n, shard_tokens_ - cur_->count());
      cur_->append_packed(packed, take);
      packed += take * width;
      n -= take;
      total_ += take;
      if (cur_->count() == shard_tokens_) {
        counts_.push_back(cur_->count());
        cur_->finish();
        cur_.reset();
      }
    }
  }
  void finish() {
    if (cur_) {
      counts_.push_back(cur_->count());
      cur_->finish();
      cur_.reset();
    }
  }
  int64_t total() const { return total_; }
  const std::vector<std::string>& files() const { return files_; }
  const std::vector<int64_t>& counts() const { return counts_; }

 private:
  std::string dir_, prefix_;
  TokenizerInfo tok_;
  int64_t shard_tokens_;
  std::unique_ptr<TokenFileWriter> cur_;
  std::vector<std::string> files_;
  std::vector<int64_t> counts_;
  int64_t total_ = 0;
};

bool is_val_block(int64_t b, double f) {
  return f > 0 && std::floor(static_cast<double>(b + 1) * f) > std::floor(static_cast<double>(b) * f);
}

// Packs the tokens of `text` in `width` bytes each. Cut at newlines into
// pieces of ~64 KiB first (tokens do not depend on cuts at newlines), so the
// uint32 scratch stays small.
void encode_packed(const Tokenizer& tok, bool byte_tok, int width, const std::string& text, std::string& packed,
                   int64_t& count, std::vector<uint32_t>& scratch) {
  if (byte_tok) {  // token = byte, width 1
    packed = text;
    count = static_cast<int64_t>(text.size());
    return;
  }
  packed.clear();
  count = 0;
  constexpr size_t kPiece = 64 << 10;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = std::min(text.size(), pos + kPiece);
    if (end < text.size()) {
      const auto nl = std::string_view(text).substr(pos, end - pos).rfind('\n');
      end = nl == std::string_view::npos ? text.find('\n', end) : pos + nl;
      end = end == std::string::npos ? text.size() : end + 1;
    }
    scratch.clear();
    tok.encode(std::string_view(text).substr(pos, end - pos), scratch);
    const size_t at = packed.size();
    packed.resize(at + scratch.size() * static_cast<size_t>(width));
    for (size_t i = 0; i < scratch.size(); ++i)
      std::memcpy(packed.data() + at + i * width, &scratch[i], static_cast<size_t>(width));  // little-endian
    count += static_cast<int64_t>(scratch.size());
    pos = end;
  }
}

void remove_old_outputs(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool shard = (name.rfind("train-", 0) == 0 || name.rfind("val-", 0) == 0) &&
                       (name.size() > 4 && (name.compare(name.size() - 4, 4, ".bin") == 0 ||
                                            name.compare(name.size() - 8, 8, ".bin.tmp") == 0));
    if (shard || name == "train.bin" || name == "val.bin" || name == "manifest.json")
      fs::remove(e.path());
  }
}

}  // namespace

PrepareResult prepare(const PrepareOptions& opt) {
  // ---- options ----
  if (!(opt.val_fraction >= 0 && opt.val_fraction < 1))
    throw std::invalid_argument("--val-fraction: must be in [0, 1), got " + std::to_string(opt.val_fraction));
  if (opt.tokenizer != "byte" && opt.tokenizer != "bpe")
    throw std::invalid_argument("--tokenizer: must be byte or bpe, got '" + opt.tokenizer + "'");
  const bool bpe = opt.tokenizer == "bpe" || !opt.tokenizer_model.empty();
  if (opt.tokenizer == "byte" && !opt.tokenizer_model.empty())
    throw std::invalid_argument("--tokenizer-model: needs --tokenizer bpe (got --tokenizer byte)");
  if (opt.tokenizer_model.empty() && bpe) check_bpe_vocab(opt.vocab);
  if (opt.shard_tokens < kSplitBlockTokens)
    throw std::invalid_argument("--shard-tokens: must be >= " + std::to_string(kSplitBlockTokens) + ", got " +
                                std::to_string(opt.shard_tokens));
  if (opt.threads < 0 || opt.threads > 64) throw std::invalid_argument("--threads: must be in [1, 64]");
  if (opt.sample_mb < 1 || opt.sample_mb > 256) throw std::invalid_argument("--sample-mb: must be in [1, 256]");
  if (opt.out_dir.empty()) throw std::invalid_argument("--out: a directory is required");
  const int threads = opt.threads > 0 ? opt.threads : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 64);
  std::unique_ptr<Tokenizer> given;
  if (!opt.tokenizer_model.empty()) {
    try {
      given = load_sentencepiece(opt.tokenizer_model);
    } catch (const std::exception& e) {
      throw std::invalid_argument(std::string("--tokenizer-model: ") + e.what());
    }
    if (given->vocab() > kMaxVocab)
      throw std::invalid_argument("--tokenizer-model: its vocabulary of " + std::to_string(given->vocab()) +
                                  " is larger than the trainer takes (model.vocab <= " + std::to_string(kMaxVocab) + ")");
  }
  const auto paths = expand_inputs(opt.inputs);
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (!fs::is_directory(opt.out_dir)) throw std::invalid_argument("--out: cannot create directory '" + opt.out_dir + "'");
  remove_old_outputs(opt.out_dir);

  PrepareResult res;
  ChunkReader reader(paths);
  std::deque<Chunk> replay;   // chunks read for the BPE sample, encoded first
  const std::string model_path = opt.out_dir + "/tokenizer.model";
  std::unique_ptr<Tokenizer> tok;
  if (given) {
    try {
      fs::copy_file(opt.tokenizer_model, model_path + ".tmp", fs::copy_options::overwrite_existing);
      fs::rename(model_path + ".tmp", model_path);
    } catch (const fs::filesystem_error& e) {
      fs::remove(model_path + ".tmp", ec);  // a full disk leaves no half copy
      throw std::runtime_error(model_path + ": cannot write: " + e.code().message());
    }
    tok = std::move(given);
    res.tokenizer_model = model_path;
  } else if (bpe) {
    // The sample: the first sample_mb MB of the stream (whole chunks).
    const auto t0 = Clock::now();
    std::string sample;
    {
      Chunk c;
      while (static_cast<int64_t>(sample.size()) < opt.sample_mb * (int64_t{1} << 20) && reader.next(c)) {
        sample += c.text;
        if (sample.back() != '\n') sample += '\n';  // an input's last line
        replay.push_back(std::move(c));
      }
    }
    BpeTrainOptions bo;   // threads: fixed (the .model records them)
    bo.vocab = opt.vocab;
    bo.seed = opt.seed;
    train_bpe_tokenizer(sample, model_path, bo);
    std::string().swap(sample);
    tok = load_sentencepiece(model_path);
    res.tokenizer_model = model_path;
    res.train_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  } else {
    fs::remove(model_path, ec);
    tok = make_byte_tokenizer();
  }
  res.tokenizer = tok->info();
  const bool byte_tok = res.tokenizer.kind == TokenizerKind::kByte;
  const int width = token_width(res.tokenizer.vocab);

  // ---- encode: the main thread reads and writes in order; workers encode ----
  const auto t0 = Clock::now();
  std::mutex mu;
  std::condition_variable cv_work, cv_done;
  std::deque<Chunk> todo;
  struct Encoded {
    std::string packed;
    int64_t count = 0;
  };
  std::map<int64_t, Encoded> done;
  bool stop = false;
  std::exception_ptr worker_error;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      std::vector<uint32_t> scratch;
      for (;;) {
        Chunk c;
        {
          std::unique_lock<std::mutex> lk(mu);
          cv_work.wait(lk, [&] { return stop || !todo.empty(); });
          if (todo.empty()) return;
          c = std::move(todo.front());
          todo.pop_front();
        }
        Encoded e;
        try {
          encode_packed(*tok, byte_tok, width, c.text, e.packed, e.count, scratch);
        } catch (...) {
          std::lock_guard<std::mutex> lk(mu);
          if (!worker_error) worker_error = std::current_exception();
        }
        {
          std::lock_guard<std::mutex> lk(mu);
          done.emplace(c.seq, std::move(e));
        }
        cv_done.notify_all();
      }
    });
  auto join_pool = [&] {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv_work.notify_all();
    for (auto& th : pool) th.join();
    pool.clear();
  };

  ShardSeq train(opt.out_dir, "train", res.tokenizer, opt.shard_tokens);
  ShardSeq val(opt.out_dir, "val", res.tokenizer, opt.shard_tokens);
  int64_t global = 0;   // tokens written so far
  auto write_in_order = [&](const Encoded& e) {
    const auto* p = reinterpret_cast<const unsigned char*>(e.packed.data());
    int64_t left = e.count;
    while (left > 0) {
      const int64_t block = global / kSplitBlockTokens;
      const int64_t take = std::min(left, (block + 1) * kSplitBlockTokens - global);
      (is_val_block(block, opt.val_fraction) ? val : train).append(p, take, width);
      p += take * width;
      left -= take;
      global += take;
    }
  };
  const size_t max_in_flight = static_cast<size_t>(threads) + 8;
  try {
    int64_t next_write = 0, read = 0;
    bool more = true;
    for (;;) {
      // Read while there is room.
      while (more && static_cast<size_t>(read - next_write) < max_in_flight) {
        Chunk c;
        if (!replay.empty()) {
          c = std::move(replay.front());
          replay.pop_front();
        } else if (!reader.next(c)) {
          more = false;
          break;
        }
        ++read;
        {
          std::lock_guard<std::mutex> lk(mu);
          todo.push_back(std::move(c));
        }
        cv_work.notify_one();
      }
      if (!more && next_write == read) break;
      // Write the next chunk in order once encoded.
      Encoded e;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv_done.wait(lk, [&] { return worker_error || done.count(next_write) > 0; });
        if (worker_error) std::rethrow_exception(worker_error);
        auto it = done.find(next_write);
        e = std::move(it->second);
        done.erase(it);
      }
      write_in_order(e);
      ++next_write;
    }
    join_pool();
    train.finish();
    val.finish();
  } catch (...) {
    join_pool();
    // Leave no partial output behind (the temp files go with their writers).
    for (const auto& f : train.files()) fs::remove(f, ec);
    for (const auto& f : val.files()) fs::remove(f, ec);
    if (!res.tokenizer_model.empty()) fs::remove(model_path, ec);
    throw;
  }
  res.encode_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  res.train_tokens = train.total();
  res.val_tokens = val.total();
  res.input_bytes = reader.bytes();
  res.train_files = train.files();
  res.val_files = val.files();
  auto fail_cleanup = [&](const std::string& why) {
    for (const auto& f : train.files()) fs::remove(f, ec);
    for (const auto& f : val.files()) fs::remove(f, ec);
    if (!res.tokenizer_model.empty()) fs::remove(model_path, ec);
    throw std::invalid_argument(why);
  };
  if (res.train_tokens < 2) fail_cleanup("--input: too little text to train on (" + std::to_string(res.train_tokens) + " training tokens)");
  if (opt.val_fraction > 0 && res.val_tokens == 0)
    fail_cleanup("--val-fraction " + std::to_string(opt.val_fraction) + ": the input has " + std::to_string(global) +
                 " tokens, too few for one validation block (every " +
                 std::to_string(static_cast<int64_t>(std::ceil(1 / opt.val_fraction))) + "th block of " +
                 std::to_string(kSplitBlockTokens) + " tokens); give more text or --val-fraction 0");

  // From here on a failure (a full disk: ENOSPC) leaves no output either:
  // no shard a later glob would pick up, no alias, no manifest.
  const std::string manifest_path = opt.out_dir + "/manifest.json";
  try {
    // Single-file names for a split of one shard.
    auto alias = [&](const ShardSeq& s, const char* name) {
      if (s.files().size() != 1) return;
      const fs::path link = fs::path(opt.out_dir) / name;
      fs::create_symlink(fs::path(s.files().front()).filename(), link);
    };
    alias(train, "train.bin");
    alias(val, "val.bin");

    nlohmann::json m;
    m["format"] = "greenshard-tokens/2";
    m["tokenizer"] = {{"kind", to_string(res.tokenizer.kind)},
                      {"vocab", res.tokenizer.vocab},
                      {"sha256", res.tokenizer.model_sha256},
                      {"model", res.tokenizer_model.empty() ? "" : "tokenizer.model"}};
    auto split = [&](const ShardSeq& s) {
      nlohmann::json files = nlohmann::json::array();
      for (size_t i = 0; i < s.files().size(); ++i)
        files.push_back({{"file", fs::path(s.files()[i]).filename().string()}, {"tokens", s.counts()[i]}});
      return nlohmann::json{{"tokens", s.total()}, {"files", files}};
    };
    m["train"] = split(train);
    m["val"] = split(val);
    m["val_fraction"] = opt.val_fraction;
    m["split_block_tokens"] = kSplitBlockTokens;
    m["shard_tokens"] = opt.shard_tokens;
    nlohmann::json ins = nlohmann::json::array();
    for (const auto& [path, bytes] : reader.files()) ins.push_back({{"path", path}, {"bytes", bytes}});
    m["inputs"] = ins;
    m["input_bytes"] = res.input_bytes;
    {
      // <manifest>.tmp, written whole, then renamed: errors name the file and errno.
      const std::string tmp = manifest_path + ".tmp";
      const std::string text = m.dump(2) + "\n";
      const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) throw std::runtime_error(tmp + ": cannot write: " + std::strerror(errno));
      size_t done = 0;
      while (done < text.size()) {
        const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          const int err = w < 0 ? errno : EIO;
          ::close(fd);
          throw std::runtime_error(tmp + ": write failed: " + std::strerror(err));
        }
        done += static_cast<size_t>(w);
      }
      if (::close(fd) != 0) throw std::runtime_error(tmp + ": close failed: " + std::strerror(errno));
      fs::rename(tmp, manifest_path);
    }
  } catch (...) {
    for (const auto& f : train.files()) fs::remove(f, ec);
    for (const auto& f : val.files()) fs::remove(f, ec);
    for (const char* link : {"train.bin", "val.bin"}) fs::remove(fs::path(opt.out_dir) / link, ec);
    fs::remove(manifest_path + ".tmp", ec);
    if (!res.tokenizer_model.empty()) fs::remove(model_path, ec);
    throw;
  }
  return res;
}

}  // namespace greenshard
