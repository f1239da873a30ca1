// `greenshard-worker prepare` (worker/prepare.h) and the shards it writes
// (TokenDataset, worker/data.h): the real binary as a child process.
#include "common/spawn.h"
#include "common/fifo_feed.h"
#include "worker/data.h"
#include "worker/prepare.h"
#include "worker/tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using greenshard::TokenDataset;
using greenshard::TokenizerInfo;
using greenshard::TokenizerKind;

const std::string kWorker = GS_WORKER_BIN;

std::string generated_text(size_t lines, uint32_t seed) {
  static const char* kWords[] = {"the", "and", "of", "to", "in", "that", "shall", "he", "unto", "for", "his",
                                 "they", "lord", "with", "not", "all", "which", "him", "was", "is", "be",
                                 "from", "people", "house", "water", "light", "earth", "heaven", "über",
                                 "naïve", "café", "мир", "数据", "time", "king", "son"};
  std::mt19937 rng(seed);
  std::ostringstream out;
  for (size_t l = 0; l < lines; ++l) {
    const int n = 4 + static_cast<int>(rng() % 12);
    for (int w = 0; w < n; ++w) out << (w ? " " : "") << kWords[rng() % (sizeof kWords / sizeof kWords[0])];
    out << ".\n";
  }
  return out.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

gstest::RankResult prepare(std::vector<std::string> args) {
  args.insert(args.begin(), {kWorker, "prepare"});
  return gstest::run_process(args, {}, 300s);
}

std::vector<uint32_t> tokens_of(const TokenDataset& d) {
  std::vector<uint32_t> t(static_cast<size_t>(d.size()));
  for (int64_t i = 0; i < d.size(); ++i) t[static_cast<size_t>(i)] = d.at(i);
  return t;
}

// The token stream before the split, from the train and val datasets and
// the documented rule (blocks of kSplitBlockTokens; block b is val iff
// floor((b+1)f) > floor(bf)).
std::vector<uint32_t> unsplit(const std::vector<uint32_t>& train, const std::vector<uint32_t>& val, double f) {
  std::vector<uint32_t> all;
  size_t ti = 0, vi = 0;
  for (int64_t b = 0; ti < train.size() || vi < val.size(); ++b) {
    const bool is_val = std::floor((b + 1) * f) > std::floor(b * f);
    auto& src = is_val ? val : train;
    auto& i = is_val ? vi : ti;
    const size_t n = std::min<size_t>(greenshard::kSplitBlockTokens, src.size() - i);
    all.insert(all.end(), src.begin() + static_cast<std::ptrdiff_t>(i), src.begin() + static_cast<std::ptrdiff_t>(i + n));
    i += n;
    if (n < static_cast<size_t>(greenshard::kSplitBlockTokens)) {  // the last (partial) block: the rest is the other split's
      auto& other = is_val ? train : val;
      auto& j = is_val ? ti : vi;
      EXPECT_EQ(j, other.size()) << "only the last block may be partial";
      break;
    }
  }
  return all;
}

TEST(Prepare, ByteShardsReadBackAsTheTextInOrder) {
  gstest::TempDir dir;
  fs::create_directories(dir.file("in"));
  std::string text;
  for (int k = 0; k < 3; ++k) {  // a glob's matches in name order
    const std::string part = generated_text(400, 10 + k);
    write_file(dir.file("in/part-" + std::to_string(k) + ".txt"), part);
    text += part;
  }
  auto r = prepare({"--input", dir.file("in/part-*.txt"), "--out", dir.file("out"), "--shard-tokens", "5000",
                    "--val-fraction", "0.1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  TokenDataset train(dir.file("out/train-*.bin")), val(dir.file("out/val-*.bin"));
  EXPECT_GT(train.shards(), 3u);
  EXPECT_EQ(train.tokenizer().kind, TokenizerKind::kByte);
  EXPECT_EQ(train.vocab(), 256);
  EXPECT_EQ(train.size() + val.size(), static_cast<int64_t>(text.size()));
  const auto all = unsplit(tokens_of(train), tokens_of(val), 0.1);
  EXPECT_EQ(std::string(all.begin(), all.end()), text);
  EXPECT_FALSE(fs::exists(dir.file("out/train.bin"))) << "several shards: no single-file alias";
  const auto m = nlohmann::json::parse(read_file(dir.file("out/manifest.json")));
  EXPECT_EQ(m["train"]["tokens"].get<int64_t>(), train.size());
  EXPECT_EQ(m["val"]["tokens"].get<int64_t>(), val.size());
  EXPECT_EQ(m["inputs"].size(), 3u);
  EXPECT_EQ(m["tokenizer"]["kind"], "byte");
  EXPECT_NE(train.describe().find("tokenizer byte vocab 256"), std::string::npos) << train.describe();
}

TEST(Prepare, BpeShardsDecodeToTheTextAndRecordTheModel) {
  gstest::TempDir dir;
  const std::string text = generated_text(3000, 5);
  write_file(dir.file("corpus.txt"), text);
  auto r = prepare({"--input", dir.file("corpus.txt"), "--out", dir.file("out"), "--tokenizer", "bpe", "--vocab", "500",
                    "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string model = dir.file("out/tokenizer.model");
  auto tok = greenshard::load_sentencepiece(model);
  TokenDataset train(dir.file("out/train.bin")), val(dir.file("out/val-*.bin"));  // the alias and a glob
  EXPECT_EQ(train.tokenizer().kind, TokenizerKind::kSentencePiece);
  EXPECT_EQ(train.vocab(), 500);
  EXPECT_EQ(train.tokenizer().model_sha256, greenshard::file_sha256(model));
  EXPECT_EQ(train.shard(0).version(), 2);
  EXPECT_EQ(train.shard(0).width(), 2);
  EXPECT_EQ(tok->decode(unsplit(tokens_of(train), tokens_of(val), 0.05)), text);
  EXPECT_LT(train.size() + val.size(), static_cast<int64_t>(text.size()) / 2);

  // The same model again with --tokenizer-model: the same tokens.
  auto r2 = prepare({"--input", dir.file("corpus.txt"), "--out", dir.file("again"), "--tokenizer-model", model});
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  EXPECT_EQ(read_file(dir.file("again/train-00000.bin")), read_file(dir.file("out/train-00000.bin")));
  EXPECT_EQ(read_file(dir.file("again/tokenizer.model")), read_file(model));

  // Training again elsewhere on other threads: the same model, the same shards.
  auto r3 = prepare({"--input", dir.file("corpus.txt"), "--out", dir.file("other"), "--tokenizer", "bpe", "--vocab", "500",
                     "--threads", "1"});
  ASSERT_EQ(r3.exit_code, 0) << r3.output;
  EXPECT_EQ(read_file(dir.file("other/tokenizer.model")), read_file(model));
  EXPECT_EQ(read_file(dir.file("other/train-00000.bin")), read_file(dir.file("out/train-00000.bin")));
  EXPECT_EQ(read_file(dir.file("other/val-00000.bin")), read_file(dir.file("out/val-00000.bin")));
}

TEST(Prepare, SameInputsSameBytesWhateverTheThreadsAndTheValShareIsTheFraction) {
  gstest::TempDir dir;
  std::string text;
  for (int k = 0; k < 8; ++k) text += generated_text(4000, 20 + k);  // ~2.5 MB: several chunks
  write_file(dir.file("corpus.txt"), text);
  for (const char* threads : {"1", "2", "2"}) {
    const std::string out = dir.file(std::string("out") + threads + (fs::exists(dir.file("out2")) ? "b" : ""));
    auto r = prepare({"--input", dir.file("corpus.txt"), "--out", out, "--val-fraction", "0.2", "--threads", threads,
                      "--shard-tokens", "300000"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  int compared = 0;
  for (const auto& e : fs::directory_iterator(dir.file("out1"))) {
    const auto name = e.path().filename().string();
    if (e.is_symlink()) continue;
    EXPECT_EQ(read_file(e.path().string()), read_file(dir.file("out2/" + name))) << name;
    EXPECT_EQ(read_file(e.path().string()), read_file(dir.file("out2b/" + name))) << name;
    ++compared;
  }
  EXPECT_GE(compared, 6);
  TokenDataset train(dir.file("out1/train-*.bin")), val(dir.file("out1/val-*.bin"));
  const double share = static_cast<double>(val.size()) / static_cast<double>(train.size() + val.size());
  EXPECT_NEAR(share, 0.2, 0.001);
}

// A token file of `n` tokens i*7 % vocab starting at `first`.
std::vector<uint32_t> ramp(int64_t first, int64_t n, int64_t vocab) {
  std::vector<uint32_t> t;
  for (int64_t i = first; i < first + n; ++i) t.push_back(static_cast<uint32_t>(i * 7 % vocab));
  return t;
}

TEST(TokenDataset, ShardsReadAsTheirConcatenation) {
  gstest::TempDir dir;
  const TokenizerInfo bpe{TokenizerKind::kSentencePiece, 1000, std::string(64, 'a')};
  std::vector<uint32_t> all;
  const int64_t sizes[] = {100, 1, 333};
  for (int k = 0; k < 3; ++k) {
    auto t = ramp(static_cast<int64_t>(all.size()), sizes[k], 1000);
    greenshard::write_token_file(dir.file("s-" + std::to_string(k) + ".bin"), t, bpe);
    all.insert(all.end(), t.begin(), t.end());
  }
  TokenDataset d(dir.file("s-*.bin"));
  EXPECT_EQ(d.shards(), 3u);
  EXPECT_EQ(d.size(), 434);
  EXPECT_EQ(d.vocab(), 1000);
  EXPECT_EQ(d.tokenizer().model_sha256, std::string(64, 'a'));
  EXPECT_EQ(tokens_of(d), all);
  // The sampler over shards: targets are the next tokens of the concatenation.
  greenshard::Sampler s(d, 16, 3);
  std::vector<int64_t> x, y;
  s.batch(0, 0, 0, 8, x, y);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ((x[i] + 7) % 1000, y[i]);
  // Version 1 files are byte-tokenizer datasets.
  greenshard::write_token_file(dir.file("v1.bin"), ramp(0, 50, 256), 256);
  TokenDataset v1(dir.file("v1.bin"));
  EXPECT_EQ(v1.shard(0).version(), 1);
  EXPECT_EQ(v1.tokenizer().kind, TokenizerKind::kByte);
  EXPECT_EQ(tokens_of(v1), ramp(0, 50, 256));
}

void expect_error_naming(const std::string& spec, const std::string& name, const std::string& what) {
  try {
    TokenDataset d(spec);
    ADD_FAILURE() << spec << " was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(TokenDataset, ABadShardOrAnotherTokenizerIsAnErrorNamingTheFile) {
  gstest::TempDir dir;
  const TokenizerInfo a{TokenizerKind::kSentencePiece, 1000, std::string(64, 'a')};
  const TokenizerInfo b{TokenizerKind::kSentencePiece, 1000, std::string(64, 'b')};
  greenshard::write_token_file(dir.file("t-0.bin"), ramp(0, 100, 1000), a);
  greenshard::write_token_file(dir.file("t-1.bin"), ramp(0, 100, 1000), a);
  fs::resize_file(dir.file("t-1.bin"), fs::file_size(dir.file("t-1.bin")) - 3);
  expect_error_naming(dir.file("t-*.bin"), dir.file("t-1.bin"), "truncated");
  greenshard::write_token_file(dir.file("t-1.bin"), ramp(0, 100, 1000), b);
  expect_error_naming(dir.file("t-*.bin"), dir.file("t-1.bin"), "differs from " + dir.file("t-0.bin"));
  greenshard::write_token_file(dir.file("t-1.bin"), ramp(0, 100, 256), 256);  // version 1: byte
  expect_error_naming(dir.file("t-*.bin"), dir.file("t-1.bin"), "tokenizer byte");
  expect_error_naming(dir.file("nothing-*.bin"), dir.file("nothing-*.bin"), "matches no token file");
  expect_error_naming(dir.file("missing.bin"), dir.file("missing.bin"), "cannot open");
}

// A SentencePiece BPE model (protobuf ModelProto, as sentencepiece_model.proto
// lays it out) with `pieces` pieces: <unk>, <s>, </s> and numbered normal
// pieces. Hand-built, because training one of more than 65,536 pieces takes
// far too long for a test; libsentencepiece loads it like a trained one.
std::string sentencepiece_model(int pieces) {
  auto varint = [](std::string& out, uint64_t v) {
    for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7F) | 0x80);
    out += static_cast<char>(v);
  };
  auto bytes_field = [&](std::string& out, int field, const std::string& b) {
    varint(out, (uint64_t(field) << 3) | 2);
    varint(out, b.size());
    out += b;
  };
  auto enum_field = [&](std::string& out, int field, uint64_t v) {
    varint(out, uint64_t(field) << 3);
    varint(out, v);
  };
  std::string model;
  for (int i = 0; i < pieces; ++i) {
    std::string piece;
    const std::string text = i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "p" + std::to_string(i);
    bytes_field(piece, 1, text);                   // piece
    varint(piece, (2 << 3) | 5);                   // score (float)
    const float score = -static_cast<float>(i);
    piece.append(reinterpret_cast<const char*>(&score), 4);
    enum_field(piece, 3, i == 0 ? 2 : i < 3 ? 3 : 1);  // type: UNKNOWN, CONTROL, NORMAL
    bytes_field(model, 1, piece);                  // ModelProto.pieces
  }
  std::string trainer;
  enum_field(trainer, 3, 2);                       // model_type: BPE
  enum_field(trainer, 4, static_cast<uint64_t>(pieces));  // vocab_size
  bytes_field(model, 2, trainer);                  // ModelProto.trainer_spec
  std::string normalizer;
  bytes_field(normalizer, 1, "identity");          // name
  bytes_field(model, 3, normalizer);               // ModelProto.normalizer_spec
  return model;
}

TEST(Prepare, AHandBuiltModelLoadsAndOneLargerThanTheTrainerTakesIsRefused) {
  gstest::TempDir dir;
  write_file(dir.file("ok.txt"), generated_text(2000, 1));
  // The builder is right: a model of 65,536 pieces (the limit) is taken.
  write_file(dir.file("max.model"), sentencepiece_model(greenshard::kMaxVocab));
  const auto ok = prepare({"--input", dir.file("ok.txt"), "--out", dir.file("o1"), "--val-fraction", "0",
                           "--tokenizer-model", dir.file("max.model")});
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("vocabulary 65536"), std::string::npos) << ok.output;
  // One piece more: refused at the edge, before any token file is written.
  write_file(dir.file("big.model"), sentencepiece_model(greenshard::kMaxVocab + 1));
  const auto big = prepare({"--input", dir.file("ok.txt"), "--out", dir.file("o2"), "--tokenizer-model", dir.file("big.model")});
  EXPECT_EQ(big.exit_code, 2) << big.output;
  EXPECT_NE(big.output.find("--tokenizer-model: its vocabulary of 65537 is larger than the trainer takes (model.vocab <= 65536)"),
            std::string::npos)
      << big.output;
  EXPECT_FALSE(fs::exists(dir.file("o2"))) << "nothing written for a refused model";
}

// ---- bad input: exit 2, one line naming the flag or the file -------------

struct BadCase {
  const char* sentence;
  std::vector<std::string> args;   // after prepare; "@" is replaced by the temp dir
  const char* message;             // expected in the output ("@" = temp dir)
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.sentence; }

class BadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInput, ExitsTwoNamingTheFlagOrFile) {
  gstest::TempDir dir;
  write_file(dir.file("ok.txt"), generated_text(2000, 1));
  write_file(dir.file("tiny.txt"), "just a line\n");
  write_file(dir.file("empty.txt"), "");
  write_file(dir.file("nul.txt"), std::string("text\0with a NUL\n", 16));
  write_file(dir.file("latin1.txt"), "caf\xe9 au lait\n");
  write_file(dir.file("not.model"), "not a sentencepiece model\n");
  fs::create_directories(dir.file("adir"));
  auto subst = [&](std::string s) {
    for (size_t p; (p = s.find('@')) != std::string::npos;) s.replace(p, 1, dir.path());
    return s;
  };
  std::vector<std::string> args;
  for (const auto& a : GetParam().args) args.push_back(subst(a));
  const auto r = prepare(args);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("greenshard-worker: config error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(subst(GetParam().message)), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Prepare, BadInput,
    ::testing::Values(
        BadCase{"a missing file", {"--input", "@/missing.txt", "--out", "@/o"}, "--input: '@/missing.txt': cannot open"},
        BadCase{"a glob matching nothing", {"--input", "@/none-*.txt", "--out", "@/o"}, "'@/none-*.txt': the pattern matches no file"},
        BadCase{"an empty file", {"--input", "@/ok.txt", "@/empty.txt", "--out", "@/o"}, "'@/empty.txt': empty file"},
        BadCase{"a NUL byte", {"--input", "@/nul.txt", "--out", "@/o"}, "'@/nul.txt': not a text file"},
        BadCase{"invalid UTF-8", {"--input", "@/latin1.txt", "--out", "@/o"}, "'@/latin1.txt': not UTF-8 text"},
        BadCase{"a directory", {"--input", "@/adir", "--out", "@/o"}, "'@/adir': is a directory"},
        BadCase{"too little text for the val split", {"--input", "@/tiny.txt", "--out", "@/o"}, "--val-fraction"},
        BadCase{"val fraction 1", {"--input", "@/ok.txt", "--out", "@/o", "--val-fraction", "1"}, "--val-fraction: must be in [0, 1)"},
        BadCase{"val fraction negative", {"--input", "@/ok.txt", "--out", "@/o", "--val-fraction", "-0.1"}, "--val-fraction"},
        BadCase{"unknown tokenizer", {"--input", "@/ok.txt", "--out", "@/o", "--tokenizer", "wordpiece"}, "--tokenizer: must be byte or bpe"},
        BadCase{"vocab below 260", {"--input", "@/ok.txt", "--out", "@/o", "--tokenizer", "bpe", "--vocab", "255"}, "--vocab: must be in [260"},
        BadCase{"vocab above 2^31-1", {"--input", "@/ok.txt", "--out", "@/o", "--tokenizer", "bpe", "--vocab", "2147483648"}, "--vocab: must be in"},
        BadCase{"vocab above what the trainer takes", {"--input", "@/ok.txt", "--out", "@/o", "--tokenizer", "bpe", "--vocab", "65537"}, "--vocab: must be in [260, 65536]"},
        BadCase{"vocab too large for the text", {"--input", "@/ok.txt", "--out", "@/o", "--tokenizer", "bpe", "--vocab", "50000"}, "--vocab 50000: SentencePiece could not train"},
        BadCase{"vocab with the byte tokenizer", {"--input", "@/ok.txt", "--out", "@/o", "--vocab", "1000"}, "--vocab: only with --tokenizer bpe"},
        BadCase{"a missing model", {"--input", "@/ok.txt", "--out", "@/o", "--tokenizer-model", "@/missing.model"}, "--tokenizer-model: @/missing.model"},
        BadCase{"not a model", {"--input", "@/ok.txt", "--out", "@/o", "--tokenizer-model", "@/not.model"}, "--tokenizer-model: @/not.model: not a SentencePiece model"},
        BadCase{"a model with the byte tokenizer", {"--input", "@/ok.txt", "--out", "@/o", "--tokenizer", "byte", "--tokenizer-model", "@/not.model"}, "--tokenizer-model: needs --tokenizer bpe"},
        BadCase{"tiny shards", {"--input", "@/ok.txt", "--out", "@/o", "--shard-tokens", "10"}, "--shard-tokens: must be >= 512"},
        BadCase{"zero threads", {"--input", "@/ok.txt", "--out", "@/o", "--threads", "0"}, "--threads: must be in [1, 64]"},
        BadCase{"too many threads", {"--input", "@/ok.txt", "--out", "@/o", "--threads", "65"}, "--threads: must be in [1, 64]"},
        BadCase{"sample of 0 MB", {"--input", "@/ok.txt", "--out", "@/o", "--tokenizer", "bpe", "--sample-mb", "0"}, "--sample-mb"},
        BadCase{"no number", {"--input", "@/ok.txt", "--out", "@/o", "--vocab", "lots"}, "--vocab"}),
    [](const ::testing::TestParamInfo<BadCase>& i) { return gstest::test_name(i.param.sentence); });

TEST(Prepare, ErrorsLeaveNoShardsBehind) {
  gstest::TempDir dir;
  write_file(dir.file("ok.txt"), generated_text(2000, 1));
  write_file(dir.file("nul.txt"), std::string("text\0", 5));
  const auto r = prepare({"--input", dir.file("ok.txt"), dir.file("nul.txt"), "--out", dir.file("o")});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  for (const auto& e : fs::directory_iterator(dir.file("o"))) ADD_FAILURE() << "left behind: " << e.path();
}

// ---- streaming: bounded memory on a corpus far larger than the bound -----

// Peak RSS of a child process (wait4's ru_maxrss, KiB) and its exit status.
struct ChildRun {
  int status = -1;
  long max_rss_kib = 0;
};

ChildRun run_measured(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  ChildRun run;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) return run;
  posix_spawn_file_actions_destroy(&fa);
  struct rusage ru {};
  if (::wait4(pid, &run.status, 0, &ru) == pid) run.max_rss_kib = ru.ru_maxrss;
  return run;
}

TEST(Prepare, StreamsACorpusThreeTimesTheMemoryBoundThroughAPipeInBoundedMemory) {
  // 1.5 GB of text through a named pipe (no input file on disk), the byte
  // tokenizer (BPE encoding of 1.5 GB would take minutes on 2 cores; the
  // memory bound is the same code path: chunks in flight, ordered writer).
  gstest::TempDir dir;
  const std::string fifo = dir.file("corpus.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string block = generated_text(20000, 7);  // ~1.3 MB, written over and over
  const int64_t repeats = (int64_t{1536} << 20) / static_cast<int64_t>(block.size()) + 1;
  const int64_t total = repeats * static_cast<int64_t>(block.size());
  std::thread writer = gstest::feed_fifo(fifo, block, repeats);  // blocks until prepare opens it
  const auto run = run_measured({kWorker, "prepare", "--input", fifo, "--out", dir.file("out"), "--threads", "2"},
                                dir.file("log.txt"));
  writer.join();
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << read_file(dir.file("log.txt"));
  EXPECT_GT(total, int64_t{3} * (512 << 20) - (int64_t{1} << 20) * 2);
  EXPECT_LE(run.max_rss_kib, 512 * 1024) << "peak RSS " << run.max_rss_kib / 1024 << " MB";
  const auto m = nlohmann::json::parse(read_file(dir.file("out/manifest.json")));
  EXPECT_EQ(m["input_bytes"].get<int64_t>(), total);
  EXPECT_EQ(m["train"]["tokens"].get<int64_t>() + m["val"]["tokens"].get<int64_t>(), total);
  EXPECT_GT(m["train"]["files"].size(), 1u) << "shards of 2^28 tokens";
  // The shards hold the stream: spot-check the first and last bytes.
  TokenDataset train(dir.file("out/train-*.bin"));
  EXPECT_EQ(train.size(), m["train"]["tokens"].get<int64_t>());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(train.at(i), static_cast<unsigned char>(block[static_cast<size_t>(i)]));
}

}  // namespace
