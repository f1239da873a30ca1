// Job traces: a seeded generator of ML training jobs and a CSV reader/writer.
//
// Generator (after Wiesner et al., "Let's Wait Awhile", Middleware'21):
// jobs submitted on workdays (Mon-Fri) between 09:00 and 17:00 UTC, run time
// uniform in [min_hours, max_hours] whole hours, GPUs from `gpu_choices`,
// home region uniform over `regions`, interruptible with probability
// `interruptible_fraction`. Deadline (earliest finish = submit + duration):
//   next workday  -> 09:00 of the first workday on a later day than the
//                    earliest finish
//   semi-weekly   -> the first Monday or Thursday 09:00 after the earliest finish
//
// CSV format (header required, times ISO UTC, allowed regions ';'-separated,
// empty = all):
//   id,submit,duration_h,gpus,deadline,home_region,interruptible,allowed_regions
// and optionally (elastic and migratable jobs; written when any job is one):
//   min_gpus,max_gpus,migratable
// (empty min/max = gpus; 1 <= min_gpus <= gpus <= max_gpus).
#pragma once

#include "carbon/job.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace carbon {

struct TraceOptions {
  std::uint64_t seed = 1;
  Time from{}, to{};                        // submit times in [from, to)
  std::vector<std::string> regions;         // home regions (uniform)
  double jobs_per_workday = 40;
  int min_hours = 4, max_hours = 90;
  std::vector<int> gpu_choices{8, 8, 16, 16, 32, 64};   // uniform pick
  double interruptible_fraction = 0.5;
  double semi_weekly_fraction = 0.5;        // else next-workday deadline
};

// Sorted by submit time; ids "j000001"... Throws CarbonError on bad options.
std::vector<Job> generate_trace(const TraceOptions& options);

// Deadline helpers (UTC).
Time next_workday_9am_after(Time t);        // first Mon-Fri 09:00 on a later day than t
Time next_semi_weekly_9am_after(Time t);    // first Mon/Thu 09:00 strictly after t

// Makes `job` elastic the way the bench models FSDP jobs: widths from half
// (at least one step) to twice its GPUs in steps of `width_step` (GPUs per
// server), each doubling 1.85x faster (half width: 0.54x).
void make_elastic(Job& job, int width_step);

std::vector<Job> read_trace_csv(const std::filesystem::path& file);   // InputError file:line:col
std::vector<Job> parse_trace_csv(const std::string& text, const std::string& name);
void write_trace_csv(const std::filesystem::path& file, const std::vector<Job>& jobs);

}  // namespace carbon
