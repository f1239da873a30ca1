// Milliseconds of GPU work, measured with CUDA events on device 0's current
// stream: what bench_gpu_mfu and gpu_tests' overlap check time with.
#pragma once

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

#include <functional>

namespace gsbench {

// Records an event, runs f (which enqueues work on that stream), records a
// second one and waits for it; the time between the two.
inline double gpu_ms(const std::function<void()>& f) {
  auto stream = c10::cuda::getCurrentCUDAStream(0);
  at::cuda::CUDAEvent start(cudaEventDefault), end(cudaEventDefault);
  start.record(stream);
  f();
  end.record(stream);
  end.synchronize();
  return static_cast<double>(start.elapsed_time(end));
}

}  // namespace gsbench
