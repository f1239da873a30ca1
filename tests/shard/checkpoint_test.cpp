// Sharded checkpoints: save on N ranks, resume on M ranks (real rank
// processes on loopback), corruption and incomplete checkpoints.
#include "common/spawn.h"
#include "crc32c.h"  // shard/src: the DONE marker's checksum
#include "parity_harness.h"
#include "s3_client.h"  // shard/src: the test's own view of the bucket
#include "shard/s3_server.h"
#include "shard/checkpoint.h"
#include "shard/fully_shard.h"
#include "shard/rendezvous.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <iostream>
#include <sstream>
#include <thread>

#include <signal.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

int run_rank() {
  try {
    gstest::TrainSpec spec;
    spec.steps = 5;
    spec.global_batch = 12;  // divisible by 2, 3 and 4 ranks
    spec.ckpt_root = env_or("GS_CKPT_ROOT", "");
    spec.save_at = std::stoi(env_or("GS_SAVE_AT", "-1"));
    spec.resume_dir = env_or("GS_RESUME", "");
    spec.model_seed = std::stoi(env_or("GS_SEED", "1234"));
    spec.n_layer = std::stoi(env_or("GS_LAYERS", "3"));
    spec.steps = std::stoi(env_or("GS_STEPS", "5"));
    spec.import_path = env_or("GS_IMPORT", "");
    spec.export_path = env_or("GS_EXPORT", "");
    spec.export_torch_save = env_or("GS_EXPORT_FORMAT", "") == "torch_save";
    spec.dump_optimizer = true;
    spec.save_every = std::stoi(env_or("GS_SAVE_EVERY", "0"));
    spec.async_save = env_or("GS_ASYNC", "0") == "1";
    spec.keep_last = std::stoi(env_or("GS_KEEP_LAST", "0"));
    if (!env_or("GS_FAIL_AT", "").empty() && env_or("RANK", "0") == env_or("GS_FAIL_RANK", "1")) {
      // This rank's save fails at the point GS_FAIL_AT, like a write error.
      shard::set_checkpoint_fault_hook([want = env_or("GS_FAIL_AT", "")](const std::string& point) {
        if (point == want) throw std::runtime_error("injected write error at " + point);
      });
    }
    if (!env_or("GS_PAUSE_AT", "").empty() && env_or("RANK", "0") == "0") {
      // Rank 0's save stops at GS_PAUSE_AT: it creates <GS_PAUSE_FILE>.reached
      // and goes on once <GS_PAUSE_FILE>.go exists (the test acts between).
      shard::set_checkpoint_fault_hook(
          [want = env_or("GS_PAUSE_AT", ""), file = env_or("GS_PAUSE_FILE", "")](const std::string& point) {
            if (point != want) return;
            std::ofstream(file + ".reached") << "1";
            for (int i = 0; i < 6000 && !fs::exists(file + ".go"); ++i)
              std::this_thread::sleep_for(std::chrono::milliseconds(10));
          });
    }
    if (!env_or("GS_KILL_AT", "").empty() && env_or("RANK", "0") == env_or("GS_KILL_RANK", "1")) {
      // This rank SIGKILLs itself when its save reaches the point GS_KILL_AT
      // (the run saves once, at GS_SAVE_AT).
      shard::set_checkpoint_fault_hook([want = env_or("GS_KILL_AT", "")](const std::string& point) {
        if (point == want) ::kill(::getpid(), SIGKILL);
      });
    }
    shard::FullyShardOptions o;
    o.strategy = shard::parse_sharding_strategy(env_or("GS_STRATEGY", "FULL_SHARD"));
    o.wrap.predicate = [](const std::string& name, const torch::nn::Module&) {
      return name.rfind("h.", 0) == 0 && name.find('.', 2) == std::string::npos;
    };
    if (o.strategy == shard::ShardingStrategy::kHybridShard) o.hybrid_shard_group_size = 2;
    o.timeout = std::chrono::seconds(60);
    auto r = gstest::fsdp_train(spec, o, nullptr);
    if (env_or("RANK", "0") == "0") gstest::save_result(r, env_or("GS_OUT", ""));
    return 0;
  } catch (const std::exception& e) {
    std::cout << "ERROR: " << e.what() << std::endl;
    return 2;
  }
}

struct Gang {
  std::vector<gstest::RankResult> ranks;
  bool ok() const {
    for (const auto& r : ranks)
      if (r.exit_code != 0) return false;
    return true;
  }
  std::string output() const {
    std::string s;
    for (const auto& r : ranks) s += "--- rank " + std::to_string(r.rank) + "\n" + r.output;
    return s;
  }
};

Gang launch(int world, std::map<std::string, std::string> env) {
  gstest::SpawnOptions so;
  so.world_size = world;
  so.timeout = std::chrono::seconds(180);
  so.env = std::move(env);
  so.env["GS_CHECKPOINT_RANK"] = "1";
  so.env["OMP_NUM_THREADS"] = "1";
  return Gang{gstest::run_ranks({gstest::self_exe()}, so)};
}

double rel_err(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-12);
}

struct ReshardCase {
  const char* sentence;
  int save_world;
  int load_world;
  const char* strategy;
  const char* load_strategy;
  double tol;
};

class Resume : public ::testing::TestWithParam<ReshardCase> {};

TEST_P(Resume, ContinuesLikeTheUninterruptedRun) {
  const auto& c = GetParam();
  SCOPED_TRACE(c.sentence);
  gstest::TempDir dir;
  const std::string root = dir.file("ckpt");
  // Uninterrupted: 5 steps, saving after 2.
  auto a = launch(c.save_world, {{"GS_CKPT_ROOT", root}, {"GS_SAVE_AT", "2"}, {"GS_OUT", dir.file("a.pt")},
                                 {"GS_STRATEGY", c.strategy}});
  ASSERT_TRUE(a.ok()) << a.output();
  ASSERT_FALSE(shard::latest_checkpoint(root).empty());
  // Resumed from step 2 on another world size, from a differently seeded
  // model: everything must come from the checkpoint.
  auto b = launch(c.load_world, {{"GS_CKPT_ROOT", root}, {"GS_RESUME", "latest"}, {"GS_SEED", "99"},
                                 {"GS_OUT", dir.file("b.pt")}, {"GS_STRATEGY", c.load_strategy}});
  ASSERT_TRUE(b.ok()) << b.output();
  auto ra = gstest::load_result(dir.file("a.pt"));
  auto rb = gstest::load_result(dir.file("b.pt"));
  ASSERT_EQ(ra.losses.size(), 5u);
  ASSERT_EQ(rb.losses.size(), 3u) << "resumed at step 2";
  for (size_t i = 0; i < 3; ++i)
    EXPECT_LE(std::abs(rb.losses[i] - ra.losses[i + 2]) / ra.losses[i + 2], c.tol) << "step " << i + 2;
  for (const auto& [name, t] : ra.params) EXPECT_LE(rel_err(rb.params.at(name), t), c.tol) << name;
}

