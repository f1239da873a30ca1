// The worker's pieces without LibTorch: job spec, launch plan, token files,
// sampler, energy meters, URLs.
#include "common/spawn.h"
#include "shard/strategy_names.h"
#include "worker/spec/job_spec.h"
#include "worker/data.h"
#include "worker/energy.h"
#include "worker/status.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;
using greenshard::ConfigError;
using greenshard::JobConfig;

struct SpecCase {
  const char* sentence;
  const char* text;
  const char* error;  // "" = accepted
};

class Spec : public ::testing::TestWithParam<SpecCase> {};

TEST_P(Spec, IsAcceptedOrNamesTheField) {
  const auto& c = GetParam();
  JobConfig cfg;
  try {
    greenshard::apply_config_text(cfg, c.text, "job.yaml");
    cfg.data.train = cfg.data.train.empty() ? "x.bin" : cfg.data.train;
    greenshard::validate(cfg);
    EXPECT_STREQ(c.error, "") << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(c.error), "") << e.what();
    EXPECT_NE(std::string(e.what()).find(c.error), std::string::npos) << e.what();
  }
}

const SpecCase kSpecs[] = {
    {"a JSON spec", R"({"model": {"layers": 2, "embd": 32, "heads": 2}, "schedule": {"steps": 3}})", ""},
    {"a YAML spec", "model:\n  layers: 2\nsharding: {strategy: NO_SHARD, activation_checkpointing: true}\n", ""},
    {"an empty spec", "", ""},
    {"an unknown section", "modle: {layers: 2}", "job.yaml: modle: unknown field"},
    {"an unknown field", "model: {layerz: 2}", "job.yaml: model.layerz: unknown field"},
    {"a section given a value", "model: 3", "job.yaml: model: unknown field"},
    {"a value given a mapping", "model: {layers: {a: 1}}", "model.layers: expected a value, got a mapping"},
    {"a string for an integer", "model: {layers: two}", "model.layers: expected an integer, got 'two'"},
    {"a fraction for an integer", "schedule: {steps: 1.5}", "schedule.steps: expected an integer"},
    {"a negative seed", "data: {seed: -1}", "data.seed: expected a non-negative integer"},
    {"not a boolean", "sharding: {cpu_offload: maybe}", "sharding.cpu_offload: expected true or false"},
    {"zero steps", "schedule: {steps: 0}", "schedule.steps: must be >= 1"},
    {"heads not dividing the width", "model: {embd: 30, heads: 4}", "model.embd: must be >= 1 and divisible"},
    {"a PUE below one", "carbon: {pue: 0.9}", "carbon.pue: must be >= 1.0"},
    {"a checkpoint root in an S3 bucket", "checkpoint: {dir: 's3://gs-ckpt/team/run1'}", ""},
    {"an S3 bucket name in upper case", "checkpoint: {dir: 's3://GS-ckpt/run'}",
     "checkpoint.dir: bucket 'GS-ckpt' may hold only lowercase letters, digits, '.' and '-'"},
    {"an S3 URL without a bucket", "checkpoint: {dir: 's3://'}", "checkpoint.dir: must be s3://bucket[/prefix], got 's3://'"},
    {"an S3 prefix with an empty segment", "checkpoint: {dir: 's3://gs-ckpt/a//b'}",
     "checkpoint.dir: prefix 'a//b' has an empty, '.' or '..' segment"},
    {"asynchronous saves off", "checkpoint: {async: false}", ""},
    {"an unknown log format", "log: {format: xml}", "log.format: must be text or json"},
    {"min_lr above lr", "optimizer: {lr: 0.001, min_lr: 0.01}", "optimizer.min_lr"},
    {"a status URL without scheme", "status: {url: controller:8080/v1}", "status.url: must start with http://"},
    {"a list at the top", "- a\n- b\n", "expected a mapping of sections"},
    {"not YAML at all", "model: {layers: [", "not valid JSON or YAML"},
    {"bfloat16 compute", "sharding: {param_dtype: bfloat16}", ""},
    {"an unknown dtype", "sharding: {param_dtype: fp8}", "sharding.param_dtype: must be auto, float32 or bfloat16"},
    {"an automatic dtype", "sharding: {param_dtype: auto}", ""},
    {"every device choice", "device: cuda", ""},
    {"an unknown device", "device: tpu", "device: must be auto, cpu or cuda, got 'tpu'"},
    {"SDPA attention", "model: {attention: sdpa}", ""},
    {"an unknown attention kernel", "model: {attention: flash}",
     "model.attention: must be auto, sdpa or explicit, got 'flash'"},
    {"a negative peak", "peak_flops: -1", "peak_flops: must be >= 0"},
    {"hardware from the device", "carbon: {hardware: auto}", ""},
    {"a torch.save export", "export_path: final.pt\nexport_format: torch_save\n", ""},
    {"an unknown export format", "export_format: safetensors", "export_format: must be libtorch or torch_save"},
    {"a known hardware profile", "carbon: {hardware: h100-sxm-8}", ""},
    {"an unknown hardware profile", "carbon: {hardware: cpu-node}",
     "carbon.hardware: unknown hardware profile 'cpu-node' (known: h100-sxm-8"},
    {"every sharding strategy shard knows", "sharding: {strategy: HYBRID_SHARD}", ""},
    {"a sharding strategy in lower case", "sharding: {strategy: shard_grad_op}", ""},
    {"an unknown sharding strategy", "sharding: {strategy: ZERO3}",
     "sharding.strategy: must be FULL_SHARD, SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD, got 'ZERO3'"},
    // Found by fuzz_worker_config: a string that is not UTF-8 was accepted and
    // made to_json() (--print-config, the checkpoint's record) throw.
    {"a string that is not UTF-8", "summary_path: run\xd7.json", "job.yaml: summary_path: expected UTF-8 text"},
    {"a truncated UTF-8 sequence", "checkpoint: {dir: ru\xe2\x82}", "checkpoint.dir: expected UTF-8 text"},
    {"UTF-8 text", "summary_path: r\xc3\xa9sum\xc3\xa9.json", ""},
    // ...and a key that is a mapping escaped as a YAML exception, not ConfigError.
    {"a key that is a mapping", "? {a: 1}\n: 2\n", "job.yaml: (top level): a key that is not a string"},
    {"a nested key that is a list", "model:\n  ? [a]\n  : 2\n", "job.yaml: model: a key that is not a string"},
};

