// Elastic and migratable placement of one job (internal to placement.cpp).
//
// plan_elastic() plans, per block of ElasticCosts::min_hold, where (one of
// `regions`) and how wide (0, or min_width..max_width) a job runs, so that
// its work is done by end_slot at the lowest ranked grams. It is
// CarbonScaler's marginal rule under capacity: every block offers the job
// width increments, each with a marginal cost (GPU-hours x ranked grams per
// GPU-hour) and a marginal gain (the extra speed of one more GPU on the
// job's scaling curve); the cheapest cost per unit of work is taken first
// until the work and the time lost to changes are covered.
//
//   1. Blocks: [first_slot + b*B, first_slot + (b+1)*B) clipped to end_slot,
//      B = min_hold in slots. A window starts and ends on block boundaries
//      (the last one may end early), so a job changes at most once a block.
//   2. Region of each block: the cheapest ranked grams per unit of work at
//      the widest width it has room for, among the regions with free
//      capacity >= min_width in every slot of the block; the previous
//      block's region is kept unless the gain over the block exceeds the
//      cost of a move (hysteresis).
//   3. Increments, cheapest first (per block: 0 -> min_width as one
//      increment, then Job::width_step GPUs at a time up to min(max_width, free
//      capacity)). An
//      increment's price includes the changes it adds or removes at its
//      block and at the next block that runs (their overhead in ranked
//      grams and in lost work), so isolated blips of width, region or
//      running time are dear and runs of equal blocks cheap; prices go
//      stale as neighbours change and are re-priced when popped.
//   4. Changes: consecutive chosen blocks with the same region and width
//      merge into one window; every later window starts with a change (a
//      resize, a move, or a resume after a pause) that costs
//      Job::resume_overhead of run time at its width, plus, for a move, the
//      checkpoint's transfer time. The work they lose is added to what
//      step 3 must cover, and step 3 continues until it is.
//   5. The last window ends as soon as the work is done.
// Pure: no clock, no I/O.
#pragma once

#include "carbon/job.h"
#include "carbon/placement.h"

#include <string>
#include <vector>

namespace carbon::detail {

// One candidate region, in the pass's slots (slot k lasts slot_h hours).
struct ElasticRegionView {
  int index = -1;                               // the caller's region index
  const std::vector<double>* intensity = nullptr;   // gCO2/kWh per slot (forecast)
  const std::vector<double>* score = nullptr;       // ranking values per slot
  const std::vector<int>* capacity = nullptr;       // per slot
  const std::vector<int>* used = nullptr;           // per slot (planned)
  double kw_per_gpu = 0;      // facility kW of one GPU at the job's utilization (power x PUE)
  double emb_per_gpu_h = 0;   // embodied grams per GPU-hour
};

struct ElasticWindow {
  int view = 0;               // index into the views passed to plan_elastic
  int first = 0, last = 0;    // slots [first, last)
  double last_frac = 1.0;     // fraction of slot last-1 used
  int gpus = 0;
  double overhead_h = 0;      // run time lost to the change that starts it (0 for the first)
};

struct ElasticChange {
  size_t window = 0;          // the window it starts (>= 1)
  double cost_grams = 0;      // overhead run time + network (expected)
  double saved_grams = 0;     // vs doing that window's work at the previous region and width
  double mean_from = 0;       // forecast intensity over the window at the previous region
  double mean_to = 0;         // ... and at its own
};

struct ElasticResult {
  bool ok = false;
  std::string reason;         // why not (when !ok)
  std::vector<ElasticWindow> windows;
  std::vector<ElasticChange> changes;
  double op_g = 0;            // forecast operational grams of every window (overheads included)
  double emb_g = 0;
  double network_g = 0;       // moves' checkpoint transfers
  double score_g = 0;         // op_g with ranking values
  double rank() const { return score_g + emb_g + network_g; }
  double cost() const { return op_g + emb_g + network_g; }
};

// Plans `job` (job.elastic()) over slots [first_slot, end_slot) in `views`
// (one view: a plan that never moves). Windows may pause between blocks.
ElasticResult plan_elastic(const Job& job, const std::vector<ElasticRegionView>& views, int first_slot, int end_slot,
                           double slot_h, const ElasticCosts& costs);

}  // namespace carbon::detail
