// The facts plan_device (worker/device.h) decides from, gathered from this
// process: a CUDA build of shard/ (NCCL), the CUDA devices LibTorch sees, the
// NVML name of LOCAL_RANK's GPU, LibTorch's version. LibTorch and NVML
// (dlopen) here; no CUDA-only code, so it builds and runs on the CPU build
// too (no GPU: cuda_build false, 0 devices).
#pragma once

#include "worker/device.h"

namespace greenshard {

DeviceFacts device_facts(int local_rank);

}  // namespace greenshard