INSTANTIATE_TEST_SUITE_P(Table, Spec, ::testing::ValuesIn(kSpecs),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(Spec, TrainIsRequiredAndEnvironmentThenFlagsOverrideTheFile) {
  JobConfig cfg;
  EXPECT_THROW(greenshard::validate(cfg), ConfigError);
  greenshard::apply_config_text(cfg, "data: {train: t.bin}\ncarbon: {region: FR, pue: 1.5}\nmetrics: {port: 9000}", "f");
  greenshard::apply_environment(cfg, {{"GREENSHARD_REGION", "DE"}, {"GREENSHARD_METRICS_PORT", "9400"},
                                      {"GREENSHARD_GRID_INTENSITY", "321.5"}, {"UNRELATED", "x"}});
  EXPECT_EQ(cfg.carbon.region, "DE");
  EXPECT_EQ(cfg.metrics.port, 9400);
  EXPECT_DOUBLE_EQ(cfg.carbon.gco2_per_kwh, 321.5);
  EXPECT_DOUBLE_EQ(cfg.carbon.pue, 1.5);
  greenshard::apply_field(cfg, "carbon.region", "SE", "--carbon.region");
  EXPECT_EQ(cfg.carbon.region, "SE");
  greenshard::apply_environment(cfg, {{"GREENSHARD_DEVICE", "cpu"}});
  EXPECT_EQ(cfg.device, "cpu");
  try {
    greenshard::apply_environment(cfg, {{"GREENSHARD_PUE", "high"}});
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("environment GREENSHARD_PUE: carbon.pue: expected a number"), std::string::npos)
        << e.what();
  }
  // The resolved config round-trips through JSON, with the token redacted.
  cfg.status.token = "secret";
  const std::string js = greenshard::to_json(cfg);
  EXPECT_EQ(js.find("secret"), std::string::npos);
  JobConfig back;
  greenshard::apply_config_text(back, js, "printed");
  EXPECT_EQ(back.carbon.region, "SE");
  EXPECT_EQ(back.metrics.port, 9400);
  EXPECT_EQ(greenshard::config_fields().size(), 57u) << "--help documents every field";
}