const ReshardCase kCases[] = {
    {"two ranks save, two ranks resume: the same continuation", 2, 2, "FULL_SHARD", "FULL_SHARD", 1e-7},
    {"two ranks save, one rank resumes", 2, 1, "FULL_SHARD", "FULL_SHARD", 1e-5},
    {"two ranks save, three ranks resume (new padding)", 2, 3, "FULL_SHARD", "FULL_SHARD", 1e-5},
    {"two ranks save, four ranks resume (reshard up)", 2, 4, "FULL_SHARD", "FULL_SHARD", 1e-5},
    {"four ranks save, two ranks resume (reshard down)", 4, 2, "FULL_SHARD", "FULL_SHARD", 1e-5},
    {"four ranks save, three ranks resume (new padding)", 4, 3, "FULL_SHARD", "FULL_SHARD", 1e-5},
    {"no-shard replicas save, full-shard pair resumes", 2, 2, "NO_SHARD", "FULL_SHARD", 1e-5},
    {"hybrid two-by-two saves, no-shard pair resumes", 4, 2, "HYBRID_SHARD", "NO_SHARD", 1e-5},
};

std::string case_name(const ::testing::TestParamInfo<ReshardCase>& info) { return gstest::test_name(info.param.sentence); }

INSTANTIATE_TEST_SUITE_P(Table, Resume, ::testing::ValuesIn(kCases), case_name);

// Right after loading, before any step: parameters and AdamW state are the
// saved ones, bit for bit, whatever the new world size.
class Restore : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(Restore, ParametersAndOptimizerStateAreBitwiseTheSaved) {
  const auto& [sentence, load_world] = GetParam();
  SCOPED_TRACE(sentence);
  gstest::TempDir dir;
  const std::string root = dir.file("ckpt");
  auto a = launch(2, {{"GS_CKPT_ROOT", root}, {"GS_STEPS", "2"}, {"GS_SAVE_AT", "2"}, {"GS_OUT", dir.file("a.pt")}});
  ASSERT_TRUE(a.ok()) << a.output();
  auto b = launch(load_world, {{"GS_CKPT_ROOT", root}, {"GS_STEPS", "2"}, {"GS_RESUME", "latest"}, {"GS_SEED", "99"},
                               {"GS_OUT", dir.file("b.pt")}});
  ASSERT_TRUE(b.ok()) << b.output();
  auto ra = gstest::load_result(dir.file("a.pt"));
  auto rb = gstest::load_result(dir.file("b.pt"));
  ASSERT_TRUE(ra.params.count("adam.step")) << "optimizer state must be part of the comparison";
  EXPECT_EQ(ra.params.size(), rb.params.size());
  for (const auto& [name, t] : ra.params) {
    ASSERT_TRUE(rb.params.count(name)) << name;
    EXPECT_TRUE(at::equal(rb.params.at(name), t)) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, Restore,
                         ::testing::Values(std::make_pair("saved on two, loaded on one", 1),
                                           std::make_pair("saved on two, loaded on two", 2),
                                           std::make_pair("saved on two, loaded on three", 3),
                                           std::make_pair("saved on two, loaded on four", 4)),
                         [](const auto& info) { return gstest::test_name(info.param.first); });

// SIGKILL of one rank at a point inside the save (set_checkpoint_fault_hook
// in the rank, from GS_KILL_AT / GS_KILL_RANK).
struct CrashCase {
  const char* sentence;
  const char* point;
  int rank;
  // What the partial checkpoint directory holds then.
  std::function<void(const fs::path&)> expect_left;
  bool async = false;  // the save is asynchronous (the kill hits its background thread)
};

class CrashDuringSave : public ::testing::TestWithParam<CrashCase> {};

TEST_P(CrashDuringSave, PreviousCheckpointStaysLoadableAndThePartialOneIsIgnored) {
  const auto& c = GetParam();
  SCOPED_TRACE(c.sentence);
  gstest::TempDir dir;
  const std::string root = dir.file("ckpt");
  auto first = launch(2, {{"GS_CKPT_ROOT", root}, {"GS_STEPS", "3"}, {"GS_SAVE_AT", "2"}, {"GS_OUT", dir.file("a.pt")}});
  ASSERT_TRUE(first.ok()) << first.output();
  const std::string step2 = (fs::path(root) / "step_00000002").string();
  const fs::path step4 = fs::path(root) / "step_00000004";
  ASSERT_EQ(shard::latest_checkpoint(root), step2);
  // Resume and save again at step 4; one rank is killed inside that save.
  auto crashed = launch(2, {{"GS_CKPT_ROOT", root}, {"GS_RESUME", "latest"}, {"GS_STEPS", "5"}, {"GS_SAVE_AT", "4"},
                            {"GS_KILL_AT", c.point}, {"GS_KILL_RANK", std::to_string(c.rank)},
                            {"GS_ASYNC", c.async ? "1" : "0"}, {"GS_OUT", dir.file("b.pt")}});
  ASSERT_FALSE(crashed.ok());
  const int survivor = 1 - c.rank;
  EXPECT_EQ(crashed.ranks[c.rank].signal, SIGKILL) << crashed.output();
  EXPECT_FALSE(crashed.ranks[survivor].timed_out) << "the survivor must notice the dead peer: " << crashed.output();
  EXPECT_NE(crashed.ranks[survivor].exit_code, 0) << crashed.output();
  c.expect_left(step4);
  EXPECT_FALSE(fs::exists(step4 / "DONE"));
  EXPECT_EQ(shard::latest_checkpoint(root), step2) << "the partial checkpoint is ignored";
  // The previous checkpoint loads, by name.
  auto previous = launch(2, {{"GS_CKPT_ROOT", root}, {"GS_RESUME", step2}, {"GS_STEPS", "3"}, {"GS_OUT", dir.file("p.pt")}});
  ASSERT_TRUE(previous.ok()) << previous.output();
  EXPECT_EQ(gstest::load_result(dir.file("p.pt")).losses.size(), 1u) << "resumed at step 2";
  // Relaunch: resumes from step 2 (latest), and the interrupted save now completes.
  auto again = launch(2, {{"GS_CKPT_ROOT", root}, {"GS_RESUME", "latest"}, {"GS_STEPS", "5"}, {"GS_SAVE_AT", "4"},
                          {"GS_OUT", dir.file("c.pt")}});
  ASSERT_TRUE(again.ok()) << again.output();
  EXPECT_EQ(gstest::load_result(dir.file("c.pt")).losses.size(), 3u);
  EXPECT_EQ(shard::latest_checkpoint(root), step4.string());
}

const CrashCase kCrashes[] = {
    {"rank 1 dies with part of its shard in its temp file", "shard_partially_written", 1,
     [](const fs::path& d) {
       ASSERT_TRUE(fs::exists(d / "rank_1.bin.tmp"));
       EXPECT_GT(fs::file_size(d / "rank_1.bin.tmp"), 8u) << "shard bytes (past the magic) were written";
       EXPECT_FALSE(fs::exists(d / "rank_1.bin"));
       EXPECT_FALSE(fs::exists(d / "manifest.txt"));
     }},
    {"rank 1 dies after renaming its shard file, before the manifest", "shard_renamed", 1,
     [](const fs::path& d) {
       EXPECT_TRUE(fs::exists(d / "rank_1.bin"));
       EXPECT_FALSE(fs::exists(d / "manifest.txt"));
     }},
    {"rank 0 dies after writing the manifest, before DONE", "manifest_written", 0,
     [](const fs::path& d) {
       EXPECT_TRUE(fs::exists(d / "rank_0.bin"));
       EXPECT_TRUE(fs::exists(d / "rank_1.bin"));
       EXPECT_TRUE(fs::exists(d / "manifest.txt"));
     }},
    {"rank 1 is SIGKILLed while its asynchronous save writes its shard", "shard_partially_written", 1,
     [](const fs::path& d) {
       ASSERT_TRUE(fs::exists(d / "rank_1.bin.tmp"));
       EXPECT_FALSE(fs::exists(d / "rank_1.bin"));
       EXPECT_FALSE(fs::exists(d / "manifest.txt"));
     },
     true},
    {"rank 0 is SIGKILLed after its asynchronous save wrote the manifest, before DONE", "manifest_written", 0,
     [](const fs::path& d) { EXPECT_TRUE(fs::exists(d / "manifest.txt")); }, true},
};

INSTANTIATE_TEST_SUITE_P(Table, CrashDuringSave, ::testing::ValuesIn(kCrashes),
                         [](const ::testing::TestParamInfo<CrashCase>& info) {
                           return gstest::test_name(info.param.sentence);
                         });

class Damaged : public ::testing::Test {
 protected:
  void SetUp() override {
    root = dir.file("ckpt");
    // Checkpoints after 2 and after 4 steps.
    for (const char* at : {"2", "4"}) {
      auto r = launch(2, {{"GS_CKPT_ROOT", root}, {"GS_SAVE_AT", at}, {"GS_OUT", dir.file("x.pt")}});
      ASSERT_TRUE(r.ok()) << r.output();
    }
    step2 = (fs::path(root) / "step_00000002").string();
    step4 = (fs::path(root) / "step_00000004").string();
    ASSERT_EQ(shard::latest_checkpoint(root), step4);
  }
  Gang resume(const std::string& d, std::map<std::string, std::string> extra = {}) {
    extra["GS_CKPT_ROOT"] = root;
    extra["GS_RESUME"] = d;
    extra.emplace("GS_OUT", dir.file("y.pt"));
    return launch(2, extra);
  }
  gstest::TempDir dir;
  std::string root, step2, step4;
};

TEST_F(Damaged, CorruptShardIsAClearErrorNamingTheFileAndThePreviousCheckpointStillLoads) {
  const std::string victim = step4 + "/rank_1.bin";
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  auto bad = resume(step4);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.output().find("rank_1.bin: checksum mismatch"), std::string::npos) << bad.output();
  auto good = resume(step2);
  EXPECT_TRUE(good.ok()) << good.output();
}

