// bench data_pipeline: `greenshard-worker prepare` on the King James Bible
// (Debian's bible-kjv, repeated): BPE prepare throughput (training the
// tokenizer included), encoding throughput against Debian's
// `spm_encode --output_format id` on the same corpus and model in the same
// run (and that both give the same number of tokens), peak RSS of prepare on
// a corpus far larger than its 512 MB bound (fed through a named pipe), and
// validation bits per byte of the GPT trained for the same wall time on BPE
// tokens and on byte tokens (same model shape, 2 ranks).
//
//   scripts/bench.sh data_pipeline [--repeat 8] [--vocab 8192] [--rss-mb 1536] [--train-seconds 60]
//                                  [--layers 4] [--embd 128] [--context 128] [--batch 8]
//
// bits/byte = val_loss (nats per token) x val_tokens / val_bytes / ln 2,
// val_bytes being the bytes the validation tokens decode to.
#include "bench_flags.h"
#include "common/fifo_feed.h"
#include "worker/data.h"
#include "worker/tokenizer.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Args {
  int repeat = 8, vocab = 8192, rss_mb = 1536, train_seconds = 60;
  int layers = 4, embd = 128, context = 128, batch = 8;
};

struct Run {
  int exit_code = -1;
  double seconds = 0;
  double max_rss_mb = 0;
};

// Runs argv with stdin/stdout redirected (empty: inherit / the log), waits
// with wait4 for its peak RSS.
Run run(const std::vector<std::string>& args, const std::string& in, const std::string& out,
        const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) envs.emplace_back(*e);
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!in.empty()) posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
  if (!out.empty()) posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  Run r;
  pid_t pid = -1;
  const auto t0 = Clock::now();
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return r;
  int status = 0;
  struct rusage ru {};
  if (::wait4(pid, &status, 0, &ru) == pid) {
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.max_rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  }
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "bench_data_pipeline: %s\n", why.c_str());
  std::exit(1);
}

// Whitespace-separated words in a file (spm_encode's ids) and its lines.
std::pair<int64_t, int64_t> count_words_and_lines(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> buf(1 << 20);
  int64_t words = 0, lines = 0;
  bool in_word = false;
  while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0) {
    for (std::streamsize i = 0; i < f.gcount(); ++i) {
      const char c = buf[static_cast<size_t>(i)];
      const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
      if (!space && !in_word) ++words;
      in_word = !space;
      if (c == '\n') ++lines;
    }
  }
  return {words, lines};
}

int64_t manifest_tokens(const std::string& dir) {
  const auto m = nlohmann::json::parse(read_file(dir + "/manifest.json"));
  return m["train"]["tokens"].get<int64_t>() + m["val"]["tokens"].get<int64_t>();
}

struct Trained {
  double val_loss = NAN, bpb = NAN, tokens_per_byte = NAN;
  int steps = 0;
  double seconds = 0;
};

std::vector<std::string> worker_args(const Args& a, const std::string& data, int64_t vocab, int steps,
                                     const std::string& summary, bool json_log_every_step = false) {
  if (json_log_every_step) {
    auto v = worker_args(a, data, vocab, steps, summary);
    for (size_t i = 0; i + 1 < v.size(); ++i)
      if (v[i] == "--log.every") v[i + 1] = "1";
    v.insert(v.end(), {"--log.format", "json"});
    return v;
  }
  return {GS_WORKER_BIN,
          "--nproc", "2",
          "--data.train", data + "/train.bin",
          "--data.val", data + "/val.bin",
          "--model.vocab", std::to_string(vocab),
          "--model.layers", std::to_string(a.layers),
          "--model.embd", std::to_string(a.embd),
          "--model.heads", std::to_string(std::max(1, a.embd / 32)),
          "--model.context", std::to_string(a.context),
          "--schedule.batch_size", std::to_string(a.batch),
          "--schedule.steps", std::to_string(steps),
          "--schedule.eval_interval", std::to_string(steps),
          "--schedule.eval_batches", "40",
          "--optimizer.warmup_steps", std::to_string(std::max(1, steps / 20)),
          "--metrics.port", "0",
          "--log.every", std::to_string(std::max(1, steps)),
          "--summary_path", summary};
}