TEST(Spec, TheShardingStrategiesTheWorkerAcceptsAreExactlyShards) {
  // true: the worker's validation accepts `name`; false: it refuses it naming sharding.strategy.
  auto worker_accepts = [](const std::string& name) {
    JobConfig cfg;
    cfg.data.train = "t.bin";
    greenshard::apply_field(cfg, "sharding.strategy", name, "test");
    try {
      greenshard::validate(cfg);
      return true;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.field, "sharding.strategy") << e.what();
      return false;
    }
  };
  auto shard_parses = [](const std::string& name) {
    try {
      shard::parse_sharding_strategy(name, "sharding.strategy");
      return true;
    } catch (const std::invalid_argument&) {
      return false;
    }
  };
  std::string help;
  for (const auto& f : greenshard::config_fields())
    if (f.path == "sharding.strategy") help = f.help;
  std::vector<std::string> names = {"", "ZERO3", "FULLSHARD", "FULL_SHARDD", "FULL_SHARD ", "DDP"};
  for (const auto& s : shard::kShardingStrategies) {
    std::string lower = s.name;
    for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    names.push_back(s.name);
    names.push_back(lower);
    // shard -> worker: every strategy shard knows is accepted (any case) and documented.
    EXPECT_TRUE(worker_accepts(s.name)) << s.name;
    EXPECT_TRUE(worker_accepts(lower)) << lower;
    EXPECT_EQ(shard::parse_sharding_strategy(lower), s.strategy);
    EXPECT_NE(help.find(s.name), std::string::npos) << help;
  }
  // worker -> shard: the worker accepts exactly what the trainer can hand to shard.
  for (const auto& n : names) EXPECT_EQ(worker_accepts(n), shard_parses(n)) << "'" << n << "'";
}

TEST(LaunchPlan, TorchrunKubernetesAndStandalone) {
  auto p = greenshard::resolve_launch({{"RANK", "1"}, {"WORLD_SIZE", "2"}}, 0);
  EXPECT_FALSE(p.spawn_local);
  EXPECT_FALSE(p.standalone);
  EXPECT_THROW(greenshard::resolve_launch({{"RANK", "1"}}, 2), ConfigError);
  p = greenshard::resolve_launch({{"PET_NNODES", "3"}, {"PET_NPROC_PER_NODE", "8"}, {"JOB_COMPLETION_INDEX", "2"},
                                  {"PET_MASTER_ADDR", "job-0.svc"}, {"PET_MASTER_PORT", "29500"}},
                                 0);
  EXPECT_TRUE(p.spawn_local);
  EXPECT_EQ(p.nnodes, 3);
  EXPECT_EQ(p.nproc_per_node, 8);
  EXPECT_EQ(p.node_rank, 2);
  EXPECT_EQ(p.master_addr, "job-0.svc");
  EXPECT_EQ(p.master_port, 29500);
  try {
    greenshard::resolve_launch({{"PET_NNODES", "2"}, {"PET_NODE_RANK", "2"}, {"PET_MASTER_ADDR", "a"}}, 0);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("PET_NODE_RANK: 2 is not below PET_NNODES 2"), std::string::npos);
  }
  EXPECT_THROW(greenshard::resolve_launch({{"PET_NNODES", "x"}}, 0), ConfigError);
  EXPECT_TRUE(greenshard::resolve_launch({}, 0).standalone);
  EXPECT_EQ(greenshard::resolve_launch({}, 4).nproc_per_node, 4);
}

TEST(TokenFile, RoundTripsAndSamplesAreAFunctionOfTheStep) {
  gstest::TempDir dir;
  std::vector<uint32_t> toks;
  for (int i = 0; i < 1000; ++i) toks.push_back(static_cast<uint32_t>(i % 256));
  greenshard::write_token_file(dir.file("t.bin"), toks, 256);
  greenshard::TokenFile f(dir.file("t.bin"));
  ASSERT_EQ(f.size(), 1000);
  EXPECT_EQ(f.at(257), 1u);
  greenshard::Sampler s(f, 16, 7);
  std::vector<int64_t> x1, y1, x2, y2;
  s.batch(3, 0, 4, 2, x1, y1);
  s.batch(3, 0, 4, 2, x2, y2);
  EXPECT_EQ(x1, x2);
  for (size_t i = 0; i < x1.size(); ++i) EXPECT_EQ((x1[i] + 1) % 256, y1[i]) << "targets are the next tokens";
  s.batch(4, 0, 4, 2, x2, y2);
  EXPECT_NE(x1, x2) << "another step, other rows";
  // Rows are numbered globally: rank 1's first row == row 4 of one rank.
  std::vector<int64_t> a, b, c, d;
  s.batch(3, 0, 0, 8, a, b);
  s.batch(3, 0, 4, 4, c, d);
  EXPECT_TRUE(std::equal(c.begin(), c.end(), a.begin() + 4 * 16));
  // Too short for the context.
  EXPECT_THROW(greenshard::Sampler(f, 1000, 1), std::runtime_error);
}