TEST_F(Damaged, TruncatedOrMissingShardIsAClearErrorAndThePreviousCheckpointStillLoads) {
  fs::resize_file(step4 + "/rank_0.bin", 64);
  auto bad = resume(step4);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.output().find("rank_0.bin has 64 bytes"), std::string::npos) << bad.output();
  auto good = resume(step2);
  EXPECT_TRUE(good.ok()) << good.output();
  fs::remove(step4 + "/rank_0.bin");
  bad = resume(step4);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.output().find("missing file " + step4 + "/rank_0.bin"), std::string::npos) << bad.output();
  good = resume(step2);
  EXPECT_TRUE(good.ok()) << good.output();
}

TEST_F(Damaged, CheckpointWithoutDoneMarkerIsNotTrusted) {
  fs::remove(step4 + "/DONE");  // as if the save had crashed before DONE
  EXPECT_EQ(shard::latest_checkpoint(root), step2);
  auto bad = resume(step4);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.output().find("no DONE marker"), std::string::npos) << bad.output();
  EXPECT_TRUE(resume("latest").ok());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Rewrites a checkpoint's manifest and its DONE marker (the manifest's
// CRC-32C) to match, as another writer version would have.
void rewrite_manifest(const std::string& dir, const std::string& text) {
  std::ofstream(dir + "/manifest.txt", std::ios::binary | std::ios::trunc) << text;
  char done[64];
  std::snprintf(done, sizeof done, "manifest %016llx\n",
                static_cast<unsigned long long>(shard::crc32c(0, text.data(), text.size())));
  std::ofstream(dir + "/DONE", std::ios::binary | std::ios::trunc) << done;
}

// Applies f to every "param ..." line's tokens.
std::string map_param_lines(const std::string& text, const std::function<void(std::vector<std::string>&)>& f) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.rfind("param ", 0) == 0) {
      std::istringstream ls(line);
      std::vector<std::string> tok;
      for (std::string t; ls >> t;) tok.push_back(t);
      f(tok);
      line.clear();
      for (const auto& t : tok) line += (line.empty() ? "" : " ") + t;
    }
    out += line + "\n";
  }
  return out;
}

std::string with_version(const std::string& text, int version) {
  const auto eol = text.find('\n');
  return "greenshard-checkpoint " + std::to_string(version) + text.substr(eol);
}

// The unit lines' shard sizes (numel) of a manifest.
std::vector<int64_t> unit_shards(const std::string& text) {
  std::istringstream in(text);
  std::vector<int64_t> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string key, name;
    int64_t numel = 0, padded = 0, shard = 0;
    if (ls >> key && key == "unit" && ls >> name >> numel >> padded >> shard) out.push_back(shard);
  }
  return out;
}

// A version-3 manifest for the same files, as GreenShard before chunk
// indexes wrote it: no chunk_bytes line, and after each file line the
// CRC-32C of every segment (unit u's part p: master, exp_avg, exp_avg_sq).
std::string as_version3(const std::string& v4, const std::string& dir) {
  const auto shards = unit_shards(v4);
  std::istringstream in(v4);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("greenshard-checkpoint ", 0) == 0) line = "greenshard-checkpoint 3";
    if (line.rfind("chunk_bytes ", 0) == 0) continue;
    if (line.rfind("file ", 0) != 0) {
      out += line + "\n";
      continue;
    }
    std::istringstream ls(line);
    std::string key, name, size, crc;
    ls >> key >> name >> size >> crc;
    out += "file " + name + " " + size + " " + crc + "\nsegments";
    const std::string bytes = read_file(dir + "/" + name);
    size_t at = 8;
    for (int64_t shard : shards)
      for (int part = 0; part < 3; ++part) {
        const size_t n = static_cast<size_t>(shard) * sizeof(float);
        char h[20];
        std::snprintf(h, sizeof h, " %016llx",
                      static_cast<unsigned long long>(shard::crc32c(0, bytes.data() + at, n)));
        out += h;
        at += n;
      }
    out += "\n";
  }
  return out;
}

