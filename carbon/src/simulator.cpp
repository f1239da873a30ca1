#include "carbon/simulator.h"

#include "carbon/accounting.h"
#include "carbon/error.h"
#include "carbon/expected_load.h"
#include "carbon/scheduling_pass.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <numeric>

namespace carbon {

const char* sim_policy_name(SimPolicy p) {
  switch (p) {
    case SimPolicy::kFifo: return "fifo";
    case SimPolicy::kTemporal: return "temporal";
    case SimPolicy::kSpatial: return "spatial";
    case SimPolicy::kSpatioTemporal: return "spatio-temporal";
    case SimPolicy::kOracle: return "oracle";
  }
  return "?";
}

SimPolicy parse_sim_policy(const std::string& s) {
  for (auto p : {SimPolicy::kFifo, SimPolicy::kTemporal, SimPolicy::kSpatial, SimPolicy::kSpatioTemporal, SimPolicy::kOracle})
    if (s == sim_policy_name(p)) return p;
  throw CarbonError("unknown policy '" + s + "' (known: fifo, temporal, spatial, spatio-temporal, oracle)");
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const SimRegion& region_of(const SimConfig& c, const std::string& zone) {
  for (const auto& r : c.regions)
    if (r.zone == zone) return r;
  throw CarbonError("simulator: region '" + zone + "' is not configured");
}

const IntensitySeries& actual_of(const SimConfig& c, const std::string& zone) {
  auto it = c.actual.find(zone);
  if (it == c.actual.end()) throw CarbonError("simulator: no intensity series for zone '" + zone + "'");
  return it->second;
}

// Actual emissions of running `job` during o.windows: each window in its
// own region at its own width (Window::region / gpus, else `zone` and
// job.gpus), plus each move's checkpoint transfer (move_network_grams, at
// the two regions' intensities when the later window starts).
void account(const SimConfig& c, const Job& job, const std::string& zone, JobOutcome& o) {
  o.operational_grams = 0;
  double embodied = 0;
  const std::string* prev_zone = nullptr;
  for (const auto& w : o.windows) {
    const std::string& z = w.region.empty() ? zone : w.region;
    const auto& r = region_of(c, z);
    const auto& a = actual_of(c, z);
    const int gpus = w.gpus > 0 ? w.gpus : job.gpus;
    o.operational_grams += operational_grams(a, w.start, w.end, r.hardware.power_w(gpus, job.utilization), r.pue);
    embodied += embodied_grams(r.hardware, w.end - w.start, gpus);
    if (prev_zone && *prev_zone != z)
      o.operational_grams += move_network_grams(job, c.placement.elastic, actual_of(c, *prev_zone).at(w.start), a.at(w.start));
    prev_zone = &z;
  }
  o.grams = o.operational_grams + embodied;
}

void finish_outcome(const Job& job, JobOutcome& o) {
  Time end = o.windows.back().end;
  o.delay_h = static_cast<double>((end - (job.submit + job.duration)).count()) / 3600.0;
  o.deadline_missed = end > job.deadline;
}

void validate(const std::vector<Job>& trace, const SimConfig& c) {
  if (c.regions.empty()) throw CarbonError("simulator: no regions");
  for (const auto& r : c.regions) {
    const auto& a = actual_of(c, r.zone);
    if (!is_supported_step(a.step()))
      throw CarbonError("simulator: series for " + r.zone + " is " + step_name(a.step()) +
                        " data (supported steps: 5, 15, 30 or 60 minutes)");
    if (floor_to_step(a.start(), a.step()) != a.start())
      throw CarbonError("simulator: series for " + r.zone + " starts at " + format_time(a.start()) + ", off its " +
                        step_name(a.step()) + " grid");
    if (r.capacity < 0 || r.pue < 1) throw CarbonError("simulator: region " + r.zone + " needs capacity >= 0 and PUE >= 1");
  }
  for (const auto& j : trace) {
    region_of(c, j.home_region);
    for (const auto& z : j.allowed_regions) region_of(c, z);
    if (j.min_width() < 1 || j.min_width() > j.gpus || j.max_width() < j.gpus || j.width_step < 1)
      throw CarbonError("simulator: job " + j.id + " needs 1 <= min_gpus <= gpus <= max_gpus and width_step >= 1");
    if (auto p = scaling_problem(j.scaling); !p.empty()) throw CarbonError("simulator: job " + j.id + ": " + p);
  }
}

// The cycle step: the finest step among the regions' series (validated).
Seconds cycle_step(const SimConfig& c) {
  Seconds step = Hours{1};
  for (const auto& r : c.regions) step = std::min(step, actual_of(c, r.zone).step());
  return step;
}

// Capacity-relaxed lower bound: cheapest slots (of `step`) across allowed
// regions.
JobOutcome oracle_job(const SimConfig& c, const Job& job, Seconds step) {
  JobOutcome o;
  o.job_id = job.id;
  std::vector<std::string> zones = job.allowed_regions;
  if (zones.empty())
    for (const auto& r : c.regions) zones.push_back(r.zone);
  const double slots_needed = static_cast<double>(job.duration.count()) / static_cast<double>(step.count());
  const double slot_hours = static_cast<double>(step.count()) / 3600.0;   // 1 on hourly data
  Time from = ceil_to_step(job.submit, step);
  Time to = job.deadline == Time::max() ? from + c.placement.max_lookahead : floor_to_step(job.deadline, step);
  int L = static_cast<int>(std::ceil(slots_needed - 1e-9));
  if ((to - from) / step < L) to = from + step * L;   // cannot meet the deadline: earliest slots
  struct Slot {
    double cost;
    Time t;
    int zone;
  };
  std::vector<Slot> slots;
  for (Time t = from; t < to; t += step) {
    Slot best{std::numeric_limits<double>::infinity(), t, -1};
    for (size_t z = 0; z < zones.size(); ++z) {
      const auto& r = region_of(c, zones[z]);
      const auto& a = actual_of(c, zones[z]);
      if (t < a.start() || t >= a.end()) continue;
      double cost = r.hardware.power_w(job.gpus, job.utilization) / 1000.0 * r.pue * a.at(t) +
                    r.hardware.embodied_g_per_resource_hour() * job.gpus;
      if (cost < best.cost) best = {cost, t, static_cast<int>(z)};
    }
    if (best.zone >= 0) slots.push_back(best);
  }
  if (static_cast<int>(slots.size()) < L) throw CarbonError("simulator: no recorded intensity for job " + job.id);
  std::stable_sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) { return a.cost < b.cost; });
  slots.resize(static_cast<size_t>(L));
  double frac = slots_needed - (L - 1);
  std::vector<double> per_zone(zones.size(), 0);
  o.grams = 0;
  for (int i = 0; i < L; ++i) {
    double f = i == L - 1 ? frac : 1.0;
    o.grams += f * slots[i].cost * slot_hours;   // cost is per hour
    per_zone[slots[i].zone] += f;
  }
  std::sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) { return a.t < b.t; });
  for (const auto& s : slots) {
    if (!o.windows.empty() && o.windows.back().end == s.t) o.windows.back().end += step;
    else o.windows.push_back({s.t, s.t + step});
  }
  o.region = zones[std::max_element(per_zone.begin(), per_zone.end()) - per_zone.begin()];
  o.operational_grams = kNaN;   // mixed regions: only the total is meaningful
  o.expected_grams = kNaN;
  finish_outcome(job, o);
  o.delay_h = std::max(0.0, o.delay_h);
  o.deadline_missed = o.windows.back().end > job.deadline;
  return o;
}

