// greenshard-worker end to end: real rank processes (the worker's own
// launcher, --nproc) on loopback, real text, real checkpoints on disk, and a
// real Prometheus server scraping a running worker.
#include "common/spawn.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <torch/serialize/input-archive.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
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
  gstest::RankResult run(int nproc, std::vector<std::string> more = {}) const {
    return gstest::run_process(args(nproc, std::move(more)), {{"OMP_NUM_THREADS", "1"}}, 300s);
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

TEST(Worker, SigtermCheckpointsExitsZeroAndTheNextRunContinues) {
  Job job(2000);
  gstest::Background launcher(job.args(2), {{"OMP_NUM_THREADS", "1"}});
  ASSERT_TRUE(wait_for([&] { return job.done(10) || !launcher.running(); }, 120s));
  ASSERT_TRUE(launcher.running());
  kill(launcher.pid(), SIGTERM);  // as Kubernetes does; the launcher forwards it
  auto r = launcher.wait(120s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("preempted"), std::string::npos) << r.output;
  auto s = job.summary();
  EXPECT_EQ(s["state"], "preempted");
  const int stopped = s["steps"].get<int>();
  EXPECT_GE(stopped, 10);
  EXPECT_LT(stopped, 2000);
  EXPECT_TRUE(job.done(stopped)) << "the checkpoint of the step it stopped at";
  // Continue to a nearer end.
  auto next = job.run(2, {"--schedule.steps", std::to_string(stopped + 5)});
  ASSERT_EQ(next.exit_code, 0) << next.output;
  auto s2 = job.summary();
  EXPECT_EQ(s2["state"], "succeeded");
  EXPECT_EQ(s2["resumed_from_step"].get<int>(), stopped);
  EXPECT_EQ(s2["steps"].get<int>(), stopped + 5);
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

// ---- bad input: a clear error naming what is wrong, exit 2, nothing saved ----
struct BadCase {
  const char* sentence;
  std::function<std::vector<std::string>(Job&)> extra_args;
  const char* message;
};

class BadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInput, IsAClearErrorAndLeavesNoCheckpoint) {
  const auto& c = GetParam();
  Job job(5);
  auto r = job.run(2, c.extra_args(job));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(c.message), std::string::npos) << r.output;
  bool any = false;
  if (fs::exists(job.dir.file("ckpt")))
    for (const auto& e : fs::directory_iterator(job.dir.file("ckpt"))) any |= e.path().filename().string().rfind("step_", 0) == 0;
  EXPECT_FALSE(any) << "no (partial) checkpoint";
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
       std::ofstream(j.dir.file("afile")) << "x";  // a file where a directory should be
       return std::vector<std::string>{"--checkpoint.dir", j.dir.file("afile") + "/ckpt"};
     },
     "checkpoint.dir: '"},
};

INSTANTIATE_TEST_SUITE_P(Table, BadInput, ::testing::ValuesIn(kBad),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

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
  const int metrics_port = gstest::free_port();
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