// The manifest's size and CRC-32C of every shard file, and its chunk
// index's CRC-32C of every 64 KiB chunk, are those of the bytes on disk.
TEST_F(Damaged, ManifestAndChunkIndexChecksumsAreThoseOfTheFilesBytes) {
  const std::string text = read_file(step4 + "/manifest.txt");
  std::istringstream in(text);
  int files = 0;
  int64_t chunk_bytes = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "chunk_bytes") ls >> chunk_bytes;
    if (key != "file") continue;
    std::string name, sum, index_name, index_sum;
    int64_t size = 0;
    ls >> name >> size >> sum >> index_name >> index_sum;
    SCOPED_TRACE(name);
    const std::string bytes = read_file(step4 + "/" + name);
    EXPECT_EQ(static_cast<int64_t>(bytes.size()), size);
    EXPECT_EQ(std::stoull(sum, nullptr, 16), shard::crc32c(0, bytes.data(), bytes.size()));
    const std::string index = read_file(step4 + "/" + index_name);
    EXPECT_EQ(std::stoull(index_sum, nullptr, 16), shard::crc32c(0, index.data(), index.size()));
    ASSERT_EQ(chunk_bytes, 65536);
    const size_t count = (bytes.size() + chunk_bytes - 1) / chunk_bytes;
    ASSERT_EQ(index.size(), 24 + 4 * count);
    EXPECT_EQ(index.substr(0, 8), "GSCRC001");
    for (size_t i = 0; i < count; ++i) {
      uint32_t want = 0;
      std::memcpy(&want, index.data() + 24 + 4 * i, 4);  // (little-endian host)
      const size_t at = i * chunk_bytes, n = std::min<size_t>(chunk_bytes, bytes.size() - at);
      EXPECT_EQ(want, shard::crc32c(0, bytes.data() + at, n)) << "chunk " << i;
    }
    ++files;
  }
  EXPECT_EQ(files, 2);
}

TEST_F(Damaged, CorruptChunkIndexIsAClearError) {
  {
    std::fstream f(step4 + "/rank_0.crc", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(30);
    f.put('\x5a');
  }
  auto bad = resume(step4);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.output().find("rank_0.crc: checksum mismatch"), std::string::npos) << bad.output();
  EXPECT_TRUE(resume(step2).ok());
}

TEST_F(Damaged, ManifestNamesEveryParametersDtypeAndVersionsTwoAndThreeStillLoad) {
  const std::string v4 = read_file(step4 + "/manifest.txt");
  ASSERT_EQ(v4.rfind("greenshard-checkpoint 4\n", 0), 0u) << v4.substr(0, 40);
  const std::string v3 = as_version3(v4, step4);
  int params = 0;
  map_param_lines(v4, [&](std::vector<std::string>& tok) {
    ++params;
    // param <name> <offset> <numel> <dtype> <ndim> <dims...>
    ASSERT_GE(tok.size(), 6u);
    EXPECT_EQ(tok[4], "float32") << tok[1];
    EXPECT_EQ(tok.size(), 6u + std::stoul(tok[5])) << tok[1];
  });
  EXPECT_GT(params, 0);
  auto want = resume(step4, {{"GS_OUT", dir.file("v4.pt")}});
  ASSERT_TRUE(want.ok()) << want.output();

  struct Case {
    const char* sentence;
    std::string manifest;
    const char* error;  // nullptr: loads like the version-3 manifest
  };
  const Case cases[] = {
      {"a version-3 manifest (segment checksums) loads like the version-4 one", v3, nullptr},
      {"a version-2 manifest (no dtypes) loads like the version-4 one",
       with_version(map_param_lines(v3, [](std::vector<std::string>& t) { t.erase(t.begin() + 4); }), 2), nullptr},
      {"a version-3 manifest with a wrong segment checksum is refused naming the file",
       [&] {
         std::string t = v3;
         const auto at = t.find("segments ") + 9 + 15;  // the first checksum's last digit
         t[at] = t[at] == '0' ? '1' : '0';
         return t;
       }(),
       "checksum mismatch"},
      {"a version-1 manifest is refused naming the version", with_version(v4, 1), "unsupported format version 1"},
      {"a version-5 manifest is refused naming the version", with_version(v4, 5), "unsupported format version 5"},
      {"a parameter stored in another dtype is refused naming it",
       map_param_lines(v4, [](std::vector<std::string>& t) { t[4] = "bfloat16"; }), "has dtype 'bfloat16'"},
      {"a file line whose size does not match the units is refused",
       [&] {
         std::string t = v4;
         const auto at = t.find("file rank_1.bin ") + 16;
         t.insert(at, "1");
         return t;
       }(),
       "rank_1.bin: "},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.sentence);
    rewrite_manifest(step4, c.manifest);
    auto got = resume(step4, {{"GS_OUT", dir.file("got.pt")}});
    if (!c.error) {
      ASSERT_TRUE(got.ok()) << got.output();
      auto a = gstest::load_result(dir.file("v4.pt")), b = gstest::load_result(dir.file("got.pt"));
      EXPECT_EQ(a.losses, b.losses);
      for (const auto& [name, t] : a.params) EXPECT_TRUE(at::equal(b.params.at(name), t)) << name;
    } else {
      EXPECT_FALSE(got.ok());
      // Named: the manifest's line, or the shard file a checksum refused.
      const bool in_data = std::string(c.error) == "checksum mismatch";
      EXPECT_NE(got.output().find(step4 + (in_data ? "/rank_" : "/manifest.txt line")), std::string::npos)
          << got.output();
      EXPECT_NE(got.output().find(c.error), std::string::npos) << got.output();
    }
  }
}

TEST_F(Damaged, ManifestOfAnotherModelIsAClearError) {
  auto bad = resume(step4, {{"GS_LAYERS", "2"}});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.output().find("was written for another model"), std::string::npos) << bad.output();
  EXPECT_NE(bad.output().find("manifest.txt"), std::string::npos) << bad.output();
}

TEST(ConsolidatedStateDict, ExportOnTwoRanksImportsOnThreeAndLoadsInLibTorch) {
  gstest::TempDir dir;
  const std::string file = dir.file("full.pt");
  auto a = launch(2, {{"GS_STEPS", "2"}, {"GS_EXPORT", file}, {"GS_OUT", dir.file("a.pt")}});
  ASSERT_TRUE(a.ok()) << a.output();
  auto ra = gstest::load_result(dir.file("a.pt"));
  // LibTorch reads it: every parameter by name, equal to the trained values.
  torch::serialize::InputArchive archive;
  archive.load_from(file);
  for (const auto& [name, t] : ra.params) {
    if (name.rfind("adam.", 0) == 0) continue;  // (optimizer state: not part of the export)
    at::Tensor got;
    ASSERT_TRUE(archive.try_read(name, got)) << name;
    EXPECT_TRUE(at::equal(got, t)) << name;
  }
  // Import into a differently seeded model on three ranks, zero steps.
  auto b = launch(3, {{"GS_STEPS", "0"}, {"GS_SEED", "99"}, {"GS_IMPORT", file}, {"GS_OUT", dir.file("b.pt")}});
  ASSERT_TRUE(b.ok()) << b.output();
  auto rb = gstest::load_result(dir.file("b.pt"));
  for (const auto& [name, t] : ra.params) {
    if (name.rfind("adam.", 0) != 0) {
      EXPECT_TRUE(at::equal(rb.params.at(name), t)) << name;
    }
  }
  // Another model's file: a clear error naming the parameter.
  auto c = launch(2, {{"GS_STEPS", "0"}, {"GS_LAYERS", "4"}, {"GS_IMPORT", file}, {"GS_OUT", dir.file("c.pt")}});
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.output().find("has no parameter 'h.3."), std::string::npos) << c.output();
}

