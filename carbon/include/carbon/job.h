// A training job as the placement sees it.
#pragma once

#include "carbon/time.h"

#include <cstdint>
#include <string>
#include <vector>

namespace carbon {

// One point of a job's scaling curve: its speed (any unit, e.g. tokens/s)
// when it runs on `gpus` resources.
struct ScalingPoint {
  int gpus = 0;
  double speed = 0;
};

struct Job {
  std::string id;                       // names the job in decisions and explanations
  int gpus = 1;                         // resources reserved (GPUs, or ranks on CPU nodes)
  Seconds duration{0};                  // estimated run time (see duration_from_tokens)
  Time submit{};                        // earliest start
  Time deadline = Time::max();          // latest completion (Time::max(): none)
  std::string home_region;              // where it would run carbon-agnostically
  std::vector<std::string> allowed_regions;  // empty = every region
  bool interruptible = false;           // may checkpoint and resume in several windows
  Seconds resume_overhead{std::chrono::minutes{10}};  // extra run time per extra window
  double utilization = 1.0;             // average accelerator utilization (power model)

  // Elastic and migratable jobs. An elastic job runs at any width in
  // [min_gpus, max_gpus] (0: gpus) and may change it between windows; a
  // migratable one may move to another allowed region between windows.
  // Every change is a checkpoint save plus a restore (resume_overhead of
  // run time at the new width, see ElasticCosts in placement.h), so such a
  // job may also pause between windows. `duration` is the job's work at
  // width `gpus`: a window of t hours at width w does t * speed(w) of it.
  int min_gpus = 0;
  int max_gpus = 0;
  int width_step = 1;   // widths between min and max go in steps of this (e.g. GPUs per server)
  bool migratable = false;
  // Declared or measured speeds at some widths, any order; empty: linear
  // (speed proportional to width). See speed().
  std::vector<ScalingPoint> scaling;
  // Bytes of the job's checkpoint, GB (a move sends it between regions);
  // 0: ElasticCosts::checkpoint_gb_per_gpu x gpus.
  double checkpoint_gb = 0;
  // Submission order: a pass breaks its remaining ties by seq, then by id
  // (0 for every job: by id alone, as a trace's jobs are).
  int64_t seq = 0;

  int min_width() const { return min_gpus > 0 ? min_gpus : gpus; }
  int max_width() const { return max_gpus > 0 ? max_gpus : gpus; }
  // Placement may vary the width or the region of its windows.
  bool elastic() const { return min_width() != gpus || max_width() != gpus || migratable; }
  // Speed at width w relative to width `gpus` (speed(gpus) == 1). Between
  // two points of the curve: linear; beyond its ends: proportional to the
  // width from the nearest point (linear scaling). Throws CarbonError when
  // w < 1 or the curve is invalid (check_scaling).
  double speed(int w) const;
};

// The curve's problem, or "" when valid: widths >= 1 and distinct, speeds
// finite and > 0, and speed never falling as the width grows.
std::string scaling_problem(const std::vector<ScalingPoint>& curve);

// tokens / tokens_per_second, rounded up to whole seconds. Throws
// CarbonError when either is <= 0.
Seconds duration_from_tokens(double tokens, double tokens_per_second);

// A deadline expressed as a maximum delay: submit + duration + max_delay.
Time deadline_from_max_delay(const Job& job, Seconds max_delay);

}  // namespace carbon
