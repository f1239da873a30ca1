// Sharded checkpoints: save on N ranks, resume on M ranks (real rank
// processes on loopback), corruption and incomplete checkpoints.
#include "common/spawn.h"
#include "crc32c.h"  // shard/src: the DONE marker's checksum
#include "parity_harness.h"
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
#include <functional>
#include <iostream>
#include <sstream>

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
                            {"GS_OUT", dir.file("b.pt")}});
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

TEST_F(Damaged, ManifestNamesEveryParametersDtypeAndVersionTwoStillLoads) {
  const std::string v3 = read_file(step4 + "/manifest.txt");
  ASSERT_EQ(v3.rfind("greenshard-checkpoint 3\n", 0), 0u) << v3.substr(0, 40);
  int params = 0;
  map_param_lines(v3, [&](std::vector<std::string>& tok) {
    ++params;
    // param <name> <offset> <numel> <dtype> <ndim> <dims...>
    ASSERT_GE(tok.size(), 6u);
    EXPECT_EQ(tok[4], "float32") << tok[1];
    EXPECT_EQ(tok.size(), 6u + std::stoul(tok[5])) << tok[1];
  });
  EXPECT_GT(params, 0);
  auto want = resume(step4, {{"GS_OUT", dir.file("v3.pt")}});
  ASSERT_TRUE(want.ok()) << want.output();

  struct Case {
    const char* sentence;
    std::string manifest;
    const char* error;  // nullptr: loads like the version-3 manifest
  };
  const Case cases[] = {
      {"a version-2 manifest (no dtypes) loads like the version-3 one",
       with_version(map_param_lines(v3, [](std::vector<std::string>& t) { t.erase(t.begin() + 4); }), 2), nullptr},
      {"a version-1 manifest is refused naming the version", with_version(v3, 1), "unsupported format version 1"},
      {"a version-4 manifest is refused naming the version", with_version(v3, 4), "unsupported format version 4"},
      {"a parameter stored in another dtype is refused naming it",
       map_param_lines(v3, [](std::vector<std::string>& t) { t[4] = "bfloat16"; }), "has dtype 'bfloat16'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.sentence);
    rewrite_manifest(step4, c.manifest);
    auto got = resume(step4, {{"GS_OUT", dir.file("got.pt")}});
    if (!c.error) {
      ASSERT_TRUE(got.ok()) << got.output();
      auto a = gstest::load_result(dir.file("v3.pt")), b = gstest::load_result(dir.file("got.pt"));
      EXPECT_EQ(a.losses, b.losses);
      for (const auto& [name, t] : a.params) EXPECT_TRUE(at::equal(b.params.at(name), t)) << name;
    } else {
      EXPECT_FALSE(got.ok());
      EXPECT_NE(got.output().find(step4 + "/manifest.txt line"), std::string::npos) << got.output();
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