TEST(ConsolidatedStateDict, TorchSaveExportReadsInPickleLoadAndByTorchLoadsProtocolAndImportsOnFour) {
  gstest::TempDir dir;
  const std::string file = dir.file("full_torch_save.pt");
  auto a = launch(2, {{"GS_STEPS", "2"}, {"GS_EXPORT", file}, {"GS_EXPORT_FORMAT", "torch_save"}, {"GS_OUT", dir.file("a.pt")}});
  ASSERT_TRUE(a.ok()) << a.output();
  auto ra = gstest::load_result(dir.file("a.pt"));
  std::map<std::string, at::Tensor> want;
  for (const auto& [name, t] : ra.params)
    if (name.rfind("adam.", 0) != 0) want[name] = t.contiguous();
  ASSERT_FALSE(want.empty());

  // C++: torch::jit::pickle_load (LibTorch's reader of torch.save files).
  std::ifstream in(file, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue v = torch::jit::pickle_load(bytes);
  ASSERT_TRUE(v.isGenericDict());
  size_t n = 0;
  for (const auto& kv : v.toGenericDict()) {
    const std::string name = kv.key().toStringRef();
    ASSERT_TRUE(want.count(name)) << "unexpected entry " << name;
    EXPECT_TRUE(at::equal(kv.value().toTensor(), want[name])) << name;
    ++n;
  }
  EXPECT_EQ(n, want.size());

  // Python's torch.load protocol (zip, data.pkl, _rebuild_tensor_v2,
  // persistent storages), followed by a standard-library reader because
  // PyTorch itself cannot be installed here: every tensor bitwise equal.
  const std::string out = dir.file("py");
  auto py = gstest::run_process({"/usr/bin/env", "python3", GS_SOURCE_DIR "/tests/shard/read_torch_save.py", file, out}, {},
                                std::chrono::seconds(120));
  ASSERT_EQ(py.exit_code, 0) << py.output;
  std::ifstream index_file(out + "/index.json");
  auto index = nlohmann::json::parse(index_file);
  ASSERT_EQ(index.size(), want.size());
  for (const auto& e : index) {
    const std::string name = e.at("name");
    ASSERT_TRUE(want.count(name)) << name;
    const at::Tensor& t = want[name];
    EXPECT_EQ(e.at("dtype"), "float32") << name;
    EXPECT_EQ(e.at("shape").get<std::vector<int64_t>>(), t.sizes().vec()) << name;
    std::ifstream f(out + "/" + e.at("file").get<std::string>(), std::ios::binary);
    std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_EQ(raw.size(), t.numel() * sizeof(float)) << name;
    EXPECT_EQ(std::memcmp(raw.data(), t.data_ptr(), raw.size()), 0) << name;
  }

  // Import of the torch.save file into a differently seeded model on 4 ranks.
  auto b = launch(4, {{"GS_STEPS", "0"}, {"GS_SEED", "7"}, {"GS_IMPORT", file}, {"GS_OUT", dir.file("b.pt")}});
  ASSERT_TRUE(b.ok()) << b.output();
  auto rb = gstest::load_result(dir.file("b.pt"));
  for (const auto& [name, t] : want) EXPECT_TRUE(at::equal(rb.params.at(name), t)) << name;

  // A file that is neither format: a clear error naming it.
  const std::string junk = dir.file("junk.pt");
  std::ofstream(junk) << "not a state dict";
  auto c = launch(2, {{"GS_STEPS", "0"}, {"GS_IMPORT", junk}, {"GS_OUT", dir.file("c.pt")}});
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.output().find(junk + " is neither a LibTorch archive nor a torch.save file"), std::string::npos)
      << c.output();
}

TEST(AsyncSave, RunWithAsyncSavesEveryTwoStepsIsBitwiseTheRunWithoutSavesAndWritesWhatASyncSaveWrites) {
  gstest::TempDir dir;
  auto plain = launch(2, {{"GS_STEPS", "7"}, {"GS_OUT", dir.file("plain.pt")}});
  ASSERT_TRUE(plain.ok()) << plain.output();
  auto async = launch(2, {{"GS_STEPS", "7"}, {"GS_CKPT_ROOT", dir.file("async")}, {"GS_SAVE_EVERY", "2"},
                          {"GS_ASYNC", "1"}, {"GS_OUT", dir.file("async.pt")}});
  ASSERT_TRUE(async.ok()) << async.output();
  auto sync = launch(2, {{"GS_STEPS", "7"}, {"GS_CKPT_ROOT", dir.file("sync")}, {"GS_SAVE_EVERY", "2"},
                         {"GS_OUT", dir.file("sync.pt")}});
  ASSERT_TRUE(sync.ok()) << sync.output();
  auto a = gstest::load_result(dir.file("plain.pt")), b = gstest::load_result(dir.file("async.pt"));
  EXPECT_EQ(a.losses, b.losses);
  ASSERT_EQ(a.params.size(), b.params.size());
  for (const auto& [name, t] : a.params) EXPECT_TRUE(at::equal(b.params.at(name), t)) << name;
  // Every asynchronous checkpoint is done and holds the bytes a synchronous
  // save of the same step writes.
  for (const char* step : {"step_00000002", "step_00000004", "step_00000006"})
    for (const char* f : {"DONE", "manifest.txt", "rank_0.bin", "rank_1.bin", "rank_0.crc", "rank_1.crc"}) {
      const std::string x = dir.file(std::string("async/") + step + "/" + f), y = dir.file(std::string("sync/") + step + "/" + f);
      ASSERT_TRUE(fs::exists(x)) << x;
      EXPECT_EQ(read_file(x), read_file(y)) << x;
    }
  // The last one resumes into the uninterrupted run's last step.
  auto resumed = launch(2, {{"GS_STEPS", "7"}, {"GS_CKPT_ROOT", dir.file("async")}, {"GS_RESUME", "latest"},
                            {"GS_OUT", dir.file("resumed.pt")}});
  ASSERT_TRUE(resumed.ok()) << resumed.output();
  auto c = gstest::load_result(dir.file("resumed.pt"));
  ASSERT_EQ(c.losses.size(), 1u);
  EXPECT_EQ(c.losses[0], a.losses.back());
  for (const auto& [name, t] : a.params) EXPECT_TRUE(at::equal(c.params.at(name), t)) << name;
}