// Trains on `data` for about `seconds` (steps from a short calibration run)
// and returns the validation loss per token and per byte.
Trained train_for(const Args& a, const std::string& dir, const std::string& data, const std::string& name) {
  Trained t;
  greenshard::TokenDataset val(data + "/val.bin");
  const int64_t vocab = val.vocab();
  // Bytes the validation tokens stand for.
  std::unique_ptr<greenshard::Tokenizer> tok =
      val.tokenizer().kind == greenshard::TokenizerKind::kByte ? greenshard::make_byte_tokenizer()
                                                                : greenshard::load_sentencepiece(data + "/tokenizer.model");
  std::vector<uint32_t> ids(static_cast<size_t>(val.size()));
  for (int64_t i = 0; i < val.size(); ++i) ids[static_cast<size_t>(i)] = val.at(i);
  const double val_bytes = static_cast<double>(tok->decode(ids).size());
  t.tokens_per_byte = static_cast<double>(val.size()) / val_bytes;

  const std::map<std::string, std::string> env{{"OMP_NUM_THREADS", "1"}, {"OPENBLAS_NUM_THREADS", "1"}};
  const std::string log = dir + "/" + name + ".log";
  // Calibration: a short run; its per-step time from the JSON log (median
  // tokens/s over both ranks), its start-up from the wall time.
  const int calib = 12;
  auto c = run(worker_args(a, data, vocab, calib, dir + "/" + name + "-calib.json", true), "", log, env);
  if (c.exit_code != 0) die(name + " calibration run failed (" + log + "):\n" + read_file(log));
  std::vector<double> tps;
  {
    std::istringstream lines(read_file(log));
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] != '{') continue;
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("tokens_per_s") || !j.contains("step") || j["step"].get<int>() <= 2) continue;
      tps.push_back(j["tokens_per_s"].get<double>());
    }
  }
  if (tps.empty()) die(name + " calibration run logged no steps (" + log + ")");
  std::sort(tps.begin(), tps.end());
  const double per_step = 2.0 * a.batch * a.context / tps[tps.size() / 2];
  const double startup = std::max(0.0, c.seconds - calib * per_step);
  t.steps = std::max(10, static_cast<int>((a.train_seconds - startup) / per_step));
  const std::string summary = dir + "/" + name + ".json";
  auto r = run(worker_args(a, data, vocab, t.steps, summary), "", log, env);
  if (r.exit_code != 0) die(name + " training run failed (" + log + "):\n" + read_file(log));
  t.seconds = r.seconds;
  const auto s = nlohmann::json::parse(read_file(summary));
  for (const char* k : {"val_loss", "best_val_loss"})
    if (s.contains(k) && s[k].is_number()) {
      t.val_loss = s[k].get<double>();
      break;
    }
  t.bpb = t.val_loss * t.tokens_per_byte / std::log(2.0);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  gsbench::parse_int_flags(argc, argv,
                           {{"--repeat", &a.repeat},
                            {"--vocab", &a.vocab},
                            {"--rss-mb", &a.rss_mb},
                            {"--train-seconds", &a.train_seconds},
                            {"--layers", &a.layers},
                            {"--embd", &a.embd},
                            {"--context", &a.context},
                            {"--batch", &a.batch}},
                           "bench_data_pipeline");
  const int hw = std::max(1u, std::thread::hardware_concurrency());
  const std::string dir = (fs::temp_directory_path() / ("gs_bench_data_" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  const std::string worker = GS_WORKER_BIN;

  // ---- the corpus: the KJV (as scripts/quickstart.sh makes it), repeated ----
  const std::string kjv = dir + "/kjv.txt";
  if (run({"bible", "-f", "Gen1:1-Rev22:21"}, "", kjv).exit_code != 0 || fs::file_size(kjv) < (1u << 20))
    die("cannot run `bible` (Debian's bible-kjv; scripts/setup.sh installs it)");
  const std::string corpus = dir + "/corpus.txt";
  {
    const std::string text = read_file(kjv);
    std::ofstream out(corpus, std::ios::binary);
    for (int i = 0; i < a.repeat; ++i) out << text;
  }
  const double mb = static_cast<double>(fs::file_size(corpus)) / 1e6;
  std::printf("# data_pipeline: KJV x %d = %.1f MB, BPE vocabulary %d, %d hardware threads\n#\n", a.repeat, mb, a.vocab,
              hw);
  std::printf("# %-44s %8s %8s %9s %9s %11s %12s\n", "step", "MB", "threads", "seconds", "MB/s", "peak RSS MB", "tokens");
  auto row = [&](const char* what, double m, int threads, const Run& r, int64_t tokens) {
    std::printf("  %-44s %8.1f %8d %9.2f %9.2f %11.0f %12lld\n", what, m, threads, r.seconds, m / r.seconds, r.max_rss_mb,
                static_cast<long long>(tokens));
  };
  const std::string log = dir + "/prepare.log";

  // ---- 1. BPE prepare: train the tokenizer on a sample, encode everything ----
  auto bpe = run({worker, "prepare", "--input", corpus, "--out", dir + "/bpe", "--tokenizer", "bpe", "--vocab",
                  std::to_string(a.vocab)},
                 "", log);
  if (bpe.exit_code != 0) die("prepare --tokenizer bpe failed:\n" + read_file(log));
  const std::string model = dir + "/bpe/tokenizer.model";
  row("prepare --tokenizer bpe (train + encode)", mb, hw, bpe, manifest_tokens(dir + "/bpe"));

  // ---- 2. encoding only: ours (all threads, 1 thread) vs spm_encode ----
  auto enc = run({worker, "prepare", "--input", corpus, "--out", dir + "/enc", "--tokenizer-model", model}, "", log);
  if (enc.exit_code != 0) die("prepare --tokenizer-model failed:\n" + read_file(log));
  const int64_t our_tokens = manifest_tokens(dir + "/enc");
  row("prepare --tokenizer-model (encode)", mb, hw, enc, our_tokens);
  auto enc1 = run({worker, "prepare", "--input", corpus, "--out", dir + "/enc1", "--tokenizer-model", model, "--threads", "1"},
                  "", log);
  if (enc1.exit_code != 0) die("prepare --threads 1 failed:\n" + read_file(log));
  row("prepare --tokenizer-model --threads 1", mb, 1, enc1, manifest_tokens(dir + "/enc1"));
  auto spm = run({"spm_encode", "--model", model, "--output_format", "id"}, corpus, dir + "/spm.ids");
  if (spm.exit_code != 0) die("spm_encode failed (Debian's sentencepiece package)");
  const auto [spm_ids, spm_lines] = count_words_and_lines(dir + "/spm.ids");
  // Our stream has one newline token per line where spm_encode prints a line break.
  const int64_t spm_tokens = spm_ids + spm_lines;
  row("spm_encode --output_format id (Debian)", mb, 1, spm, spm_tokens);
  fs::remove(dir + "/spm.ids");
  for (const char* d : {"/enc", "/enc1"}) fs::remove_all(dir + d);

  // ---- 3. peak RSS on a corpus far larger than 512 MB, through a FIFO ----
  const std::string fifo = dir + "/big.fifo";
  if (::mkfifo(fifo.c_str(), 0600) != 0) die("mkfifo failed");
  const std::string kjv_text = read_file(kjv);
  const int64_t reps = (int64_t{a.rss_mb} << 20) / static_cast<int64_t>(kjv_text.size()) + 1;
  std::thread writer = gstest::feed_fifo(fifo, kjv_text, reps);
  auto big = run({worker, "prepare", "--input", fifo, "--out", dir + "/big"}, "", log);
  writer.join();
  if (big.exit_code != 0) die("prepare of the FIFO failed:\n" + read_file(log));
  const double big_mb = static_cast<double>(reps) * static_cast<double>(kjv_text.size()) / 1e6;
  row("prepare --tokenizer byte, FIFO input", big_mb, hw, big, manifest_tokens(dir + "/big"));
  fs::remove_all(dir + "/big");

  // ---- 4. bits per byte after the same training time, BPE vs byte ----
  auto prep_small = [&](const std::vector<std::string>& extra, const std::string& out) {
    std::vector<std::string> args{worker, "prepare", "--input", kjv, "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    if (run(args, "", log).exit_code != 0) die("prepare of the KJV failed:\n" + read_file(log));
  };
  prep_small({}, dir + "/kjv-byte");
  prep_small({"--tokenizer-model", model}, dir + "/kjv-bpe");
  const auto tb = train_for(a, dir, dir + "/kjv-byte", "byte");
  const auto tp = train_for(a, dir, dir + "/kjv-bpe", "bpe");
  std::printf("#\n# GPT %d layers x %d wide, context %d, batch %d per rank, 2 ranks, ~%d s of training each\n", a.layers,
              a.embd, a.context, a.batch, a.train_seconds);
  std::printf("# %-20s %8s %8s %10s %14s %12s %10s\n", "tokens", "vocab", "steps", "seconds", "val nats/tok",
              "tokens/byte", "bits/byte");
  std::printf("  %-20s %8d %8d %10.1f %14.4f %12.4f %10.4f\n", "byte", 256, tb.steps, tb.seconds, tb.val_loss,
              tb.tokens_per_byte, tb.bpb);
  std::printf("  %-20s %8d %8d %10.1f %14.4f %12.4f %10.4f\n", "BPE (SentencePiece)", a.vocab, tp.steps, tp.seconds,
              tp.val_loss, tp.tokens_per_byte, tp.bpb);

  fs::remove_all(dir);
  const double vs_spm = (mb / enc.seconds) / (mb / spm.seconds);
  std::printf("#\n# tokens: ours %lld, spm_encode %lld (%s)\n", static_cast<long long>(our_tokens),
              static_cast<long long>(spm_tokens), our_tokens == spm_tokens ? "the same" : "DIFFERENT");
  std::printf("# goals: prepare_vs_spm_encode >= 0.8; peak_rss_mb <= 512; bpb_bpe_vs_byte: lower is better\n");
  std::printf("RESULT data_pipeline prepare_mb_per_s=%.2f prepare_vs_spm_encode=%.3f prepare_vs_spm_encode_1thread=%.3f "
              "peak_rss_mb=%.0f bpb_bpe_vs_byte=%.3f bpb_bpe=%.4f bpb_byte=%.4f tokens_match=%d\n",
              mb / bpe.seconds, vs_spm, spm.seconds / enc1.seconds, big.max_rss_mb, tp.bpb / tb.bpb, tp.bpb, tb.bpb,
              our_tokens == spm_tokens ? 1 : 0);
  return 0;
}
