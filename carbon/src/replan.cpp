#include "carbon/replan.h"

#include "carbon/error.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <unordered_map>

namespace carbon {

const char* replan_reason_name(ReplanReason r) {
  switch (r) {
    case ReplanReason::kUnchanged: return "unchanged";
    case ReplanReason::kFull: return "full";
    case ReplanReason::kNoBasis: return "no-basis";
    case ReplanReason::kCapacityLost: return "capacity-lost";
    case ReplanReason::kForecastRevised: return "forecast-revised";
    case ReplanReason::kCapacityFreed: return "capacity-freed";
    case ReplanReason::kHigherPriority: return "higher-priority";
  }
  return "?";
}

namespace {

// Capacity of `r` in the hour `h` hours after floor_hour(now) (placement's rule).
int capacity_at(const Region& r, long h) {
  return h >= 0 && h < static_cast<long>(r.capacity_by_hour.size()) ? r.capacity_by_hour[static_cast<size_t>(h)]
                                                                     : r.capacity;
}

// Indices into `regions` of the job's regions (see replan.h).
std::vector<size_t> job_regions(const Job& job, const std::vector<Region>& regions, const PlacementOptions& placement,
                                const std::unordered_map<std::string, size_t>& index) {
  std::vector<size_t> out;
  auto add = [&](const std::string& name) {
    auto it = index.find(name);
    if (it != index.end() && std::find(out.begin(), out.end(), it->second) == out.end()) out.push_back(it->second);
  };
  if (placement.policy == Policy::kRunNowHome || placement.policy == Policy::kTemporal) add(job.home_region);
  else if (job.allowed_regions.empty())
    for (size_t i = 0; i < regions.size(); ++i) out.push_back(i);
  else
    for (const auto& name : job.allowed_regions) add(name);
  return out;
}

// The job's span as hour indices [a, b) after floor_hour(now) (see replan.h).
std::pair<long, long> job_span(const Job& job, const Decision* plan, Time now, const PlacementOptions& placement) {
  const Time h0 = floor_hour(now);
  const Time earliest = std::max(now, job.submit);
  Time end = earliest + job.duration;
  if (job.deadline != Time::max()) end = std::max(end, job.deadline);
  else end = Time::max();
  if (plan) end = std::max(end, plan->end);
  const Time horizon = now + placement.max_lookahead;
  end = std::min(end, horizon);
  const long a = static_cast<long>((floor_hour(earliest) - h0) / Hours{1});
  const long b = static_cast<long>((ceil_hour(end) - h0) / Hours{1});
  return {a, std::max(a, b)};
}

// Hours [a, b) intersected with [0, n): any flagged (prefix counts: p[i] =
// flags among hours [0, i)).
bool any_in(const std::vector<int>& prefix, long a, long b) {
  const long n = static_cast<long>(prefix.size()) - 1;
  a = std::max(a, 0L);
  b = std::min(b, n);
  return a < b && prefix[static_cast<size_t>(b)] - prefix[static_cast<size_t>(a)] > 0;
}

std::vector<int> prefix_of(const std::vector<char>& flags) {
  std::vector<int> p(flags.size() + 1, 0);
  for (size_t i = 0; i < flags.size(); ++i) p[i + 1] = p[i] + (flags[i] ? 1 : 0);
  return p;
}

// What changed in one region since one basis, per hour after floor_hour(now).
struct Changes {
  std::vector<int> cleaner;   // prefix counts of hours revised down beyond the threshold
  std::vector<int> dirtier;   // ... revised up beyond it
  std::vector<int> freed;     // prefix counts of hours with more free capacity than the basis
  std::vector<int> taken;     // ... with less
};

// Revisions of `now_f` against `old_f` beyond `threshold` (relative to
// max(old, 1 g)) at the instants of the hour [h, h + 1 h) that both cover
// and the basis's look-ahead [old_from, old_to) holds: down (*cleaner) and
// up (*dirtier).
void revised_in_hour(const IntensitySeries& now_f, const IntensitySeries& old_f, Time old_from, Time old_to, Time h,
                     double threshold, char* cleaner, char* dirtier) {
  const Time from = std::max({h, now_f.start(), old_f.start(), old_from});
  const Time to = std::min({h + Hours{1}, now_f.end(), old_f.end(), old_to});
  // Walk the union of both series' step boundaries within [from, to).
  for (Time t = from; t < to;) {
    const double a = old_f.at(t), b = now_f.at(t);
    const double rel = (b - a) / std::max(a, 1.0);
    if (rel < -threshold) *cleaner = 1;
    if (rel > threshold) *dirtier = 1;
    t = std::min(floor_to_step(t, old_f.step()) + old_f.step(), floor_to_step(t, now_f.step()) + now_f.step());
  }
}

}  // namespace

PlanBasis plan_basis(const std::vector<Region>& regions, const CapacityLedger& planned, Time now,
                     const PlacementOptions& placement) {
  PlanBasis b;
  const Time h0 = floor_hour(now);
  const int n = static_cast<int>((ceil_hour(now + placement.max_lookahead) - h0) / Hours{1});
  std::vector<int> used;
  for (const auto& r : regions) {
    auto& e = b.regions[r.name];
    e.forecast = r.forecast;
    e.first_hour = h0;
    planned.usage(r.name, h0, n, used);
    e.free.resize(static_cast<size_t>(n));
    for (int h = 0; h < n; ++h) e.free[static_cast<size_t>(h)] = capacity_at(r, h) - used[static_cast<size_t>(h)];
  }
  return b;
}

std::vector<ReplanReason> select_replans(const std::vector<HeldPlan>& held, const std::vector<Region>& regions,
                                         const CapacityLedger& planned, Time now, const PlacementOptions& placement,
                                         const ReplanOptions& options) {
  if (!(options.forecast_threshold >= 0) || !std::isfinite(options.forecast_threshold))
    throw CarbonError("re-plan: forecast_threshold must be a finite fraction >= 0, got " +
                      std::to_string(options.forecast_threshold));
  for (const auto& h : held)
    if (!h.job || !h.plan) throw CarbonError("re-plan: a held plan needs its job and its plan");
  std::vector<ReplanReason> out(held.size(), ReplanReason::kUnchanged);
  if (!options.incremental) {
    std::fill(out.begin(), out.end(), ReplanReason::kFull);
    return out;
  }
  const Time h0 = floor_hour(now);
  // Hours after h0 any span can reach.
  const long n = static_cast<long>((ceil_hour(now + placement.max_lookahead) - h0) / Hours{1});
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < regions.size(); ++i) index[regions[i].name] = i;
  // Capacity pricing ranks these policies' candidates by the planned load too.
  const bool priced = !placement.expected_load_by_hour_of_week.empty() &&
                      (placement.policy == Policy::kTemporal || placement.policy == Policy::kSpatioTemporal);

