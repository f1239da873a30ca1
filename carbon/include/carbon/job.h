// A training job as the placement sees it.
#pragma once

#include "carbon/time.h"

#include <string>
#include <vector>

namespace carbon {

struct Job {
  std::string id;
  int gpus = 1;                         // resources reserved (GPUs, or ranks on CPU nodes)
  Seconds duration{0};                  // estimated run time (see duration_from_tokens)
  Time submit{};                        // earliest start
  Time deadline = Time::max();          // latest completion (Time::max(): none)
  std::string home_region;              // where it would run carbon-agnostically
  std::vector<std::string> allowed_regions;  // empty = every region
  bool interruptible = false;           // may checkpoint and resume in several windows
  Seconds resume_overhead{std::chrono::minutes{10}};  // extra run time per extra window
  double utilization = 1.0;             // average accelerator utilization (power model)
};

// tokens / tokens_per_second, rounded up to whole seconds. Throws
// CarbonError when either is <= 0.
Seconds duration_from_tokens(double tokens, double tokens_per_second);

// A deadline expressed as a maximum delay: submit + duration + max_delay.
Time deadline_from_max_delay(const Job& job, Seconds max_delay);

}  // namespace carbon
