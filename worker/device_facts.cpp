#include "worker/device_facts.h"

#include "shard/rendezvous.h"
#include "worker/energy.h"
#include "worker/model.h"

#include <torch/cuda.h>

#include <cstdlib>

namespace greenshard {

DeviceFacts device_facts(int local_rank) {
  DeviceFacts f;
  f.cuda_build = shard::backend_for(c10::Device(c10::kCUDA, 0)) == shard::Backend::kNccl;
  f.cuda_devices = f.cuda_build ? static_cast<int>(torch::cuda::device_count()) : 0;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible) f.cuda_visible_devices = std::string("'") + visible + "'";
  f.nvml_index = select_gpu(local_rank, nvml_device_count(), visible);
  f.gpu_name = nvml_device_name(f.nvml_index);
  f.torch_major = torch_major_version();
  return f;
}

}  // namespace greenshard