TEST(AsyncSave, BackgroundWriteErrorOnOneRankFailsEveryRankAndLeavesNoDone) {
  gstest::TempDir dir;
  const std::string root = dir.file("ckpt");
  auto first = launch(2, {{"GS_CKPT_ROOT", root}, {"GS_STEPS", "3"}, {"GS_SAVE_AT", "2"}, {"GS_OUT", dir.file("a.pt")}});
  ASSERT_TRUE(first.ok()) << first.output();
  const std::string step2 = (fs::path(root) / "step_00000002").string();
  auto failed = launch(2, {{"GS_CKPT_ROOT", root}, {"GS_RESUME", "latest"}, {"GS_STEPS", "6"}, {"GS_SAVE_AT", "4"},
                           {"GS_ASYNC", "1"}, {"GS_FAIL_AT", "shard_partially_written"}, {"GS_FAIL_RANK", "1"},
                           {"GS_OUT", dir.file("b.pt")}});
  for (const auto& r : failed.ranks) {
    SCOPED_TRACE("rank " + std::to_string(r.rank));
    EXPECT_FALSE(r.timed_out) << failed.output();
    EXPECT_NE(r.exit_code, 0) << failed.output();
    EXPECT_NE(r.output.find("step_00000004 failed on rank(s) 1"), std::string::npos) << failed.output();
  }
  EXPECT_NE(failed.ranks[1].output.find("injected write error at shard_partially_written"), std::string::npos)
      << failed.output();
  EXPECT_FALSE(fs::exists(fs::path(root) / "step_00000004" / "DONE"));
  EXPECT_EQ(shard::latest_checkpoint(root), step2);
}

// ---- checkpoints in S3-compatible object storage (a real s3rver) ----
// s3rver itself does not check SigV4 signatures; tests/shard/s3rver_run.mjs
// checks them with the AWS SDK's signer (s3_client_test covers a wrong
// secret). These tests are about checkpoint semantics, not credentials.
class S3Checkpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& [k, v] : s3.env()) {
      env[k] = v;
      ::setenv(k.c_str(), v.c_str(), 1);  // latest_checkpoint() in this process
    }
    root = "s3://" + s3.bucket() + "/team/run1";
  }
  Gang run(int world, std::map<std::string, std::string> more) {
    for (const auto& [k, v] : env) more.emplace(k, v);
    more.emplace("GS_CKPT_ROOT", root);
    return launch(world, more);
  }
  shard::s3::Client client() { return shard::s3::Client(shard::s3::config_from_env()); }
  std::string key(const std::string& name) { return "team/run1/" + name; }

  gstest::S3Server s3;
  gstest::TempDir dir;
  std::map<std::string, std::string> env;
  std::string root;
};

TEST_F(S3Checkpoints, SaveLoadAndReshardTwoToThreeReadLikeALocalDirectory) {
  // The same run saves at step 2 to S3 and to a local directory.
  auto a = run(2, {{"GS_STEPS", "3"}, {"GS_SAVE_AT", "2"}, {"GS_OUT", dir.file("a.pt")}});
  ASSERT_TRUE(a.ok()) << a.output();
  const std::string local = dir.file("local");
  auto b = launch(2, {{"GS_CKPT_ROOT", local}, {"GS_STEPS", "3"}, {"GS_SAVE_AT", "2"}, {"GS_OUT", dir.file("b.pt")}});
  ASSERT_TRUE(b.ok()) << b.output();
  EXPECT_EQ(shard::latest_checkpoint(root), root + "/step_00000002");
  // Every object is the local file's bytes.
  auto c = client();
  for (const char* f : {"DONE", "manifest.txt", "rank_0.bin", "rank_1.bin", "rank_0.crc", "rank_1.crc"}) {
    auto got = c.get(s3.bucket(), key(std::string("step_00000002/") + f));
    ASSERT_TRUE(got) << f;
    EXPECT_EQ(*got, read_file(local + "/step_00000002/" + f)) << f;
  }
  // Resumed on 2 and on 3 ranks, from S3 and from the directory: the same.
  for (int world : {2, 3}) {
    SCOPED_TRACE(std::to_string(world) + " ranks resume");
    auto x = run(world, {{"GS_RESUME", "latest"}, {"GS_STEPS", "5"}, {"GS_OUT", dir.file("x.pt")}});
    ASSERT_TRUE(x.ok()) << x.output();
    auto y = launch(world, {{"GS_CKPT_ROOT", local}, {"GS_RESUME", "latest"}, {"GS_STEPS", "5"}, {"GS_OUT", dir.file("y.pt")}});
    ASSERT_TRUE(y.ok()) << y.output();
    auto rx = gstest::load_result(dir.file("x.pt")), ry = gstest::load_result(dir.file("y.pt"));
    ASSERT_EQ(rx.losses.size(), 3u) << "resumed at step 2";
    EXPECT_EQ(rx.losses, ry.losses);
    for (const auto& [name, t] : ry.params) EXPECT_TRUE(at::equal(rx.params.at(name), t)) << name;
  }
}

TEST_F(S3Checkpoints, WhatWeWroteReadsBackWithTheOfficialAwsClient) {
  auto a = run(2, {{"GS_STEPS", "3"}, {"GS_SAVE_AT", "2"}, {"GS_OUT", dir.file("a.pt")}});
  ASSERT_TRUE(a.ok()) << a.output();
  const std::string node = gstest::S3Server::node(), script = gstest::S3Server::script("s3_read.mjs");
  auto list = gstest::run_process({node, script, "list", s3.bucket(), key("step_00000002/")}, env, std::chrono::seconds(60));
  ASSERT_EQ(list.exit_code, 0) << list.output;
  auto c = client();
  for (const char* f : {"DONE", "manifest.txt", "rank_0.bin", "rank_1.bin", "rank_0.crc", "rank_1.crc"}) {
    const std::string k = key(std::string("step_00000002/") + f);
    const auto ours = c.get(s3.bucket(), k);
    ASSERT_TRUE(ours) << k;
    EXPECT_NE(list.output.find(k + " " + std::to_string(ours->size())), std::string::npos) << list.output;
    const std::string out = dir.file(std::string("official_") + f);
    auto get = gstest::run_process({node, script, "get", s3.bucket(), k, out}, env, std::chrono::seconds(60));
    ASSERT_EQ(get.exit_code, 0) << get.output;
    EXPECT_EQ(read_file(out), *ours) << k;
  }
}

TEST_F(S3Checkpoints, CorruptObjectOrMissingDoneIsRefusedAndThePreviousCheckpointLoads) {
  for (const char* at : {"2", "4"}) {
    auto r = run(2, {{"GS_SAVE_AT", at}, {"GS_OUT", dir.file("x.pt")}});
    ASSERT_TRUE(r.ok()) << r.output();
  }
  const std::string step2 = root + "/step_00000002", step4 = root + "/step_00000004";
  ASSERT_EQ(shard::latest_checkpoint(root), step4);
  auto c = client();
  // A flipped byte in rank 1's shard object.
  const std::string k = key("step_00000004/rank_1.bin");
  std::string bytes = *c.get(s3.bucket(), k);
  bytes[100] ^= 0x20;
  c.put(s3.bucket(), k, bytes.data(), bytes.size());
  auto bad = run(2, {{"GS_RESUME", step4}, {"GS_OUT", dir.file("y.pt")}});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.output().find(step4 + "/rank_1.bin: checksum mismatch"), std::string::npos) << bad.output();
  EXPECT_TRUE(run(2, {{"GS_RESUME", step2}, {"GS_OUT", dir.file("y.pt")}}).ok());
  // Without its DONE object, step 4 is not trusted: latest is step 2.
  c.remove(s3.bucket(), key("step_00000004/DONE"));
  EXPECT_EQ(shard::latest_checkpoint(root), step2);
  bad = run(2, {{"GS_RESUME", step4}, {"GS_OUT", dir.file("y.pt")}});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.output().find("no DONE marker"), std::string::npos) << bad.output();
  auto latest = run(2, {{"GS_RESUME", "latest"}, {"GS_OUT", dir.file("z.pt")}});
  ASSERT_TRUE(latest.ok()) << latest.output();
  EXPECT_EQ(gstest::load_result(dir.file("z.pt")).losses.size(), 3u) << "resumed at step 2";
}