Policy placement_policy(SimPolicy p) {
  switch (p) {
    case SimPolicy::kFifo: return Policy::kRunNowHome;
    case SimPolicy::kTemporal: return Policy::kTemporal;
    case SimPolicy::kSpatial: return Policy::kSpatial;
    default: return Policy::kSpatioTemporal;
  }
}

// Totals, delays and per-region load of res.outcomes (already accounted).
void total(const std::vector<Job>& trace, PolicyResult& res) {
  std::vector<double> delays;
  for (size_t i = 0; i < trace.size(); ++i) {
    const auto& o = res.outcomes[i];
    res.total_grams += o.grams;
    if (!std::isnan(o.operational_grams)) res.operational_grams += o.operational_grams;
    res.deadline_misses += o.deadline_missed ? 1 : 0;
    delays.push_back(o.delay_h);
    for (const auto& w : o.windows)
      res.gpu_hours_by_region[w.region.empty() ? o.region : w.region] +=
          static_cast<double>((w.end - w.start).count()) / 3600.0 * (w.gpus > 0 ? w.gpus : trace[i].gpus);
  }
  if (res.policy == SimPolicy::kOracle) res.operational_grams = kNaN;
  res.embodied_grams = std::isnan(res.operational_grams) ? kNaN : res.total_grams - res.operational_grams;
  if (!delays.empty()) {
    res.mean_delay_h = std::accumulate(delays.begin(), delays.end(), 0.0) / static_cast<double>(delays.size());
    std::sort(delays.begin(), delays.end());
    res.p95_delay_h = delays[static_cast<size_t>(std::ceil(0.95 * static_cast<double>(delays.size()))) - 1];
  }
}

}  // namespace