  // Now, per region: free capacity and over-committed hours (prefix counts).
  std::vector<std::vector<int>> free_now(regions.size());
  std::vector<std::vector<int>> over(regions.size());
  {
    std::vector<int> used;
    for (size_t i = 0; i < regions.size(); ++i) {
      planned.usage(regions[i].name, h0, static_cast<int>(n), used);
      free_now[i].resize(static_cast<size_t>(n));
      std::vector<char> flags(static_cast<size_t>(n));
      for (long h = 0; h < n; ++h) {
        free_now[i][static_cast<size_t>(h)] = capacity_at(regions[i], h) - used[static_cast<size_t>(h)];
        flags[static_cast<size_t>(h)] = free_now[i][static_cast<size_t>(h)] < 0;
      }
      over[i] = prefix_of(flags);
    }
  }

  // Changes since each basis, per region, computed once per basis.
  std::unordered_map<const PlanBasis*, std::vector<Changes>> changes;
  auto changes_since = [&](const PlanBasis* basis) -> const std::vector<Changes>& {
    auto it = changes.find(basis);
    if (it != changes.end()) return it->second;
    std::vector<Changes> cs(regions.size());
    for (size_t i = 0; i < regions.size(); ++i) {
      std::vector<char> cleaner(static_cast<size_t>(n), 0), dirtier(static_cast<size_t>(n), 0),
          freed(static_cast<size_t>(n), 0), taken(static_cast<size_t>(n), 0);
      auto e = basis->regions.find(regions[i].name);
      if (e == basis->regions.end()) {
        std::fill(cleaner.begin(), cleaner.end(), 1);   // usable now, not then: new options
      } else {
        const auto& b = e->second;
        const long off = static_cast<long>((h0 - b.first_hour) / Hours{1});
        const Time b_end = b.first_hour + Hours{static_cast<long>(b.free.size())};
        for (long h = 0; h < n; ++h) {
          const long k = h + off;
          if (k >= 0 && k < static_cast<long>(b.free.size())) {
            freed[static_cast<size_t>(h)] = free_now[i][static_cast<size_t>(h)] > b.free[static_cast<size_t>(k)];
            taken[static_cast<size_t>(h)] = free_now[i][static_cast<size_t>(h)] < b.free[static_cast<size_t>(k)];
          }
          if (!b.forecast.empty() && !regions[i].forecast.empty())
            revised_in_hour(regions[i].forecast, b.forecast, b.first_hour, b_end, h0 + Hours{h},
                            options.forecast_threshold, &cleaner[static_cast<size_t>(h)],
                            &dirtier[static_cast<size_t>(h)]);
        }
      }
      cs[i].cleaner = prefix_of(cleaner);
      cs[i].dirtier = prefix_of(dirtier);
      cs[i].freed = prefix_of(freed);
      cs[i].taken = prefix_of(taken);
    }
    return changes.emplace(basis, std::move(cs)).first->second;
  };