TEST_F(S3Checkpoints, ServerDyingMidUploadFailsTheSaveOnEveryRankAndThePreviousCheckpointLoads) {
  auto first = run(2, {{"GS_STEPS", "3"}, {"GS_SAVE_AT", "2"}, {"GS_OUT", dir.file("a.pt")}});
  ASSERT_TRUE(first.ok()) << first.output();
  // Resume and save at step 4, asynchronously; rank 0's save pauses with its
  // shard half written; the server dies there.
  const std::string pause = dir.file("pause");
  Gang crashed;
  // The server stays down longer than the ranks' retry budget (1 s).
  std::thread gang([&] {
    crashed = run(2, {{"GS_RESUME", "latest"}, {"GS_STEPS", "6"}, {"GS_SAVE_AT", "4"}, {"GS_ASYNC", "1"},
                      {"GS_PAUSE_AT", "shard_partially_written"}, {"GS_PAUSE_FILE", pause},
                      {"GREENSHARD_S3_RETRY_SECONDS", "1"}, {"GS_OUT", dir.file("b.pt")}});
  });
  for (int i = 0; i < 12000 && !fs::exists(pause + ".reached"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool reached = fs::exists(pause + ".reached");
  s3.stop();
  std::ofstream(pause + ".go") << "1";
  gang.join();
  ASSERT_TRUE(reached) << crashed.output();
  for (const auto& r : crashed.ranks) {
    SCOPED_TRACE("rank " + std::to_string(r.rank));
    EXPECT_FALSE(r.timed_out) << crashed.output();
    EXPECT_NE(r.exit_code, 0) << crashed.output();
    EXPECT_NE(r.output.find("step_00000004 failed on rank(s) 0"), std::string::npos) << crashed.output();
  }
  // Back up on the same data: step 4 has no DONE, step 2 loads.
  s3.restart();
  auto c = client();
  EXPECT_FALSE(c.head(s3.bucket(), key("step_00000004/DONE")));
  EXPECT_EQ(shard::latest_checkpoint(root), root + "/step_00000002");
  auto again = run(2, {{"GS_RESUME", "latest"}, {"GS_STEPS", "3"}, {"GS_OUT", dir.file("c.pt")}});
  ASSERT_TRUE(again.ok()) << again.output();
  EXPECT_EQ(gstest::load_result(dir.file("c.pt")).losses.size(), 1u) << "resumed at step 2";
}

TEST_F(S3Checkpoints, RetentionDeletesOldPrefixes) {
  auto r = run(2, {{"GS_STEPS", "7"}, {"GS_SAVE_EVERY", "2"}, {"GS_ASYNC", "1"}, {"GS_KEEP_LAST", "2"},
                   {"GS_OUT", dir.file("a.pt")}});
  ASSERT_TRUE(r.ok()) << r.output();
  auto c = client();
  auto steps = c.list(s3.bucket(), key(""), "/").prefixes;
  EXPECT_EQ(steps, (std::vector<std::string>{key("step_00000004/"), key("step_00000006/")}));
  EXPECT_TRUE(c.list(s3.bucket(), key("step_00000002/")).objects.empty()) << "every object of the old prefix";
  EXPECT_EQ(shard::latest_checkpoint(root), root + "/step_00000006");
}

// One rank in this process with a model whose rank file spans several
// 5 MiB parts (GREENSHARD_S3_PART_MIB=5): a multipart save.
struct OneRank {
  OneRank()
      : rdzv(shard::Rendezvous::connect({"127.0.0.1", gstest::free_port(), 0, 1, 0, 1})),
        module(std::make_shared<torch::nn::Module>()) {
    torch::manual_seed(7);
    module->register_module("l", torch::nn::Linear(1200, 1200));  // 1.44 M floats x 3 parts: ~17 MB
    fsdp = std::make_unique<shard::FullyShardedModel>(module, rdzv, shard::FullyShardOptions{});
  }
  std::vector<at::Tensor> params() {
    std::vector<at::Tensor> out;
    for (const auto& p : fsdp->parameters()) out.push_back(p.detach().clone());
    return out;
  }
  void zero() {
    torch::NoGradGuard g;
    for (auto& p : fsdp->parameters()) p.zero_();
  }
  std::shared_ptr<shard::Rendezvous> rdzv;
  std::shared_ptr<torch::nn::Module> module;
  std::unique_ptr<shard::FullyShardedModel> fsdp;
};

struct EnvVar {
  EnvVar(const char* name, const std::string& value) : name(name) { ::setenv(name, value.c_str(), 1); }
  ~EnvVar() {
    ::unsetenv(name);
    shard::set_checkpoint_fault_hook(nullptr);
  }
  const char* name;
};

TEST_F(S3Checkpoints, ServerKilledMidMultipartSaveAndBackTwoSecondsLaterTheSaveSucceeds) {
  EnvVar part("GREENSHARD_S3_PART_MIB", "5");
  // The save stops after its first 8 MiB piece (one 5 MiB part uploaded):
  // the multipart upload is in flight. The server is killed there, the
  // save goes on (its next part is refused, backs off, retries), and the
  // server comes back on the same data 2 s later.
  std::mutex mu;
  std::condition_variable cv;
  bool reached = false, killed = false;
  auto go_on = [&] {
    std::lock_guard<std::mutex> lock(mu);
    killed = true;
    cv.notify_all();
  };
  shard::set_checkpoint_fault_hook([&](const std::string& point) {
    if (point != "shard_partially_written") return;
    std::unique_lock<std::mutex> lock(mu);
    reached = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::minutes(5), [&] { return killed; });
  });
  OneRank one;
  struct Release {  // (an early return must not leave the saver waiting)
    std::function<void()> f;
    ~Release() { f(); }
  } release{go_on};
  const auto saved = one.params();
  shard::CheckpointOptions async;
  async.async = true;
  const std::string step = shard::save_checkpoint(*one.fsdp, nullptr, root, 3, "", async);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::minutes(5), [&] { return reached; }));
  }
  auto c = client();
  const auto uploads = c.list_multipart(s3.bucket(), key("step_00000003/"));
  ASSERT_EQ(uploads.size(), 1u) << "a multipart upload is in flight";
  EXPECT_EQ(uploads[0].key, key("step_00000003/rank_0.bin"));
  s3.stop();
  go_on();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  s3.restart();
  ASSERT_NO_THROW(shard::wait_for_checkpoint(*one.fsdp)) << s3.log();
  EXPECT_EQ(shard::latest_checkpoint(root), step);
  EXPECT_GT(c.head(s3.bucket(), key("step_00000003/rank_0.bin")).value_or(0), int64_t{15} << 20);
  EXPECT_TRUE(c.list_multipart(s3.bucket(), key("")).empty()) << "completed";
  // It loads, bit for bit.
  one.zero();
  shard::load_checkpoint(*one.fsdp, nullptr, step);
  const auto loaded = one.params();
  ASSERT_EQ(loaded.size(), saved.size());
  for (size_t i = 0; i < saved.size(); ++i) EXPECT_TRUE(at::equal(loaded[i], saved[i])) << i;
}

