// plan_device (worker/device.h): which device a rank computes on and the
// defaults that follow, as a table keyed by a sentence. The facts (CUDA
// build, visible devices, the GPU's name) are inputs, so the GPU rows run on
// this CPU-only machine; that the trainer gathers and applies them on a real
// GPU is bench/gpu's job (docs/gpu.md).
#include "worker/device.h"

#include "common/spawn.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace greenshard {
namespace {

DeviceFacts cpu_only() { return DeviceFacts{}; }

DeviceFacts gpus(int n, const std::string& name = "NVIDIA H200", int torch_major = 2) {
  DeviceFacts f;
  f.cuda_build = true;
  f.cuda_devices = n;
  f.gpu_name = name;
  f.torch_major = torch_major;
  f.cuda_visible_devices = "'0,1'";
  return f;
}

struct PlanCase {
  const char* sentence;
  std::function<void(JobConfig&)> spec;
  int local_rank;
  DeviceFacts facts;
  // Expected: error substring, or the plan's fields.
  const char* error;
  const char* device;
  const char* param_dtype;
  const char* attention;
  double peak_flops;
  const char* hardware;
};

void none(JobConfig&) {}

const PlanCase kPlans[] = {
    {"auto on a CPU-only build trains on the CPU in float32 with explicit attention", none, 0, cpu_only(), "",
     "cpu", "float32", "explicit", 1e12, "cpu-2s"},
    {"auto on a CUDA build without a visible GPU trains on the CPU", none, 0, gpus(0), "", "cpu", "float32", "sdpa",
     1e12, "cpu-2s"},
    {"auto with two GPUs puts local rank 1 on cuda:1 in bfloat16 with SDPA", none, 1, gpus(2), "", "cuda:1",
     "bfloat16", "sdpa", 989.4e12, "h200-sxm-8"},
    {"auto with LibTorch 1.13 on a GPU keeps explicit attention", none, 0, gpus(1, "NVIDIA A100-SXM4-80GB", 1), "",
     "cuda:0", "bfloat16", "explicit", 312e12, "a100-sxm-8"},
    {"float32 on a GPU is kept and measured against the fp32 peak",
     [](JobConfig& c) { c.sharding.param_dtype = "float32"; }, 0, gpus(1, "NVIDIA H100 80GB HBM3"), "", "cuda:0",
     "float32", "sdpa", 66.9e12, "h100-sxm-8"},
    {"an H100 PCIe has its own peak", none, 0, gpus(1, "NVIDIA H100 PCIe"), "", "cuda:0", "bfloat16", "sdpa",
     756.5e12, "h100-sxm-8"},
    {"an unknown GPU reports no peak and falls back to the h100 profile", none, 0, gpus(1, "Tesla T4"), "", "cuda:0",
     "bfloat16", "sdpa", 0, "h100-sxm-8"},
    {"explicit settings win over every default",
     [](JobConfig& c) {
       c.device = "cuda";
       c.sharding.param_dtype = "float32";
       c.model.attention = "explicit";
       c.peak_flops = 5e14;
       c.carbon.hardware = "a100-sxm-8";
     },
     0, gpus(1), "", "cuda:0", "float32", "explicit", 5e14, "a100-sxm-8"},
    {"cpu is honoured on a GPU node", [](JobConfig& c) { c.device = "cpu"; }, 1, gpus(2), "", "cpu", "float32",
     "sdpa", 1e12, "cpu-2s"},
    {"sdpa may be asked for on LibTorch 1.13 on the CPU", [](JobConfig& c) { c.model.attention = "sdpa"; }, 0,
     cpu_only(), "", "cpu", "float32", "sdpa", 1e12, "cpu-2s"},
    {"cuda on a CPU-only build is refused naming device", [](JobConfig& c) { c.device = "cuda"; }, 0, cpu_only(),
     "device: cuda needs a GPU build", "", "", "", 0, ""},
    {"cuda without a visible GPU is refused naming CUDA_VISIBLE_DEVICES", [](JobConfig& c) { c.device = "cuda"; }, 0,
     gpus(0), "device: cuda requested but no CUDA device is visible (CUDA_VISIBLE_DEVICES '0,1')", "", "", "", 0,
     ""},
    {"a local rank beyond the visible GPUs is refused, also under auto", none, 2, gpus(2),
     "device: LOCAL_RANK 2 needs CUDA device 2 but this process sees 2", "", "", "", 0, ""},
};

class Plan : public ::testing::TestWithParam<PlanCase> {};

TEST_P(Plan, Resolves) {
  const PlanCase& c = GetParam();
  JobConfig cfg;
  c.spec(cfg);
  if (std::string(c.error).empty()) {
    const DevicePlan p = plan_device(cfg, c.local_rank, c.facts);
    EXPECT_EQ(p.device, c.device);
    EXPECT_EQ(p.cuda, std::string(c.device) != "cpu");
    EXPECT_EQ(p.param_dtype, c.param_dtype);
    EXPECT_EQ(p.attention, c.attention);
    EXPECT_DOUBLE_EQ(p.peak_flops, c.peak_flops);
    EXPECT_EQ(p.hardware, c.hardware);
    // A default the log should explain (a GPU peak) is noted.
    if (p.cuda && cfg.peak_flops == 0) EXPECT_FALSE(p.notes.empty());
  } else {
    try {
      plan_device(cfg, c.local_rank, c.facts);
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(c.error), std::string::npos) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, Plan, ::testing::ValuesIn(kPlans),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(GpuPeak, SpecificVariantsBeforeTheFamilyAndUnknownIsZero) {
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA H200 NVL", "bfloat16"), 835.5e12);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA H200", "bfloat16"), 989.4e12);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA GH200 480GB", "bfloat16"), 989.4e12);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA L40S", "bfloat16"), 362.05e12);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA L4", "float32"), 30.3e12);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("NVIDIA A100-PCIE-40GB", "float32"), 19.5e12);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("", "bfloat16"), 0);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("Tesla V100-SXM2-16GB", "bfloat16"), 0);
}

}  // namespace
}  // namespace greenshard