TEST(TokenFile, DamageIsAClearErrorNamingTheFile) {
  gstest::TempDir dir;
  greenshard::write_token_file(dir.file("t.bin"), std::vector<uint32_t>(100, 65), 256);
  fs::resize_file(dir.file("t.bin"), 90);
  try {
    greenshard::TokenFile f(dir.file("t.bin"));
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("t.bin") + ": header says 100 tokens"), std::string::npos) << e.what();
  }
  std::ofstream(dir.file("x.bin")) << "GSTOK002" << std::string(40, '\0');
  EXPECT_THROW(greenshard::TokenFile(dir.file("x.bin")), std::runtime_error);
  std::ofstream(dir.file("short.bin")) << "GS";
  EXPECT_THROW(greenshard::TokenFile(dir.file("short.bin")), std::runtime_error);
  EXPECT_THROW(greenshard::TokenFile(dir.file("missing.bin")), std::runtime_error);
}

TEST(Energy, RaplCountersWrapAroundAndSubZonesAreNotCountedTwice) {
  gstest::TempDir dir;
  auto zone = [&](const std::string& name, uint64_t energy, uint64_t max) {
    fs::create_directories(dir.file(name));
    std::ofstream(dir.file(name + "/energy_uj")) << energy;
    std::ofstream(dir.file(name + "/max_energy_range_uj")) << max;
  };
  zone("intel-rapl:0", 900000, 1000000);
  zone("intel-rapl:0:0", 5, 1000000);  // a sub-zone (core): inside package 0
  greenshard::RaplMeter m(dir.path());
  ASSERT_TRUE(m.available());
  std::ofstream(dir.file("intel-rapl:0/energy_uj")) << 950000;
  EXPECT_DOUBLE_EQ(m.joules(), 0.05);
  std::ofstream(dir.file("intel-rapl:0/energy_uj")) << 20000;  // wrapped at 1 J
  EXPECT_DOUBLE_EQ(m.joules(), 0.05 + 0.07);
  EXPECT_FALSE(greenshard::RaplMeter(dir.file("nothing")).available());
}

// A fake sysfs RAPL package and a fake /proc/stat (2 CPUs) in `dir`.
struct FakeHost {
  gstest::TempDir dir;
  FakeHost() {
    fs::create_directories(dir.file("powercap"));
    stat(0, 0);
  }
  void package(uint64_t energy_uj) {
    fs::create_directories(dir.file("powercap/intel-rapl:0"));
    std::ofstream(dir.file("powercap/intel-rapl:0/energy_uj")) << energy_uj;
    std::ofstream(dir.file("powercap/intel-rapl:0/max_energy_range_uj")) << 262143328850ull;
  }
  // busy/idle jiffies of the host, split over the two CPUs (guest time is
  // inside user and must not count twice).
  void stat(uint64_t busy, uint64_t idle) {
    std::ofstream(dir.file("stat")) << "cpu  " << busy / 2 << " 0 " << busy - busy / 2 << " " << idle << " 0 0 0 0 "
                                    << busy / 2 << " 0\n"
                                    << "cpu0 0 0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0 0 0\nintr 1 2 3\n";
  }
  greenshard::EnergyMeter meter(int local_world_size, double tdp = 100.0) {
    greenshard::EnergyMeterOptions o;
    o.cpu_tdp_watts = tdp;
    o.local_world_size = local_world_size;
    o.rapl_root = dir.file("powercap");
    o.proc_stat = dir.file("stat");
    return greenshard::EnergyMeter(o);
  }
};

TEST(Energy, TwoRanksOnOneHostReportTheRaplPackageOnce) {
  FakeHost host;
  host.package(1000000);
  auto rank0 = host.meter(2), rank1 = host.meter(2);
  auto alone = host.meter(1);
  host.package(1000000 + 3000000);  // the package used 3 J
  const auto r0 = rank0.read(), r1 = rank1.read(), r = alone.read();
  EXPECT_EQ(r0.cpu_source, "rapl");
  EXPECT_DOUBLE_EQ(r0.cpu_joules + r1.cpu_joules, 3.0) << "host energy counted once over the local ranks";
  EXPECT_DOUBLE_EQ(r0.cpu_joules, r1.cpu_joules);
  EXPECT_DOUBLE_EQ(r.cpu_joules, 3.0) << "a rank alone on its host reports the whole package";
}