TEST_F(S3Checkpoints, ASaveClearsItsStepPrefixBeforeItWrites) {
  // A dead save at step 3 (of 4 ranks, say) left objects there, a DONE even.
  auto c = client();
  for (const char* f : {"rank_0.bin", "rank_3.bin", "rank_3.crc", "manifest.txt", "DONE", "stray/x"})
    c.put(s3.bucket(), key(std::string("step_00000003/") + f), "dead", 4);
  c.put(s3.bucket(), key("step_00000002/rank_0.bin"), "other step", 10);
  OneRank one;
  const std::string step = shard::save_checkpoint(*one.fsdp, nullptr, root, 3);
  std::set<std::string> left;
  for (const auto& [k, size] : c.list(s3.bucket(), key("step_00000003/")).objects) left.insert(k);
  EXPECT_EQ(left, (std::set<std::string>{key("step_00000003/DONE"), key("step_00000003/manifest.txt"),
                                         key("step_00000003/rank_0.bin"), key("step_00000003/rank_0.crc")}));
  EXPECT_NE(c.get(s3.bucket(), key("step_00000003/rank_0.bin")).value_or("dead"), "dead");
  EXPECT_EQ(c.get(s3.bucket(), key("step_00000002/rank_0.bin")).value_or("?"), "other step") << "only its own step";
  one.zero();
  shard::load_checkpoint(*one.fsdp, nullptr, step);
}

// Retention's ListMultipartUploads and AbortMultipartUpload: s3rver 3.7.1
// lacks ListMultipartUploads (501); our runner tests/shard/s3rver_run.mjs
// answers it from s3rver's upload folders (as S3 documents it), so this is
// checked against that, not against AWS.
TEST_F(S3Checkpoints, RetentionAbortsTheJobsStaleMultipartUploads) {
  auto c = client();
  // Uploads that dead writers left: at an older step and at the step saved
  // now (stale); at a newer step (maybe a live save), outside the step
  // folders, and under another job's prefix (not ours): kept.
  const std::vector<std::string> stale = {key("step_00000001/rank_0.bin"), key("step_00000003/rank_1.bin")};
  const std::vector<std::string> kept = {key("step_00000009/rank_0.bin"), key("notes/x.bin"),
                                         "team/run10/step_00000001/rank_0.bin"};
  for (const auto& k : stale) c.upload_part(s3.bucket(), k, c.create_multipart(s3.bucket(), k), 1, "p", 1);
  for (const auto& k : kept) c.create_multipart(s3.bucket(), k);
  ASSERT_EQ(c.list_multipart(s3.bucket(), "team/").size(), 5u);
  OneRank one;
  shard::save_checkpoint(*one.fsdp, nullptr, root, 3);  // keep_last 0: no checkpoint is deleted ...
  shard::wait_for_checkpoint(*one.fsdp);                // (retention runs after DONE)
  std::set<std::string> left;
  for (const auto& u : c.list_multipart(s3.bucket(), "team/")) left.insert(u.key);
  EXPECT_EQ(left, std::set<std::string>(kept.begin(), kept.end())) << "... but dead uploads are aborted";
  EXPECT_EQ(shard::latest_checkpoint(root), root + "/step_00000003");
}

// CRC-32C: the check value, and the fast paths (three interleaved streams,
// crc32c_concat) against a bit-at-a-time reference of the polynomial.
uint32_t crc32c_bitwise(uint32_t crc, const unsigned char* p, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

TEST(Crc32c, MatchesTheBitwiseReferenceAtEveryLengthAndChainsAndConcatenates) {
  EXPECT_EQ(shard::crc32c(0, "123456789", 9), 0xE3069283u);  // the standard check value
  std::vector<unsigned char> data(200000);
  uint32_t x = 12345;
  for (auto& b : data) b = static_cast<unsigned char>((x = x * 1103515245u + 12345u) >> 16);
  for (size_t n : {0ul, 1ul, 7ul, 8ul, 4095ul, 4096ul, 4097ul, 65536ul, 65543ul, 199999ul}) {
    SCOPED_TRACE(n);
    const uint32_t want = crc32c_bitwise(0, data.data(), n);
    EXPECT_EQ(shard::crc32c(0, data.data(), n), want);
    for (size_t cut : {size_t{0}, n / 3, n}) {
      const uint32_t a = shard::crc32c(0, data.data(), cut), b = shard::crc32c(0, data.data() + cut, n - cut);
      EXPECT_EQ(shard::crc32c(a, data.data() + cut, n - cut), want) << "chained at " << cut;
      EXPECT_EQ(shard::crc32c_concat(a, b, n - cut), want) << "concatenated at " << cut;
    }
  }
}

TEST(CheckpointRetention, KeepsTheNewestKAndRemovesCrashedSavesOlderThanTheNewest) {
  // Parameters-only checkpoints of a one-rank model, in-process.
  gstest::TempDir dir;
  shard::RendezvousInfo info{"127.0.0.1", gstest::free_port(), 0, 1, 0, 1};
  auto rdzv = shard::Rendezvous::connect(info);
  auto m = std::make_shared<torch::nn::Module>();
  m->register_module("l", torch::nn::Linear(3, 3));
  shard::FullyShardedModel fsdp(m, rdzv, {});
  auto listing = [&] {
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(dir.path())) left.push_back(e.path().filename().string());
    std::sort(left.begin(), left.end());
    return left;
  };
  // Saves without DONE, as a crash leaves them: one older than what will
  // be saved, one newer (it may be a save in progress); and a folder that
  // is no checkpoint.
  for (const char* partial : {"step_00000002", "step_00000009"}) {
    fs::create_directories(dir.file(partial));
    std::ofstream(dir.file(std::string(partial) + "/rank_0.bin.tmp")) << "partial";
  }
  fs::create_directories(dir.file("notes"));
  // Without retention nothing is removed.
  shard::save_checkpoint(fsdp, nullptr, dir.path(), 1);
  shard::save_checkpoint(fsdp, nullptr, dir.path(), 3);
  EXPECT_EQ(listing(), (std::vector<std::string>{"notes", "step_00000001", "step_00000002", "step_00000003",
                                                 "step_00000009"}));
  shard::CheckpointOptions keep2;
  keep2.keep_last = 2;
  for (int s = 4; s <= 5; ++s) shard::save_checkpoint(fsdp, nullptr, dir.path(), s, "", keep2);
  shard::wait_for_checkpoint(fsdp);  // (retention runs after DONE, in the background)
  EXPECT_EQ(listing(), (std::vector<std::string>{"notes", "step_00000004", "step_00000005", "step_00000009"}));
  EXPECT_EQ(shard::latest_checkpoint(dir.path()), dir.file("step_00000005"));
  EXPECT_THROW(shard::save_checkpoint(fsdp, nullptr, dir.path(), -1), std::invalid_argument);
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("GS_CHECKPOINT_RANK")) return run_rank();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
