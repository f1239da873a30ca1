// Issue 34, "Disk full", on a real full disk: a small tmpfs in a private
// mount namespace (private_tmpfs.h), filled with a filler file.
//   - the controller's store (the real greenshard-controller, --data-dir on
//     the tmpfs): submits answered 503 store_unavailable naming the store
//     file and the full disk, nothing acknowledged lost, accepted again by
//     itself once the filler is gone, everything there after a restart;
//   - `greenshard-worker prepare` with its output on the tmpfs: exit 1
//     naming the output file, no shard (or alias, or manifest) left behind.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/spawn.h"
#include "controller/process.h"
#include "faults/private_tmpfs.h"

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const char* kToken = "user-token-disk-full-0001";

// ---- the controller's store ------------------------------------------------

struct Submit {
  int status = 0;
  json body;
};

Submit submit(int port, const std::string& name) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  const json spec = {{"name", name},
                     {"worker", {{"data", {{"train", "tiny"}, {"val", "tiny"}}}}},
                     {"regions", {"DE"}},
                     {"procs_per_node", 1},
                     {"max_restarts", 0}};
  auto r = c.Post("/v1/jobs", {{"Authorization", std::string("Bearer ") + kToken}}, spec.dump(),
                  "application/json");
  if (!r) return {-1, json{{"transport_error", httplib::to_string(r.error())}}};
  return {r->status, json::parse(r->body, nullptr, false)};
}

// The names of every job the controller lists (all pages).
std::set<std::string> listed_names(int port) {
  httplib::Client c("127.0.0.1", port);
  std::set<std::string> names;
  std::string cont;
  for (int page = 0; page < 100; ++page) {
    std::string path = "/v1/jobs?limit=1000" + (cont.empty() ? "" : "&continue=" + cont);
    auto r = c.Get(path, {{"Authorization", std::string("Bearer ") + kToken}});
    if (!r || r->status != 200) throw std::runtime_error("GET /v1/jobs failed");
    const json b = json::parse(r->body);
    for (const auto& j : b["items"]) names.insert(j["spec"]["name"].get<std::string>());
    cont = b.value("continue", "");
    if (cont.empty()) break;
  }
  return names;
}

void controller_scenario() {
  const std::string mnt = faults::tmpfs_dir();
  ASSERT_FALSE(mnt.empty());
  const std::string data = mnt + "/data";
  ASSERT_EQ(::mkdir(data.c_str(), 0755), 0);
  gstest::TempDir cfg;  // config and logs off the small disk
  std::ofstream(cfg.file("tokens")) << kToken << ",team-a,user\n";
  std::ofstream(cfg.file("regions.yaml")) << "regions:\n  - {name: DE, nodes: 2, intensity: 300}\n";
  std::ofstream(cfg.file("worker.sh")) << "#!/bin/sh\nexit 0\n";  // jobs end at once
  ::chmod(cfg.file("worker.sh").c_str(), 0755);
  auto start = [&] {
    return std::make_unique<ctltest::ControllerProcess>(
        CONTROLLER_BIN,
        std::vector<std::string>{"--port", "0", "--data-dir", data, "--tokens", cfg.file("tokens"), "--regions",
                                 cfg.file("regions.yaml"), "--worker", cfg.file("worker.sh"), "--cycle-ms", "50",
                                 "--backoff-ms", "50"},
        cfg.file("controller.log"), cfg.file("port"));
  };
  auto ctl = start();
  int port = ctl->port();

  std::set<std::string> acked;
  for (int i = 0; i < 3; ++i) {
    const std::string name = "before-" + std::to_string(i);
    auto s = submit(port, name);
    ASSERT_EQ(s.status, 201) << s.body.dump() << "\n" << ctl->log();
    acked.insert(name);
  }

  // The disk fills up.
  const std::string filler = mnt + "/filler";
  const int64_t filled = faults::fill_disk(filler);
  std::cout << "filler: " << filled << " bytes" << std::endl;
  for (int i = 0; i < 3; ++i) {
    auto s = submit(port, "refused-" + std::to_string(i));
    ASSERT_EQ(s.status, 503) << s.body.dump() << "\n" << ctl->log();
    ASSERT_TRUE(s.body.is_object() && s.body.contains("error")) << s.body.dump();
    EXPECT_EQ(s.body["error"]["code"], "store_unavailable") << s.body.dump();
    const std::string msg = s.body["error"]["message"].get<std::string>();
    EXPECT_NE(msg.find(data + "/controller.db"), std::string::npos) << msg;  // names the store file
    EXPECT_NE(msg.find("No space left on device"), std::string::npos) << msg;
    EXPECT_NE(msg.find("SQLITE_FULL"), std::string::npos) << msg;
    std::cout << "503: " << s.body.dump() << std::endl;
  }
  // What was acknowledged is still served (reads need no space).
  EXPECT_EQ(listed_names(port), acked);

  // Space returns: the same process accepts again, no restart.
  ASSERT_EQ(::unlink(filler.c_str()), 0);
  for (int i = 0; i < 2; ++i) {
    const std::string name = "after-" + std::to_string(i);
    auto s = submit(port, name);
    ASSERT_EQ(s.status, 201) << s.body.dump() << "\n" << ctl->log();
    acked.insert(name);
  }
  EXPECT_EQ(listed_names(port), acked);

  // A restart (SIGKILL: no clean close) finds exactly the acknowledged jobs.
  ctl->kill(SIGKILL);
  ctl = start();
  port = ctl->port();
  EXPECT_EQ(listed_names(port), acked) << ctl->log();
  ctl.reset();
}

