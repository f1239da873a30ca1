// Where a rank computes, and the defaults that follow from it: the device
// (CUDA device LOCAL_RANK, or the CPU), the compute dtype, the attention
// kernel, the peak FLOP/s MFU is measured against, and the hardware profile
// of the embodied-carbon term. A pure function of the job spec and the facts
// of this process (tested as a table); no LibTorch here. The trainer
// gathers the facts (torch::cuda::device_count, NVML's name) and applies
// the plan.
#pragma once

#include "worker/spec/job_spec.h"

#include <string>
#include <vector>

namespace greenshard {

struct DeviceFacts {
  bool cuda_build = false;  // shard/ built with GREENSHARD_CUDA (CUDA LibTorch, NCCL)
  int cuda_devices = 0;     // CUDA devices this process sees (after CUDA_VISIBLE_DEVICES)
  int nvml_index = -1;      // NVML index of LOCAL_RANK's GPU (select_gpu), -1 if none
  std::string gpu_name;     // NVML's name of that GPU, "" if unknown
  int torch_major = 1;      // LibTorch major version
  std::string cuda_visible_devices = "(unset)";  // for messages
};

struct DevicePlan {
  bool cuda = false;
  int index = -1;               // CUDA ordinal (as this process numbers them), -1 on the CPU
  std::string device = "cpu";   // "cpu" | "cuda:<index>"
  std::string param_dtype;      // "float32" | "bfloat16"
  std::string attention;        // "explicit" | "sdpa"
  double peak_flops = 0;        // per rank; 0 = unknown (MFU reported as 0)
  std::string hardware;         // carbon hardware profile
  std::vector<std::string> notes;  // what was chosen by default and why, for the log
};

// Throws ConfigError naming the field ("device", ...) when the request cannot
// be met: cuda on a CPU-only build, no visible CUDA device, LOCAL_RANK
// beyond the visible devices (auto included: ranks never mix devices).
//   device auto: cuda:<local_rank> when this is a CUDA build and a device is
//     visible, else cpu.
//   sharding.param_dtype auto: bfloat16 on CUDA (fp32 master shards and
//     reductions), float32 on the CPU.
//   model.attention auto: sdpa with LibTorch >= 2 (fused kernels), else explicit.
//   peak_flops 0: the GPU's dense peak for the compute dtype (gpu_peak_flops),
//     1e12 on the CPU.
//   carbon.hardware auto: the profile of the GPU family (h200-sxm-8,
//     h100-sxm-8, a100-sxm-8; other GPUs h100-sxm-8, noted), cpu-2s on the CPU.
DevicePlan plan_device(const JobConfig& c, int local_rank, const DeviceFacts& facts);

// Dense (no sparsity) peak FLOP/s of one GPU by NVML name for "bfloat16"
// (tensor cores) or "float32" (no TF32); 0 when the name is not known.
double gpu_peak_flops(const std::string& gpu_name, const std::string& dtype);

}  // namespace greenshard
