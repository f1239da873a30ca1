// greenshard-worker end to end: real rank processes (the worker's own
// launcher, --nproc) on loopback, real text, real checkpoints on disk, and a
// real Prometheus server scraping a running worker.
#include "common/spawn.h"
#include "shard/s3_server.h"
#include "worker/spec/job_spec.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <torch/serialize/input-archive.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kWorker = GS_WORKER_BIN;
const std::string kText = "/usr/share/common-licenses/GPL-3";  // real English text, always on Debian

// A prepared data directory and a small job spec in a temp dir.
struct Job {
  gstest::TempDir dir;
  std::string spec;
  Job(int steps, const std::string& extra_yaml = "") {
    auto r = gstest::run_process({kWorker, "prepare", "--input", kText, "--out", dir.file("data")}, {}, 60s);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    spec = dir.file("job.yaml");
    std::ofstream(spec) << "model: {layers: 2, heads: 2, embd: 64, context: 32}\n"
                        << "data: {train: " << dir.file("data/train.bin") << ", val: " << dir.file("data/val.bin")
                        << "}\n"
                        << "schedule: {steps: " << steps << ", batch_size: 8, eval_interval: 20, eval_batches: 2}\n"
                        << "optimizer: {lr: 0.003, warmup_steps: 5}\n"
                        << "checkpoint: {dir: " << dir.file("ckpt") << ", interval: 10, keep_last: 0}\n"
                        << "summary_path: " << dir.file("summary.json") << "\n"
                        << "log: {every: 5}\n"
                        << extra_yaml;
  }
  std::vector<std::string> args(int nproc, std::vector<std::string> more = {}) const {
    std::vector<std::string> a{kWorker, "--config", spec, "--nproc", std::to_string(nproc)};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  gstest::RankResult run(int nproc, std::vector<std::string> more = {},
                         std::map<std::string, std::string> env = {}) const {
    env["OMP_NUM_THREADS"] = "1";
    return gstest::run_process(args(nproc, std::move(more)), env, 300s);
  }
  json summary() const {
    std::ifstream in(dir.file("summary.json"));
    return json::parse(in);
  }
  bool done(int step) const {
    char name[32];
    std::snprintf(name, sizeof name, "step_%08d", step);
    return fs::exists(fs::path(dir.file("ckpt")) / name / "DONE");
  }
};

bool wait_for(const std::function<bool()>& cond, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return cond();
}

std::map<std::string, at::Tensor> read_export(const std::string& path, const std::vector<std::string>& names) {
  torch::serialize::InputArchive a;
  a.load_from(path);
  std::map<std::string, at::Tensor> out;
  for (const auto& n : names) {
    at::Tensor t;
    if (a.try_read(n, t)) out[n] = t;
  }
  return out;
}

std::vector<std::string> gpt_param_names(int layers) {
  std::vector<std::string> n{"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};
  for (int i = 0; i < layers; ++i)
    for (const char* p : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                          "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                          "mlp.c_proj.weight", "mlp.c_proj.bias"})
      n.push_back("h." + std::to_string(i) + "." + p);
  return n;
}

TEST(Worker, TwoRanksLearnRealTextAndWriteACompleteSummary) {
  Job job(60);
  auto r = job.run(2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step    60/60 | loss"), std::string::npos) << r.output;
  auto s = job.summary();
  EXPECT_EQ(s["state"], "succeeded");
  EXPECT_EQ(s["steps"], 60);
  EXPECT_EQ(s["tokens"].get<double>(), 60.0 * 8 * 32 * 2);
  // Byte-level loss starts at ln(256) = 5.55; stated bound after 60 steps.
  EXPECT_LT(s["final_loss"].get<double>(), 3.3) << s.dump(2);
  EXPECT_LT(s["best_val_loss"].get<double>(), 3.5) << s.dump(2);
  // Validation at step 20, 40 and 60 (the last step): the final one is the
  // last of them, never better than the best.
  ASSERT_TRUE(s["final_val_loss"].is_number()) << s.dump(2);
  EXPECT_LT(s["final_val_loss"].get<double>(), 3.5) << s.dump(2);
  EXPECT_GE(s["final_val_loss"].get<double>(), s["best_val_loss"].get<double>()) << s.dump(2);
  for (const char* k : {"energy_joules", "operational_grams", "embodied_grams", "sci_per_1k_tokens", "wall_s",
                        "tokens_per_s", "mfu"})
    EXPECT_GT(s[k].get<double>(), 0.0) << k;
  // Operational grams follow from energy: kWh x PUE (1.2) x intensity (400).
  EXPECT_NEAR(s["operational_grams"].get<double>(), s["energy_joules"].get<double>() / 3.6e6 * 1.2 * 400,
              1e-9 + 1e-6 * s["operational_grams"].get<double>());
  EXPECT_TRUE(s["resumed_from_step"].is_null());
}

TEST(Worker, KilledRankResumesFromTheNewestDoneCheckpointBitwiseEqualToAnUninterruptedRun) {
  // Uninterrupted reference.
  Job ref(40);
  auto a = ref.run(2, {"--export_path", ref.dir.file("final.pt")});
  ASSERT_EQ(a.exit_code, 0) << a.output;
  // Same job; SIGKILL rank 1 once the step-10 checkpoint is DONE.
  Job job(40);
  {
    gstest::Background launcher(job.args(2, {"--export_path", job.dir.file("final.pt")}), {{"OMP_NUM_THREADS", "1"}});
    ASSERT_TRUE(wait_for([&] { return job.done(10) || !launcher.running(); }, 120s));
    auto ranks = gstest::child_pids(launcher.pid());
    ASSERT_EQ(ranks.size(), 2u) << "the launcher's ranks";
    ASSERT_FALSE(job.done(40)) << "the run finished before the kill; make it longer";
    kill(ranks[1], SIGKILL);
    auto crashed = launcher.wait(120s);
    EXPECT_NE(crashed.exit_code, 0) << crashed.output;
    EXPECT_FALSE(crashed.timed_out) << "rank 0 must notice the dead peer";
  }
  EXPECT_FALSE(fs::exists(job.dir.file("final.pt")));
  auto b = job.run(2, {"--export_path", job.dir.file("final.pt")});
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("resumed from"), std::string::npos) << b.output;
  const auto names = gpt_param_names(2);
  auto pa = read_export(ref.dir.file("final.pt"), names), pb = read_export(job.dir.file("final.pt"), names);
  ASSERT_EQ(pa.size(), names.size());
  ASSERT_EQ(pb.size(), names.size());
  for (const auto& n : names) EXPECT_TRUE(at::equal(pa[n], pb[n])) << n;
  EXPECT_GE(job.summary()["resumed_from_step"].get<int>(), 10);
}

TEST(Worker, SigtermCompletesTheAsyncSaveInFlightCheckpointsExitsZeroAndTheNextRunContinues) {
  Job job(2000);
  const std::string termination_log = job.dir.file("termination-log");
  // A save every step, in the background (checkpoint.async is on by
  // default): SIGTERM finds one in flight.
  gstest::Background launcher(job.args(2, {"--checkpoint.interval", "1"}),
                              {{"OMP_NUM_THREADS", "1"}, {"GREENSHARD_TERMINATION_LOG", termination_log}});
  ASSERT_TRUE(wait_for([&] { return job.done(10) || !launcher.running(); }, 120s));
  ASSERT_TRUE(launcher.running());
  kill(launcher.pid(), SIGTERM);  // as Kubernetes does; the launcher forwards it
  auto r = launcher.wait(120s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("preempted"), std::string::npos) << r.output;
  auto s = job.summary();
  EXPECT_EQ(s["state"], "preempted");
  // The compact copy Kubernetes reports as the container's termination message.
  std::ifstream tl(termination_log);
  const std::string brief_text((std::istreambuf_iterator<char>(tl)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(brief_text.empty());
  EXPECT_LT(brief_text.size(), 4096u);
  const json brief = json::parse(brief_text);
  EXPECT_EQ(brief["state"], "preempted");
  EXPECT_EQ(brief["steps"], s["steps"]);
  EXPECT_EQ(brief["operational_grams"], s["operational_grams"]);
  const int stopped = s["steps"].get<int>();
  EXPECT_GE(stopped, 10);
  EXPECT_LT(stopped, 2000);
  EXPECT_TRUE(job.done(stopped)) << "the checkpoint of the step it stopped at";
  EXPECT_TRUE(job.done(stopped - 1)) << "the asynchronous save in flight at SIGTERM was completed first";
  EXPECT_NE(r.output.find("writing in the background"), std::string::npos) << r.output;
  // Continue to a nearer end.
  auto next = job.run(2, {"--schedule.steps", std::to_string(stopped + 5)});
  ASSERT_EQ(next.exit_code, 0) << next.output;
  auto s2 = job.summary();
  EXPECT_EQ(s2["state"], "succeeded");
  EXPECT_EQ(s2["resumed_from_step"].get<int>(), stopped);
  EXPECT_EQ(s2["steps"].get<int>(), stopped + 5);
}

// Checkpoints in S3-compatible storage: a real s3rver on loopback (it does
// not check SigV4 itself; tests/shard/s3rver_run.mjs does, with the AWS
// SDK's signer). The official AWS client reads back what the worker wrote.
TEST(Worker, CheckpointsToS3ResumesFromThemAndTheOfficialClientReadsThem) {
  gstest::S3Server s3("gs-ckpt");
  const std::string root = "s3://gs-ckpt/jobs/j1";
  Job job(20);
  auto a = job.run(2, {"--checkpoint.dir", root, "--schedule.steps", "20"}, s3.env());
  ASSERT_EQ(a.exit_code, 0) << a.output << s3.log();
  EXPECT_NE(a.output.find("checkpoint " + root + "/step_00000010 (interval"), std::string::npos) << a.output;
  // AWS's own client lists and reads the checkpoint objects.
  auto list = gstest::run_process({gstest::S3Server::node(), gstest::S3Server::script("s3_read.mjs"), "list",
                                   "gs-ckpt", "jobs/j1/"},
                                  s3.env(), 60s);
  ASSERT_EQ(list.exit_code, 0) << list.output;
  for (const char* k : {"jobs/j1/step_00000010/DONE", "jobs/j1/step_00000020/DONE", "jobs/j1/step_00000020/manifest.txt",
                        "jobs/j1/step_00000020/rank_0.bin", "jobs/j1/step_00000020/rank_1.crc"})
    EXPECT_NE(list.output.find(std::string(k) + " "), std::string::npos) << k << "\n" << list.output;
  const std::string manifest = job.dir.file("manifest.txt");
  auto get = gstest::run_process({gstest::S3Server::node(), gstest::S3Server::script("s3_read.mjs"), "get", "gs-ckpt",
                                  "jobs/j1/step_00000020/manifest.txt", manifest},
                                 s3.env(), 60s);
  ASSERT_EQ(get.exit_code, 0) << get.output;
  std::ifstream in(manifest);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "greenshard-checkpoint 4");
  // A longer schedule resumes from the newest DONE checkpoint in the bucket.
  auto b = job.run(2, {"--checkpoint.dir", root, "--schedule.steps", "25"}, s3.env());
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("resumed from " + root + "/step_00000020"), std::string::npos) << b.output;
  EXPECT_EQ(job.summary()["resumed_from_step"].get<int>(), 20);
  // Without credentials the worker stops at start, naming the variable.
  auto env = s3.env();
  env.erase("AWS_SECRET_ACCESS_KEY");
  auto c = job.run(2, {"--checkpoint.dir", root}, env);
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.output.find("checkpoint.dir: '" + root + "' is not usable"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("AWS_SECRET_ACCESS_KEY"), std::string::npos) << c.output;
}

TEST(Worker, ResumesOnFourRanksThenTwo) {
  Job job(10);
  ASSERT_EQ(job.run(2).exit_code, 0);
  auto four = job.run(4, {"--schedule.steps", "20"});
  ASSERT_EQ(four.exit_code, 0) << four.output;
  EXPECT_NE(four.output.find("saved by 2 ranks"), std::string::npos) << four.output;
  auto two = job.run(2, {"--schedule.steps", "30"});
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("saved by 4 ranks"), std::string::npos) << two.output;
  auto s = job.summary();
  EXPECT_EQ(s["steps"], 30);
  EXPECT_EQ(s["resumed_from_step"], 20);
  EXPECT_EQ(s["world_size"], 2);
  EXPECT_LT(s["final_loss"].get<double>(), 4.5) << "a sane loss after 30 steps (5.55 at the start)";
}

// ---- the command line of the real binary ----------------------------------
TEST(Worker, HelpListsEveryConfigField) {
  auto r = gstest::run_process({kWorker, "--help"}, {}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto fields = greenshard::config_fields();
  ASSERT_FALSE(fields.empty());
  for (const auto& f : fields) EXPECT_NE(r.output.find("--" + f.path + " "), std::string::npos) << f.path;
  for (const char* flag : {"--config", "--print-config", "--nproc", "--log-format"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

TEST(Worker, PrintConfigShowsResolvedValuesFileThenEnvironmentThenFlags) {
  Job job(7);
  auto r = gstest::run_process({kWorker, "--config", job.spec, "--print-config", "--model.layers", "3", "--carbon.pue",
                                "1.7", "--log.format", "json"},
                               {{"GREENSHARD_REGION", "DE"}, {"GREENSHARD_PUE", "1.5"},
                                {"GREENSHARD_STATUS_TOKEN", "s3cret-token"}},
                               60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("s3cret-token"), std::string::npos) << "the token is redacted";
  json c = json::parse(r.output);
  EXPECT_EQ(c["model"]["layers"], 3) << "flag over the file's 2";
  EXPECT_EQ(c["model"]["embd"], 64) << "from the file";
  EXPECT_EQ(c["schedule"]["steps"], 7) << "from the file";
  EXPECT_EQ(c["carbon"]["region"], "DE") << "from the environment";
  EXPECT_DOUBLE_EQ(c["carbon"]["pue"].get<double>(), 1.7) << "flag over the environment's 1.5";
  EXPECT_EQ(c["log"]["format"], "json");
  EXPECT_DOUBLE_EQ(c["optimizer"]["beta2"].get<double>(), 0.95) << "a default";
  EXPECT_EQ(c["job_id"], "greenshard") << "the default job label";
  EXPECT_EQ(c["status"]["token"], "<redacted>");
}

TEST(Worker, PrintConfigRejectsAnUnknownHardwareProfileOrShardingStrategy) {
  Job job(7);
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--carbon.hardware", "cpu-node"}, "carbon.hardware: unknown hardware profile 'cpu-node'"},
      {{"--sharding.strategy", "ZERO3"}, "sharding.strategy: must be FULL_SHARD"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> a{kWorker, "--config", job.spec, "--print-config"};
    a.insert(a.end(), flags.begin(), flags.end());
    auto r = gstest::run_process(a, {}, 60s);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }
}

// The lines of `output` that start with '{', parsed (a parse error fails).
std::vector<json> json_lines(const std::string& output) {
  std::vector<json> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    try {
      out.push_back(json::parse(line));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a JSON line: " << line << " (" << e.what() << ")";
    }
  }
  return out;
}

TEST(Worker, JsonLogIsOneParseableLinePerStep) {
  Job job(12);
  auto r = job.run(1, {"--log-format", "json", "--log.every", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = json_lines(r.output);
  ASSERT_EQ(lines.size(), 12u) << r.output;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& j = lines[i];
    EXPECT_EQ(j["step"], static_cast<int>(i + 1)) << j.dump();
    EXPECT_EQ(j["steps"], 12) << j.dump();
    ASSERT_TRUE(j["loss"].is_number()) << j.dump();
    EXPECT_GT(j["loss"].get<double>(), 0.0) << j.dump();
    ASSERT_TRUE(j["tokens_per_s"].is_number()) << j.dump();
    EXPECT_GT(j["tokens_per_s"].get<double>(), 0.0) << j.dump();
    for (const char* k : {"lr", "ms", "mfu", "eta_s", "energy_joules"}) EXPECT_TRUE(j[k].is_number()) << k << j.dump();
  }
  EXPECT_EQ(r.output.find("step     1/12 | loss"), std::string::npos) << "no text step lines in JSON mode";
}

TEST(Worker, GradientAccumulationOverMicroBatchesTrainsOnTwoRanks) {
  Job job(30);
  auto r = job.run(2, {"--schedule.grad_accum", "3", "--schedule.batch_size", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("batch 4 x 32 x 3 accum per rank"), std::string::npos) << r.output;
  auto s = job.summary();
  EXPECT_EQ(s["state"], "succeeded");
  EXPECT_EQ(s["steps"], 30);
  EXPECT_EQ(s["tokens"].get<double>(), 30.0 * 4 * 32 * 3 * 2) << "every micro-batch of every rank counted";
  EXPECT_LT(s["final_loss"].get<double>(), 4.5) << "a sane loss after 30 steps (5.55 at the start)";
}

// The two attention kernels train the same model: same losses step by step
// (fp32, 2 ranks), and the start line says what was chosen.
TEST(Worker, SdpaAndExplicitAttentionTrainTheSameLossesOnTwoRanks) {
  std::map<std::string, std::vector<double>> losses;
  for (const std::string kind : {"explicit", "sdpa"}) {
    Job job(8);
    auto r = job.run(2, {"--model.attention", kind, "--log-format", "json", "--log.every", "1",
                         "--checkpoint.dir", ""});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("on cpu, float32 compute, " + kind + " attention"), std::string::npos) << r.output;
    for (const auto& j : json_lines(r.output)) losses[kind].push_back(j["loss"].get<double>());
  }
  ASSERT_EQ(losses["explicit"].size(), 8u);
  ASSERT_EQ(losses["sdpa"].size(), 8u);
  for (size_t i = 0; i < 8; ++i)
    EXPECT_NEAR(losses["sdpa"][i], losses["explicit"][i], 1e-4 * losses["explicit"][i]) << "step " << i + 1;
  EXPECT_LT(losses["sdpa"].back(), losses["sdpa"].front()) << "and it learns";
}

// ---- status push: a real HTTP server on loopback plays the controller ------
struct StatusServer {
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::mutex mu;
  std::vector<std::pair<std::string, json>> posts;  // (Authorization, body)
  StatusServer() {
    server.Post("/v1/jobs/j1/status", [this](const httplib::Request& req, httplib::Response& res) {
      json body;
      try {
        body = json::parse(req.body);
      } catch (const std::exception&) {
        body = req.body;
      }
      std::lock_guard<std::mutex> lock(mu);
      posts.emplace_back(req.get_header_value("Authorization"), body);
      res.status = req.get_header_value("Authorization") == "Bearer s3cret" ? 204 : 401;
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~StatusServer() {
    server.stop();
    thread.join();
  }
  std::map<std::string, std::string> env() const {
    return {{"GREENSHARD_STATUS_URL", "http://127.0.0.1:" + std::to_string(port) + "/v1/jobs/j1/status"},
            {"GREENSHARD_STATUS_TOKEN", "s3cret"}};
  }
  std::vector<std::pair<std::string, json>> received() {
    std::lock_guard<std::mutex> lock(mu);
    return posts;
  }
};

TEST(Worker, StatusPushSendsTheTokenProgressAndTheFinalState) {
  StatusServer controller;
  ASSERT_GT(controller.port, 0);
  Job job(20);
  // Status every step (a tiny interval), while the log prints every 5.
  auto r = job.run(1, {"--status.interval_s", "0.000001"}, controller.env());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("status push"), std::string::npos) << "no failed push: " << r.output;
  const auto posts = controller.received();
  ASSERT_GE(posts.size(), 2u) << r.output;
  int64_t last_step = 0;
  for (const auto& [auth, body] : posts) {
    EXPECT_EQ(auth, "Bearer s3cret");
    ASSERT_TRUE(body.is_object()) << body.dump();
    EXPECT_EQ(body["total_steps"], 20) << body.dump();
    ASSERT_TRUE(body["step"].is_number_integer()) << body.dump();
    EXPECT_GE(body["step"].get<int64_t>(), last_step) << "progress only moves forward";
    last_step = body["step"].get<int64_t>();
    for (const char* k : {"tokens", "tokens_per_s", "mfu", "eta_s", "energy_joules", "operational_grams",
                          "embodied_grams"})
      EXPECT_TRUE(body[k].is_number()) << k << ": " << body.dump();
  }
  for (size_t i = 0; i + 1 < posts.size(); ++i) {
    EXPECT_EQ(posts[i].second["state"], "running") << posts[i].second.dump();
    EXPECT_GE(posts[i].second["step"].get<int>(), 1);
    EXPECT_TRUE(posts[i].second["loss"].is_number()) << posts[i].second.dump();
  }
  const json& last = posts.back().second;
  EXPECT_EQ(last["state"], "succeeded") << last.dump();
  EXPECT_EQ(last["step"], 20);
  EXPECT_EQ(last["tokens"], 20 * 8 * 32);
  EXPECT_EQ(last["eta_s"], 0.0);
}

TEST(Worker, StatusPushFollowsStatusIntervalNotTheLogInterval) {
  StatusServer controller;
  Job job(20);
  // A log line every step, a status push at most once an hour: one running
  // push (after the first step), then the final state.
  auto r = job.run(1, {"--log.every", "1", "--status.interval_s", "3600"}, controller.env());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto posts = controller.received();
  ASSERT_FALSE(posts.empty()) << r.output;
  EXPECT_LE(posts.size(), 2u) << "pushes follow status.interval_s, not log.every";
  if (posts.size() == 2) {
    EXPECT_EQ(posts[0].second["state"], "running");
    EXPECT_EQ(posts[0].second["step"], 1);
  }
  EXPECT_EQ(posts.back().second["state"], "succeeded");
  EXPECT_EQ(posts.back().second["step"], 20);
}

// The controller's GET /v1/regions/{name}/intensity, played on loopback: it
// wants the job's status token and serves `before` for the first `switch_after`
// polls, then `after` (the hour turned).
struct IntensityServer {
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::mutex mu;
  int polls = 0, unauthorized = 0;
  IntensityServer(double before, double after, int switch_after) {
    server.Get("/v1/regions/eu/intensity", [=, this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu);
      if (req.get_header_value("Authorization") != "Bearer s3cret") {
        ++unauthorized;
        res.status = 401;
        return;
      }
      const double v = polls++ < switch_after ? before : after;
      res.set_content(json{{"region", "eu"}, {"gco2_per_kwh", v}}.dump(), "application/json");
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~IntensityServer() {
    server.stop();
    thread.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/v1/regions/eu/intensity"; }
};

TEST(Worker, GramsIntegrateAChangingIntensity) {
  const double before = 100, after = 700, pue = 1.5;
  const int switch_after = 4;  // polls: one before the first step, then one per accounting interval
  IntensityServer grid(before, after, switch_after);
  ASSERT_GT(grid.port, 0);
  Job job(12);
  auto r = job.run(1, {"--log.format", "json", "--log.every", "1", "--carbon.pue", "1.5"},
                   {{"GREENSHARD_INTENSITY_URL", grid.url()}, {"GREENSHARD_INTENSITY_POLL_S", "0.000001"},
                    {"GREENSHARD_STATUS_TOKEN", "s3cret"}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("unreachable"), std::string::npos) << "every poll answered: " << r.output;
  std::vector<std::pair<double, double>> totals;  // (energy J, operational g) after each step
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    json j = json::parse(line);
    if (j.contains("step")) totals.push_back({j["energy_joules"].get<double>(), j["operational_grams"].get<double>()});
  }
  ASSERT_EQ(totals.size(), 12u) << r.output;
  {
    std::lock_guard<std::mutex> lock(grid.mu);
    EXPECT_EQ(grid.unauthorized, 0) << "the worker sends its status token";
    EXPECT_GE(grid.polls, 13) << "a poll before the first step and one per interval";
  }
  // Interval i (step i) is integrated with the value polled before it:
  // `before` for steps 1..switch_after, `after` from then on.
  double expected = 0, prev_e = 0;
  for (size_t i = 0; i < totals.size(); ++i) {
    const double in_force = int(i) < switch_after ? before : after;
    expected += (totals[i].first - prev_e) / 3.6e6 * pue * in_force;
    prev_e = totals[i].first;
  }
  const double energy = totals.back().first, grams = totals.back().second;
  ASSERT_GT(energy, 0);
  EXPECT_NEAR(grams, expected, 1e-9 * expected);
  // Not the start value (nor the last one) times all the energy.
  EXPECT_GT(grams, 1.05 * energy / 3.6e6 * pue * before);
  EXPECT_LT(grams, 0.95 * energy / 3.6e6 * pue * after);
}

TEST(Worker, StatusPushReportsFailedWhenTrainingThrows) {
  StatusServer controller;
  Job job(20);
  std::ofstream(job.dir.file("bad.bin")) << std::string(64, 'x');
  auto r = job.run(1, {"--data.train", job.dir.file("bad.bin")}, controller.env());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const auto posts = controller.received();
  ASSERT_FALSE(posts.empty()) << r.output;
  const auto& [auth, last] = posts.back();
  EXPECT_EQ(auth, "Bearer s3cret");
  EXPECT_EQ(last["state"], "failed") << last.dump();
  EXPECT_EQ(last["total_steps"], 20) << last.dump();
  ASSERT_TRUE(last["message"].is_string()) << last.dump();
  EXPECT_NE(last["message"].get<std::string>().find("bad magic"), std::string::npos) << last.dump();
}

// ---- bad input: a clear error naming what is wrong, exit 2, nothing saved ----
// `prepare --tokenizer bpe` of the job's text into <job dir>/<out>.
void prepare_bpe(Job& j, const std::string& out, int vocab, std::vector<std::string> more = {}) {
  std::vector<std::string> a{kWorker, "prepare", "--input", kText, "--out", j.dir.file(out), "--tokenizer", "bpe",
                             "--vocab", std::to_string(vocab)};
  a.insert(a.end(), more.begin(), more.end());
  auto r = gstest::run_process(a, {}, 120s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

struct BadCase {
  const char* sentence;
  std::function<std::vector<std::string>(Job&)> extra_args;
  const char* message;
  const char* checkpoint_dir = "ckpt";  // the checkpoint.dir the row configures, under the job's temp dir
  const char* in_the_way = nullptr;     // a file (content "x") the row put where the checkpoint dir goes
};

class BadInput : public ::testing::TestWithParam<BadCase> {};

// step_* entries (complete or partial checkpoints) anywhere under `root`.
std::vector<std::string> checkpoints_under(const std::string& root) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->path().filename().string().rfind("step_", 0) == 0) found.push_back(it->path().string());
  return found;
}

TEST_P(BadInput, IsAClearErrorAndLeavesNoCheckpoint) {
  const auto& c = GetParam();
  Job job(5);
  auto r = job.run(2, c.extra_args(job));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(c.message), std::string::npos) << r.output;
  // The directory this row configured, and anything else under the temp dir.
  const std::string configured = job.dir.file(c.checkpoint_dir);
  EXPECT_TRUE(checkpoints_under(configured).empty()) << "no (partial) checkpoint in " << configured;
  const auto anywhere = checkpoints_under(job.dir.path());
  EXPECT_TRUE(anywhere.empty()) << "no (partial) checkpoint, found " << (anywhere.empty() ? "" : anywhere[0]);
  if (c.in_the_way) {
    std::ifstream in(job.dir.file(c.in_the_way));
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(fs::is_regular_file(job.dir.file(c.in_the_way)));
    EXPECT_EQ(content, "x") << "the file in the way is left as it was";
  }
}

const BadCase kBad[] = {
    {"an unknown field in the config file",
     [](Job& j) {
       std::ofstream(j.spec, std::ios::app) << "modell: {layers: 2}\n";
       return std::vector<std::string>{};
     },
     "modell: unknown field"},
    {"a value of the wrong type", [](Job&) { return std::vector<std::string>{"--model.layers", "two"}; },
     "model.layers: expected an integer, got 'two'"},
    {"heads that do not divide the width", [](Job&) { return std::vector<std::string>{"--model.heads", "3"}; },
     "model.embd: must be >= 1 and divisible by model.heads"},
    {"a token file with the wrong magic",
     [](Job& j) {
       std::ofstream(j.dir.file("bad.bin")) << std::string(64, 'x');
       return std::vector<std::string>{"--data.train", j.dir.file("bad.bin")};
     },
     "bad magic"},
    {"a truncated token file",
     [](Job& j) {
       fs::resize_file(j.dir.file("data/train.bin"), 100);
       return std::vector<std::string>{};
     },
     "(truncated or corrupt)"},
    {"an unwritable checkpoint directory",
     [](Job& j) {
       // A file where a directory should be (tests run as root, which
       // ignores file modes); the worker must leave the file as it was.
       std::ofstream(j.dir.file("afile")) << "x";
       return std::vector<std::string>{"--checkpoint.dir", j.dir.file("afile") + "/ckpt"};
     },
     "checkpoint.dir: '", "afile/ckpt", "afile"},
    {"an unknown hardware profile", [](Job&) { return std::vector<std::string>{"--carbon.hardware", "cpu-node"}; },
     "carbon.hardware: unknown hardware profile 'cpu-node'"},
    {"an unknown sharding strategy", [](Job&) { return std::vector<std::string>{"--sharding.strategy", "ZERO3"}; },
     "sharding.strategy: must be FULL_SHARD, SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD, got 'ZERO3'"},
    {"an unknown device", [](Job&) { return std::vector<std::string>{"--device", "tpu"}; },
     "device: must be auto, cpu or cuda, got 'tpu'"},
    {"a glob that matches no shard",
     [](Job& j) { return std::vector<std::string>{"--data.train", j.dir.file("data/nothing-*.bin")}; },
     "data.train: ", "ckpt"},
    {"a model.vocab smaller than the tokenizer the token files record",
     [](Job& j) {
       prepare_bpe(j, "bpe", 400);
       return std::vector<std::string>{"--data.train", j.dir.file("bpe/train-*.bin")};
     },
     "model.vocab: 256 is smaller than the vocabulary of the sentencepiece tokenizer"},
    {"validation shards of another tokenizer than the training shards",
     [](Job& j) {
       prepare_bpe(j, "bpe", 400);
       return std::vector<std::string>{"--data.train", j.dir.file("bpe/train.bin"), "--model.vocab", "400"};
     },
     "data.val: "},
    // This machine's worker is the CPU build: every rank refuses, none hangs.
    {"cuda on a CPU-only build", [](Job&) { return std::vector<std::string>{"--device", "cuda"}; },
     "device: cuda needs a GPU build of greenshard-worker"},
};

INSTANTIATE_TEST_SUITE_P(Table, BadInput, ::testing::ValuesIn(kBad),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

// ---- subword tokens, sharded data, the model card, sample ------------------
TEST(Worker, TrainsOnBpeShardsAndSampleContinuesThePromptFromTheCheckpointAndTheExport) {
  Job job(30);
  // Several shards (512-token shards of the GPL's ~8k BPE tokens), read as
  // one sequence through the glob.
  prepare_bpe(job, "bpe", 512, {"--shard-tokens", "1024"});
  std::vector<std::string> shards;
  for (const auto& e : fs::directory_iterator(job.dir.file("bpe")))
    if (e.path().filename().string().rfind("train-", 0) == 0) shards.push_back(e.path().string());
  ASSERT_GE(shards.size(), 3u);
  const std::string exported = job.dir.file("model.pt");
  auto r = job.run(2, {"--data.train", job.dir.file("bpe/train-*.bin"), "--data.val", job.dir.file("bpe/val-*.bin"),
                       "--model.vocab", "512", "--export_path", exported, "--export_format", "torch_save"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(std::to_string(shards.size()) + " shards"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("vocabulary 512"), std::string::npos) << r.output;
  auto s = job.summary();
  EXPECT_EQ(s["state"], "succeeded");
  // BPE loss starts near ln(512) = 6.24.
  EXPECT_LT(s["final_loss"].get<double>(), 6.0) << s.dump(2);

  // The card next to the export names the tokenizer prepare wrote.
  std::ifstream card_in(exported + ".json");
  ASSERT_TRUE(card_in.good());
  const json card = json::parse(card_in);
  EXPECT_EQ(card["tokenizer"]["kind"], "sentencepiece");
  EXPECT_EQ(card["tokenizer"]["vocab"], 512);
  EXPECT_EQ(card["tokenizer"]["model"], fs::absolute(job.dir.file("bpe/tokenizer.model")).string());
  EXPECT_EQ(card["model"]["vocab"], 512);
  EXPECT_EQ(card["model"]["layers"], 2);

  auto sample = [&](std::vector<std::string> from, std::vector<std::string> more) {
    std::vector<std::string> a{kWorker, "sample"};
    a.insert(a.end(), from.begin(), from.end());
    for (const char* f : {"--prompt", "The GNU General Public License", "--tokens", "12"}) a.push_back(f);
    a.insert(a.end(), more.begin(), more.end());
    auto out = gstest::run_process(a, {{"OMP_NUM_THREADS", "1"}}, 120s);
    EXPECT_EQ(out.exit_code, 0) << out.output;
    return out.output;
  };
  const std::vector<std::string> ckpt{"--checkpoint", job.dir.file("ckpt")};
  const std::string a = sample(ckpt, {"--seed", "5", "--top-k", "20"});
  EXPECT_EQ(a.rfind("The GNU General Public License", 0), 0u) << a;
  EXPECT_GT(a.size(), std::string("The GNU General Public License\n").size()) << a;
  EXPECT_EQ(sample(ckpt, {"--seed", "5", "--top-k", "20"}), a) << "a fixed seed gives the same text";
  // Greedy text from the final checkpoint and from the export: the same model.
  EXPECT_EQ(sample(ckpt, {"--temperature", "0"}), sample({"--export", exported}, {"--temperature", "0"}));
}

// ---- metrics: a real Prometheus scrapes a running worker ------------------
json prom_query(int port, const std::string& q) {
  httplib::Client c("127.0.0.1", port);
  auto res = c.Get("/api/v1/query", httplib::Params{{"query", q}}, httplib::Headers{});
  if (!res || res->status != 200) return json();
  return json::parse(res->body);
}

TEST(Worker, PrometheusScrapesStepsTokensEnergyAndEmissionsAndPromtoolAcceptsTheMetrics) {
  ASSERT_TRUE(fs::exists("/usr/bin/prometheus") && fs::exists("/usr/bin/promtool")) << "Debian prometheus package";
  Job job(100000);
  const int metrics_port = gstest::free_port_run(2);  // rank r listens on metrics_port + r
  gstest::Background worker(job.args(2, {"--metrics.port", std::to_string(metrics_port), "--metrics.bind", "127.0.0.1",
                                         "--carbon.region", "DE", "--job_id", "promtest"}),
                            {{"OMP_NUM_THREADS", "1"}});
  // Prometheus on a loopback port with a generated config.
  const int prom_port = gstest::free_port();
  std::ofstream(job.dir.file("prometheus.yml"))
      << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
      << "scrape_configs:\n"
      << "  - job_name: greenshard-worker\n"
      << "    honor_labels: true\n"  // keep the exported job label (the chart's monitors do the same)
      << "    static_configs: [{targets: ['127.0.0.1:" << metrics_port << "', '127.0.0.1:" << metrics_port + 1
      << "']}]\n";
  gstest::Background prom({"/usr/bin/prometheus", "--config.file=" + job.dir.file("prometheus.yml"),
                           "--storage.tsdb.path=" + job.dir.file("tsdb"),
                           "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
                          {});
  // Both ranks' series arrive.
  json steps;
  ASSERT_TRUE(wait_for(
      [&] {
        steps = prom_query(prom_port, "greenshard_training_steps_total{job=\"promtest\"}");
        return steps.is_object() && steps["data"]["result"].size() == 2;
      },
      120s))
      << steps.dump() << "\nworker:\n" << (worker.running() ? "" : worker.wait(1s).output);
  for (const char* q : {"greenshard_training_tokens_total", "greenshard_energy_joules_total",
                        "greenshard_cpu_energy_joules_total", "greenshard_operational_emissions_grams_total",
                        "greenshard_embodied_emissions_grams_total", "greenshard_grid_intensity_grams_per_kwh",
                        "greenshard_training_step_duration_seconds_count", "greenshard_sci_grams_per_1k_tokens"}) {
    json r;
    ASSERT_TRUE(wait_for(
        [&] {
          r = prom_query(prom_port, std::string(q) + " > 0");
          return r.is_object() && r["data"]["result"].size() == 2;
        },
        60s))
        << q << ": " << r.dump();
    EXPECT_EQ(r["data"]["result"][0]["metric"]["rank"].is_string(), true) << q;
  }
  auto region = prom_query(prom_port, "greenshard_operational_emissions_grams_total{region=\"DE\"}");
  EXPECT_EQ(region["data"]["result"].size(), 2u) << region.dump();
  auto gpu = prom_query(prom_port, "greenshard_gpu_power_watts");
  EXPECT_EQ(gpu["data"]["result"].size(), 0u) << "no GPU here: no GPU series, never invented";
  // promtool on a live scrape.
  httplib::Client c("127.0.0.1", metrics_port);
  auto scrape = c.Get("/metrics");
  ASSERT_TRUE(scrape && scrape->status == 200);
  std::ofstream(job.dir.file("scrape.txt")) << scrape->body;
  auto lint = gstest::run_process({"/bin/sh", "-c", "/usr/bin/promtool check metrics < " + job.dir.file("scrape.txt")},
                                  {}, 60s);
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
  kill(worker.pid(), SIGTERM);
  EXPECT_EQ(worker.wait(120s).exit_code, 0);
  prom.signal(SIGTERM);
  prom.wait(30s);
}

}  // namespace