PolicyResult simulate(const std::vector<Job>& trace, const SimConfig& config, SimPolicy policy) {
  validate(trace, config);
  PolicyResult res;
  res.policy = policy;
  auto forecaster = config.forecaster ? config.forecaster : perfect_forecaster();
  res.forecaster = policy == SimPolicy::kOracle ? "perfect" : forecaster->name();
  res.jobs = static_cast<int>(trace.size());
  res.outcomes.resize(trace.size());
  const Seconds step = cycle_step(config);

  if (policy == SimPolicy::kOracle) {
    for (size_t i = 0; i < trace.size(); ++i) res.outcomes[i] = oracle_job(config, trace[i], step);
  } else {
    PlacementOptions opt = config.placement;
    opt.policy = placement_policy(policy);
    int lookahead = static_cast<int>(opt.max_lookahead.count());

    std::vector<size_t> order(trace.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return trace[a].submit < trace[b].submit; });
    CapacityLedger ledger;
    std::vector<Region> regions;
    for (const auto& r : config.regions) {
      Region g;
      g.name = r.zone;
      g.capacity = r.capacity;
      g.pue = r.pue;
      g.hardware = r.hardware;
      regions.push_back(std::move(g));
    }
    std::vector<size_t> pending;   // to place this cycle
    std::vector<size_t> waiting;   // placed, not started yet (re-planning only)
    const long replan = config.replan_every.count();
    size_t next = 0;
    // Cycles at every step boundary (every hour on hourly data). Hindsight:
    // a job joins at the start of its UTC block.
    const Seconds block = config.hindsight_block;
    if (block < Seconds{0}) throw CarbonError("simulator: hindsight_block must be >= 0");
    auto known_at = [&](size_t i) {
      const Time at = ceil_to_step(trace[i].submit, step);
      return block > Seconds{0} ? floor_to_step(at, block) : at;
    };
    Time t = order.empty() ? Time{} : known_at(order[0]);
    Time give_up = order.empty() ? Time{} : ceil_to_step(trace[order.back()].submit, step) + Hours{24 * 60};
    std::vector<Job> batch;
    // Learned expected load per hour of the week (capacity pricing).
    const bool learn = config.learn_expected_load && policy == SimPolicy::kSpatioTemporal;
    double total_capacity = 0;
    for (const auto& r : config.regions) total_capacity += r.capacity;
    ExpectedLoad expected(config.load_learning_rate);
    Time learned_until = floor_hour(t);
    auto learn_until = [&](Time now) {
      // Hours that ended by `now` are final: no later cycle plans into them.
      for (; learned_until + Hours{1} <= now; learned_until += Hours{1}) {
        double busy = 0;
        for (const auto& r : config.regions) busy += ledger.used(r.zone, learned_until);
        expected.observe(learned_until, total_capacity > 0 ? busy / total_capacity : 0.0);
      }
      if (expected.ready()) opt.expected_load_by_hour_of_week = expected.by_hour_of_week();
    };
    // Forecasts issued at t (once per cycle, when something is placed or
    // re-planned).
    Time issued = Time::min();
    auto issue_forecasts = [&](Time now) {
      if (issued == now) return;
      issued = now;
      for (size_t ri = 0; ri < regions.size(); ++ri) {
        const auto& a = actual_of(config, regions[ri].name);
        if (now < a.start() || now >= a.end())
          throw CarbonError("simulator: " + regions[ri].name + " has no recorded intensity at " + format_time(now));
        // Each at its region's own step from the step containing `now`
        // (placement expands coarser ones to the finest).
        const long per_hour = Seconds{Hours{1}} / a.step();
        int h = static_cast<int>(std::min<long>(lookahead * per_hour, (a.end() - floor_to_step(now, a.step())) / a.step()));
        regions[ri].forecast = forecast_series(*forecaster, a, now, h);
      }
    };
    // What each waiting job's plan was made against (replan.h).
    std::vector<std::shared_ptr<const PlanBasis>> basis(replan > 0 ? trace.size() : 0);
    while (next < order.size() || !pending.empty() || !waiting.empty()) {
      if (t > give_up) throw CarbonError("simulator: jobs still unplaced 60 days after the last submission (capacity too small?)");
      while (next < order.size() && known_at(order[next]) <= t) pending.push_back(order[next++]);
      // Re-plans on the hour only (sub-hourly cycles in between do not).
      bool replan_now = replan > 0 && t == floor_hour(t) && (to_unix(t) / 3600) % replan == 0;
      // Old plans of re-planned jobs, kept when they no longer fit anew.
      std::map<size_t, Decision> old_plan;
      if (replan_now) {
        // Held plans: waiting jobs not started yet (a started one is fixed).
        std::vector<size_t> held_idx;
        std::vector<Decision> held_plan;
        for (size_t i : waiting) {
          const auto& o = res.outcomes[i];
          if (o.windows.front().start <= t) continue;
          Decision d;
          d.feasible = true;
          d.region = o.region;
          d.windows = o.windows;
          d.start = o.windows.front().start;
          d.end = o.windows.back().end;
          d.expected_grams = o.expected_grams;
          held_idx.push_back(i);
          held_plan.push_back(std::move(d));
        }
        waiting.clear();
        if (!held_idx.empty()) {
          issue_forecasts(t);
          std::vector<HeldPlan> held(held_idx.size());
          for (size_t k = 0; k < held_idx.size(); ++k)
            held[k] = {&trace[held_idx[k]], &held_plan[k], basis[held_idx[k]].get(), 0};
          const auto why = select_replans(held, regions, ledger, t, opt, config.replan);
          for (size_t k = 0; k < held_idx.size(); ++k) {
            const size_t i = held_idx[k];
            if (why[k] == ReplanReason::kUnchanged) {
              waiting.push_back(i);   // untouched: still reserved, not passed to placement
              ++res.replan_untouched;
              continue;
            }
            ++res.replan_placed;
            ledger.reserve(held_plan[k].region, held_plan[k].windows, -trace[i].gpus);
            old_plan[i] = std::move(held_plan[k]);
            pending.push_back(i);
          }
        }
      }
      if (pending.empty()) {
        Time next_arrival = next < order.size() ? known_at(order[next]) : Time::max();
        Time next_replan = Time::max();
        if (replan > 0 && !waiting.empty()) {
          long h = to_unix(t) / 3600;
          next_replan = from_unix((h / replan + 1) * replan * 3600);
        }
        t = std::min(next_arrival, next_replan);
        if (t == Time::max()) break;
        continue;
      }
      if (learn) learn_until(t);
      issue_forecasts(t);
      batch.clear();
      std::vector<std::optional<Decision>> previous;
      for (size_t i : pending) {
        batch.push_back(trace[i]);
        auto it = old_plan.find(i);
        previous.push_back(it == old_plan.end() ? std::nullopt : std::optional<Decision>(it->second));
      }
      auto results = schedule_pass(batch, previous, regions, ledger, t, opt, fallback_policy(opt.policy));
      // The basis of every plan this pass made or kept.
      std::shared_ptr<const PlanBasis> now_basis;
      if (replan > 0 && config.replan.incremental)
        now_basis = std::make_shared<const PlanBasis>(plan_basis(regions, ledger, t, opt));
      std::vector<size_t> still;
      for (size_t b = 0; b < batch.size(); ++b) {
        size_t i = pending[b];
        if (results[b].outcome == PassOutcome::kUnplaced) {
          still.push_back(i);
          continue;
        }
        const Decision& d = results[b].decision;
        auto& o = res.outcomes[i];
        o.job_id = trace[i].id;
        o.region = d.region;
        o.windows = d.windows;
        o.expected_grams = d.expected_grams;
        // A kept plan stays what it was (a fallback stays a fallback).
        if (results[b].outcome != PassOutcome::kKeptPrevious) o.fallback = results[b].outcome == PassOutcome::kFallback;
        if (replan > 0 && o.windows.front().start > t) {
          waiting.push_back(i);
          basis[i] = now_basis;
        } else if (replan > 0) {
          basis[i].reset();   // started: never re-planned again
        }
      }
      pending = std::move(still);
      t += step;
    }
    for (size_t i = 0; i < trace.size(); ++i) account_placement(config, trace[i], res.outcomes[i]);
  }
  total(trace, res);
  return res;
}