TEST(DiskFull, ControllerStoreAnswers503ThenAcceptsAgainWithoutRestart) {
  GS_RUN_IN_TMPFS("controller", 2048, 300);
}

// ---- prepare ---------------------------------------------------------------

#ifdef GS_WORKER_BIN
void prepare_scenario() {
  const std::string mnt = faults::tmpfs_dir();
  ASSERT_FALSE(mnt.empty());
  gstest::TempDir in;
  // ~3 MiB of text: more than the 1 MiB disk holds as byte tokens.
  {
    std::ofstream t(in.file("corpus.txt"));
    for (int i = 0; t.tellp() < (3 << 20); ++i) t << "line " << i << " of the text that does not fit on this disk\n";
  }
  const std::string out = mnt + "/tokens";
  auto r = gstest::run_process({GS_WORKER_BIN, "prepare", "--input", in.file("corpus.txt"), "--out", out,
                                "--shard-tokens", "262144", "--threads", "2"},
                               {}, std::chrono::seconds(240));
  std::cout << r.output << std::endl;
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  // names the output file (a train or a val shard, whichever hit the full disk)
  EXPECT_TRUE(r.output.find(out + "/train-") != std::string::npos || r.output.find(out + "/val-") != std::string::npos)
      << r.output;
  // No shard, alias, temp file or manifest that a later glob would pick up.
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(out)) left.push_back(e.path().filename().string());
  EXPECT_TRUE(left.empty()) << "left behind: " << ::testing::PrintToString(left);

  // The shards fit but the manifest does not: the disk is filled, then
  // exactly the shards' pages are freed again.
  {
    std::ofstream t(in.file("small.txt"));
    for (int i = 0; i < 4000; ++i) t << "line " << i << " of a text that fits\n";
  }
  const std::vector<std::string> small = {GS_WORKER_BIN, "prepare", "--input", in.file("small.txt"), "--out", out,
                                          "--threads", "2"};
  auto first = gstest::run_process(small, {}, std::chrono::seconds(240));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  int64_t shard_bytes = 0;  // what the shards occupy (symlinks to them take no pages on tmpfs)
  for (const auto& e : fs::directory_iterator(out)) {
    struct stat st;
    ASSERT_EQ(::lstat(e.path().c_str(), &st), 0);
    if (S_ISREG(st.st_mode) && e.path().filename() != "manifest.json") shard_bytes += int64_t(st.st_blocks) * 512;
  }
  for (const auto& e : fs::directory_iterator(out)) fs::remove(e.path());
  const std::string filler = mnt + "/filler";
  const int64_t filled = faults::fill_disk(filler);
  ASSERT_GT(filled, shard_bytes);
  ASSERT_EQ(::truncate(filler.c_str(), filled - shard_bytes), 0);
  auto at_manifest = gstest::run_process(small, {}, std::chrono::seconds(240));
  std::cout << at_manifest.output << std::endl;
  EXPECT_EQ(at_manifest.exit_code, 1) << at_manifest.output;
  EXPECT_NE(at_manifest.output.find(out + "/manifest.json.tmp"), std::string::npos) << at_manifest.output;
  EXPECT_NE(at_manifest.output.find("No space left on device"), std::string::npos) << at_manifest.output;
  left.clear();
  for (const auto& e : fs::directory_iterator(out)) left.push_back(e.path().filename().string());
  EXPECT_TRUE(left.empty()) << "left behind: " << ::testing::PrintToString(left);

  // With the space back, the same command works.
  ASSERT_EQ(::unlink(filler.c_str()), 0);
  auto ok = gstest::run_process(small, {}, std::chrono::seconds(240));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_TRUE(fs::exists(out + "/manifest.json"));
  EXPECT_TRUE(fs::exists(out + "/train-00000.bin"));
}

TEST(DiskFull, PrepareExitsNamingTheFileAndLeavesNoPartialShard) {
  GS_RUN_IN_TMPFS("prepare", 1024, 300);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  faults::register_scenario({
      {"controller", controller_scenario},
#ifdef GS_WORKER_BIN
      {"prepare", prepare_scenario},
#endif
  });
  return RUN_ALL_TESTS();
}
