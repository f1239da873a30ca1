#include "carbon/scheduling_pass.h"

#include "carbon/error.h"

namespace carbon {

const char* pass_outcome_name(PassOutcome o) {
  switch (o) {
    case PassOutcome::kPlaced: return "placed";
    case PassOutcome::kKeptPrevious: return "kept";
    case PassOutcome::kFallback: return "fallback";
    case PassOutcome::kUnplaced: return "unplaced";
  }
  return "?";
}

Policy fallback_policy(Policy p) { return p == Policy::kTemporal ? Policy::kRunNowHome : Policy::kSpatial; }

namespace {

// Every window (its own region and width when set) has room in `planned`.
bool fits(const std::vector<Region>& regions, const CapacityLedger& planned, const Decision& d, int amount) {
  for (const auto& w : d.windows) {
    const std::string& name = w.region.empty() ? d.region : w.region;
    const int need = w.gpus > 0 ? w.gpus : amount;
    const Region* r = nullptr;
    for (const auto& x : regions)
      if (x.name == name) r = &x;
    if (!r) return false;
    for (Time h = floor_hour(w.start); h < w.end; h += Hours{1})
      if (planned.used(name, h) + need > r->capacity) return false;
  }
  return true;
}

}  // namespace

std::vector<PassResult> schedule_pass(const std::vector<Job>& jobs, const std::vector<std::optional<Decision>>& previous,
                                      const std::vector<Region>& regions, CapacityLedger& planned, Time now,
                                      const PlacementOptions& options, Policy fallback) {
  if (!previous.empty() && previous.size() != jobs.size())
    throw CarbonError("schedule_pass: previous plans must be empty or one per job");
  std::vector<PassResult> out(jobs.size());
  // Previous plans are held again (each while it fits), so that the pass
  // releases each one only to its own job (place_all's held plans).
  std::vector<const Decision*> held;
  if (!previous.empty()) {
    held.assign(jobs.size(), nullptr);
    for (size_t i = 0; i < jobs.size(); ++i)
      if (previous[i] && previous[i]->feasible && fits(regions, planned, *previous[i], jobs[i].gpus)) {
        planned.reserve(previous[i]->region, previous[i]->windows, jobs[i].gpus);
        held[i] = &*previous[i];
      }
  }
  std::vector<bool> kept;
  auto first = place_all(jobs, regions, planned, now, options, held, &kept);
  std::vector<Job> retry;
  std::vector<size_t> retry_idx;
  for (size_t i = 0; i < jobs.size(); ++i) {
    out[i].decision = std::move(first[i]);
    if (out[i].decision.feasible) {
      out[i].outcome = kept[i] ? PassOutcome::kKeptPrevious : PassOutcome::kPlaced;
      continue;
    }
    retry.push_back(jobs[i]);
    retry_idx.push_back(i);
  }
  if (retry.empty() || fallback == options.policy) return out;
  PlacementOptions fb = options;
  fb.policy = fallback;
  auto second = place_all(retry, regions, planned, now, fb);
  for (size_t b = 0; b < retry.size(); ++b) {
    if (!second[b].feasible) continue;   // kUnplaced, with the first pass's reason
    out[retry_idx[b]].outcome = PassOutcome::kFallback;
    out[retry_idx[b]].decision = std::move(second[b]);
  }
  return out;
}

}  // namespace carbon