void account_placement(const SimConfig& config, const Job& job, JobOutcome& o) {
  if (o.windows.empty()) throw CarbonError("simulator: job " + job.id + " has no run window");
  account(config, job, o.region, o);
  finish_outcome(job, o);
}

PolicyResult score_placements(const std::vector<Job>& trace, const SimConfig& config, SimPolicy policy,
                              std::string forecaster, std::string engine, std::vector<JobOutcome> outcomes) {
  validate(trace, config);
  if (outcomes.size() != trace.size())
    throw CarbonError("simulator: " + std::to_string(outcomes.size()) + " outcomes for " +
                      std::to_string(trace.size()) + " jobs");
  PolicyResult res;
  res.policy = policy;
  res.forecaster = std::move(forecaster);
  res.engine = std::move(engine);
  res.jobs = static_cast<int>(trace.size());
  res.outcomes = std::move(outcomes);
  for (size_t i = 0; i < trace.size(); ++i) account_placement(config, trace[i], res.outcomes[i]);
  total(trace, res);
  return res;
}

std::vector<PolicyResult> compare_policies(const std::vector<Job>& trace, const SimConfig& config,
                                           const std::vector<SimPolicy>& policies) {
  std::vector<PolicyResult> out;
  out.push_back(simulate(trace, config, SimPolicy::kFifo));
  for (auto p : policies)
    if (p != SimPolicy::kFifo) out.push_back(simulate(trace, config, p));
  double base = out[0].total_grams;
  for (auto& r : out) r.saved_pct_vs_fifo = base > 0 ? 100.0 * (base - r.total_grams) / base : 0.0;
  return out;
}