  for (size_t k = 0; k < held.size(); ++k) {
    const HeldPlan& hp = held[k];
    if (!hp.basis) {
      out[k] = ReplanReason::kNoBasis;
      continue;
    }
    const auto& cs = changes_since(hp.basis);
    // Lost: a reserved region gone, or over-committed in a reserved hour.
    // Dirtier: the forecast of an hour the plan reserves was revised up.
    bool lost = false, dirtier = false;
    for (const auto& w : hp.plan->windows) {
      const std::string& name = w.region.empty() ? hp.plan->region : w.region;
      auto it = index.find(name);
      if (it == index.end()) {
        lost = true;
        break;
      }
      const long a = static_cast<long>((floor_hour(w.start) - h0) / Hours{1});
      const long b = static_cast<long>((ceil_hour(w.end) - h0) / Hours{1});
      // Hours beyond the look-ahead's end (none for a plan made within it).
      for (long h = std::max(a, n); h < b && !lost; ++h)
        lost = capacity_at(regions[it->second], h) - planned.used(name, h0 + Hours{h}) < 0;
      if (lost || any_in(over[it->second], a, b) || (priced && any_in(cs[it->second].taken, a, b))) {
        lost = true;
        break;
      }
      dirtier = dirtier || any_in(cs[it->second].dirtier, a, b);
    }
    if (lost) {
      out[k] = ReplanReason::kCapacityLost;
      continue;
    }
    // Cleaner, freed: in one of the job's regions, over its span.
    const auto [a, b] = job_span(*hp.job, hp.plan, now, placement);
    bool cleaner = false, freed = false;
    for (size_t r : job_regions(*hp.job, regions, placement, index)) {
      cleaner = cleaner || any_in(cs[r].cleaner, a, b);
      freed = freed || any_in(cs[r].freed, a, b);
    }
    out[k] = dirtier || cleaner ? ReplanReason::kForecastRevised
             : freed            ? ReplanReason::kCapacityFreed
                                : ReplanReason::kUnchanged;
  }
  return out;
}

std::vector<bool> in_the_way(const std::vector<Unserved>& unserved, const std::vector<HeldPlan>& held,
                             const std::vector<Region>& regions, Time now, const PlacementOptions& placement) {
  std::vector<bool> out(held.size(), false);
  if (unserved.empty()) return out;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < regions.size(); ++i) index[regions[i].name] = i;
  const Time h0 = floor_hour(now);
  struct Need {
    int priority;
    std::vector<char> region;   // by index into `regions`
    long a, b;                  // span hours after h0
  };
  std::vector<Need> needs;
  for (const auto& u : unserved) {
    if (!u.job) throw CarbonError("re-plan: an unserved entry needs its job");
    Need x{u.priority, std::vector<char>(regions.size(), 0), 0, 0};
    for (size_t r : job_regions(*u.job, regions, placement, index)) x.region[r] = 1;
    std::tie(x.a, x.b) = job_span(*u.job, nullptr, now, placement);
    needs.push_back(std::move(x));
  }
  for (size_t k = 0; k < held.size(); ++k) {
    const HeldPlan& hp = held[k];
    if (!hp.plan) throw CarbonError("re-plan: a held plan needs its job and its plan");
    for (const auto& w : hp.plan->windows) {
      auto it = index.find(w.region.empty() ? hp.plan->region : w.region);
      if (it == index.end()) continue;
      const long a = static_cast<long>((floor_hour(w.start) - h0) / Hours{1});
      const long b = static_cast<long>((ceil_hour(w.end) - h0) / Hours{1});
      for (const auto& x : needs)
        if (x.priority > hp.priority && x.region[it->second] && a < x.b && x.a < b) out[k] = true;
      if (out[k]) break;
    }
  }
  return out;
}

}  // namespace carbon