TEST(Energy, WithoutRaplTwoRanksOnOneHostReportTheModelledHostEnergyOnce) {
  FakeHost host;  // no RAPL package
  host.stat(1000, 5000);
  auto rank0 = host.meter(2), rank1 = host.meter(2);
  // The host's CPUs are busy for 300 jiffies together (idle ones do not
  // count): busy CPU-seconds / 2 CPUs x 100 W TDP, shared by the two ranks.
  const double busy_s = 300.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  host.stat(1000 + 300, 5000 + 700);
  const auto r0 = rank0.read(), r1 = rank1.read();
  EXPECT_EQ(r0.cpu_source, "modelled");
  EXPECT_DOUBLE_EQ(r0.cpu_joules + r1.cpu_joules, 100.0 * busy_s / 2) << "TDP x busy CPU-seconds / CPUs, once";
  EXPECT_DOUBLE_EQ(r0.cpu_joules, r1.cpu_joules);
}

TEST(Energy, TheRealHostIsModelledOrMeteredAndWithoutNvmlThereIsNoGpu) {
  greenshard::EnergyMeterOptions o;
  o.gpu_index = greenshard::select_gpu(0, greenshard::nvml_device_count(), std::getenv("CUDA_VISIBLE_DEVICES"));
  o.cpu_tdp_watts = 100.0;
  greenshard::EnergyMeter m(o);
  volatile double x = 0;
  for (int i = 0; i < 20000000; ++i) x = x + i * 0.5;
  auto r = m.read();
  EXPECT_TRUE(r.cpu_source == "modelled" || r.cpu_source == "rapl") << r.cpu_source;
  EXPECT_GE(r.cpu_joules, 0.0);
  if (!fs::exists("/dev/nvidia0")) {
    EXPECT_EQ(greenshard::nvml_device_count(), 0) << "no GPU: NVML reports none";
    EXPECT_EQ(o.gpu_index, -1);
    EXPECT_FALSE(m.has_gpu());
    EXPECT_TRUE(r.gpus.empty()) << "no GPU readings, never invented";
  } else if (greenshard::nvml_device_count() > 0 && o.gpu_index >= 0) {
    EXPECT_TRUE(m.has_gpu());
    ASSERT_EQ(r.gpus.size(), 1u);
    EXPECT_EQ(r.gpus[0].index, o.gpu_index);
    EXPECT_GE(r.gpus[0].energy_joules, 0.0);
  }
  // A GPU index NVML does not have: no meter, no readings.
  greenshard::EnergyMeterOptions none;
  none.gpu_index = 4096;
  greenshard::EnergyMeter n(none);
  EXPECT_FALSE(n.has_gpu());
  EXPECT_TRUE(n.read().gpus.empty());
}

struct GpuCase {
  const char* sentence;
  int local_rank, nvml_devices;
  const char* cuda_visible_devices;  // nullptr = unset
  int expected;
};

class GpuSelection : public ::testing::TestWithParam<GpuCase> {};

TEST_P(GpuSelection, PicksTheLocalRanksDevice) {
  const auto& c = GetParam();
  EXPECT_EQ(greenshard::select_gpu(c.local_rank, c.nvml_devices, c.cuda_visible_devices), c.expected);
}

const GpuCase kGpus[] = {
    {"no NVML device means no GPU", 0, 0, nullptr, -1},
    {"no NVML device even with CUDA_VISIBLE_DEVICES", 0, 0, "0", -1},
    {"local rank 3 of 8 GPUs uses device 3", 3, 8, nullptr, 3},
    {"a local rank beyond the devices has none", 8, 8, nullptr, -1},
    {"CUDA_VISIBLE_DEVICES renumbers: local rank 1 of 2,3 uses device 3", 1, 8, "2,3", 3},
    {"spaces in CUDA_VISIBLE_DEVICES are ignored", 0, 8, " 5 , 6", 5},
    {"an empty CUDA_VISIBLE_DEVICES hides every device", 0, 8, "", -1},
    {"a local rank beyond the visible devices has none", 2, 8, "2,3", -1},
    {"CUDA stops at an index that does not exist", 1, 2, "0,7,1", -1},
    {"devices named by UUID are not guessed", 0, 8, "GPU-8f6c1b2e-0000-0000-0000-000000000000", -1},
    {"a negative local rank has none", -1, 8, nullptr, -1},
};

INSTANTIATE_TEST_SUITE_P(Table, GpuSelection, ::testing::ValuesIn(kGpus),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(Status, AnUnreachableIntensityUrlGivesNoValue) {
  EXPECT_FALSE(greenshard::fetch_intensity("http://127.0.0.1:1/intensity").has_value()) << "unreachable: no value";
}

}  // namespace