namespace {
// "spatio-temporal", or "spatio-temporal@service" for another engine's run.
std::string label(const PolicyResult& r) {
  std::string s = sim_policy_name(r.policy);
  if (r.engine != "library") s += "@" + r.engine;
  return s;
}
}  // namespace

std::string format_results_table(const std::vector<PolicyResult>& results) {
  std::string s;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-16s %-18s %7s %12s %12s %10s %9s %7s %9s %9s\n", "policy", "forecast", "jobs",
                "total_tCO2e", "oper_tCO2e", "emb_tCO2e", "saved_%", "misses", "mean_dly_h", "p95_dly_h");
  s += buf;
  for (const auto& r : results) {
    std::snprintf(buf, sizeof buf, "%-16s %-18s %7d %12.2f %12.2f %10.2f %9.2f %7d %9.2f %9.2f\n",
                  label(r).c_str(), r.forecaster.c_str(), r.jobs, r.total_grams / 1e6,
                  r.operational_grams / 1e6, r.embodied_grams / 1e6, r.saved_pct_vs_fifo, r.deadline_misses,
                  r.mean_delay_h, r.p95_delay_h);
    s += buf;
  }
  return s;
}

std::string results_csv(const std::vector<PolicyResult>& results) {
  std::string s = "policy,forecast,jobs,total_g,operational_g,embodied_g,saved_pct_vs_fifo,deadline_misses,mean_delay_h,p95_delay_h\n";
  char buf[320];
  for (const auto& r : results) {
    std::snprintf(buf, sizeof buf, "%s,%s,%d,%.3f,%.3f,%.3f,%.4f,%d,%.4f,%.4f\n", label(r).c_str(),
                  r.forecaster.c_str(), r.jobs, r.total_grams, r.operational_grams, r.embodied_grams,
                  r.saved_pct_vs_fifo, r.deadline_misses, r.mean_delay_h, r.p95_delay_h);
    s += buf;
  }
  return s;
}

std::string format_region_load_table(const std::vector<PolicyResult>& results, const std::vector<std::string>& zones) {
  std::string s;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%-14s", "GPU-h (k)");
  s += buf;
  for (const auto& r : results) {
    std::snprintf(buf, sizeof buf, " %16s", label(r).c_str());
    s += buf;
  }
  s += "\n";
  for (const auto& z : zones) {
    std::snprintf(buf, sizeof buf, "%-14s", z.c_str());
    s += buf;
    for (const auto& r : results) {
      auto it = r.gpu_hours_by_region.find(z);
      std::snprintf(buf, sizeof buf, " %16.1f", it == r.gpu_hours_by_region.end() ? 0.0 : it->second / 1e3);
      s += buf;
    }
    s += "\n";
  }
  return s;
}

}  // namespace carbon
