#include "worker/device.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace greenshard {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

bool has(const std::string& haystack, std::string_view needle) { return haystack.find(needle) != std::string::npos; }

struct Peak {
  const char* match;  // lower-case substring of the NVML name; first match wins
  double bf16, fp32;  // dense FLOP/s (vendor data sheets)
};

// Order: the specific variants before the family name.
constexpr Peak kPeaks[] = {
    {"h200 nvl", 835.5e12, 60.0e12},   {"h200", 989.4e12, 66.9e12},
    {"gh200", 989.4e12, 66.9e12},      {"h100 nvl", 835.5e12, 60.0e12},
    {"h100 pcie", 756.5e12, 51.2e12},  {"h100", 989.4e12, 66.9e12},
    {"a100", 312.0e12, 19.5e12},       {"l40s", 362.05e12, 91.6e12},
    {"l4", 121.0e12, 30.3e12},
};

}  // namespace

double gpu_peak_flops(const std::string& gpu_name, const std::string& dtype) {
  const std::string n = lower(gpu_name);
  for (const auto& p : kPeaks)
    if (has(n, p.match)) return dtype == "bfloat16" ? p.bf16 : p.fp32;
  return 0;
}

DevicePlan plan_device(const JobConfig& c, int local_rank, const DeviceFacts& f) {
  DevicePlan p;
  const std::string visible = " (CUDA_VISIBLE_DEVICES " + f.cuda_visible_devices + ")";
  // ---- the device -----------------------------------------------------
  if (c.device == "cuda") {
    if (!f.cuda_build)
      throw ConfigError("device: cuda needs a GPU build of greenshard-worker (GREENSHARD_CUDA=ON against a CUDA "
                        "LibTorch); this build is CPU-only");
    if (f.cuda_devices <= 0) throw ConfigError("device: cuda requested but no CUDA device is visible" + visible);
  }
  const bool want_cuda = c.device == "cuda" || (c.device == "auto" && f.cuda_build && f.cuda_devices > 0);
  if (want_cuda) {
    if (local_rank < 0 || local_rank >= f.cuda_devices)
      throw ConfigError("device: LOCAL_RANK " + std::to_string(local_rank) + " needs CUDA device " +
                        std::to_string(local_rank) + " but this process sees " + std::to_string(f.cuda_devices) +
                        visible + "; run one rank per visible GPU, or set device: cpu");
    p.cuda = true;
    p.index = local_rank;
    p.device = "cuda:" + std::to_string(local_rank);
  }
  // ---- compute dtype, attention ---------------------------------------
  p.param_dtype = c.sharding.param_dtype != "auto" ? c.sharding.param_dtype : (p.cuda ? "bfloat16" : "float32");
  p.attention = c.model.attention != "auto" ? c.model.attention : (f.torch_major >= 2 ? "sdpa" : "explicit");
  // ---- the peak MFU is measured against ---------------------------------
  if (c.peak_flops > 0) {
    p.peak_flops = c.peak_flops;
  } else if (!p.cuda) {
    p.peak_flops = 1e12;
  } else {
    p.peak_flops = gpu_peak_flops(f.gpu_name, p.param_dtype);
    if (p.peak_flops > 0) {
      p.notes.push_back("peak_flops: " + std::to_string(p.peak_flops / 1e12).substr(0, 6) + " TFLOP/s, the " +
                        p.param_dtype + " dense peak of " + f.gpu_name);
    } else {
      p.notes.push_back("peak_flops: no known peak for GPU '" + (f.gpu_name.empty() ? "?" : f.gpu_name) +
                        "'; MFU is reported as 0 until peak_flops is set");
    }
  }
  // ---- the embodied-carbon profile --------------------------------------
  if (c.carbon.hardware != "auto") {
    p.hardware = c.carbon.hardware;
  } else if (!p.cuda) {
    p.hardware = "cpu-2s";
  } else {
    const std::string n = lower(f.gpu_name);
    if (has(n, "h200")) p.hardware = "h200-sxm-8";
    else if (has(n, "h100") || has(n, "gh200")) p.hardware = "h100-sxm-8";
    else if (has(n, "a100")) p.hardware = "a100-sxm-8";
    else {
      p.hardware = "h100-sxm-8";
      p.notes.push_back("carbon.hardware: no profile for GPU '" + (f.gpu_name.empty() ? "?" : f.gpu_name) +
                        "'; using h100-sxm-8 (set carbon.hardware)");
    }
  }
  return p;
}

}  // namespace greenshard
