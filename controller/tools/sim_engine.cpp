#include "controller/tools/sim_engine.h"

#include <carbon/forecast.h>
#include <carbon/time_ms.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "controller/config/config_files.h"
#include "controller/config/intensity_sources.h"
#include "controller/executors/executor_sim.h"
#include "controller/store/registry.h"
#include "controller/scheduling/scheduler.h"
#include "controller/store/store.h"

namespace controller {

namespace {

using carbon::kHourMs;

carbon::SimPolicy sim_policy(carbon::Policy p) {
  switch (p) {
    case carbon::Policy::kRunNowHome: return carbon::SimPolicy::kFifo;
    case carbon::Policy::kTemporal: return carbon::SimPolicy::kTemporal;
    case carbon::Policy::kSpatial: return carbon::SimPolicy::kSpatial;
    case carbon::Policy::kSpatioTemporal: return carbon::SimPolicy::kSpatioTemporal;
  }
  return carbon::SimPolicy::kSpatioTemporal;
}

}  // namespace

std::vector<carbon::JobOutcome> replay_through_scheduler(const std::vector<carbon::Job>& trace,
                                                         const carbon::SimConfig& config,
                                                         const carbon::Catalog& catalog,
                                                         const ServiceSimOptions& options, ServiceSimStats* stats) {
  const auto wall0 = std::chrono::steady_clock::now();
  if (config.regions.empty()) throw std::runtime_error("service simulation: no regions");
  if (trace.empty()) return {};

  // Regions: a node is one server of the region's hardware.
  std::vector<RegionConfig> regions;
  std::map<std::string, const carbon::SimRegion*> by_zone;
  for (const auto& r : config.regions) {
    const int per = std::max(1, r.hardware.resources_per_server);
    if (r.capacity % per != 0)
      throw std::runtime_error("service simulation: region " + r.zone + ": capacity " + std::to_string(r.capacity) +
                               " is not whole servers of " + std::to_string(per));
    RegionConfig c;
    c.name = r.zone;
    c.pue = r.pue;
    c.nodes = r.capacity / per;
    c.gpus_per_node = per;
    c.executor = "sim";
    c.zone = catalog.resolve(r.zone);
    c.hardware = r.hardware.name;
    regions.push_back(std::move(c));
    by_zone[r.zone] = &r;
  }

  // Submission order, and the first cycle.
  std::vector<size_t> order(trace.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return trace[a].submit < trace[b].submit; });

  // The clock's step: the finest step among the regions' recorded series
  // (hourly on hourly data), as carbon::simulate's cycles.
  carbon::Seconds step = carbon::Hours{1};
  for (const auto& r : regions) step = std::min(step, catalog.series(r.zone).step());
  const int64_t step_ms = int64_t(step.count()) * carbon::kSecondMs;
  auto cycle_of = [&](carbon::Time submit) { return carbon::ms_of_time(carbon::ceil_to_step(submit, step)); };

  ManualClock clock(cycle_of(trace[order.front()].submit));
  Store store(options.store_path);
  Registry registry(store, clock);
  registry.load();
  SimExecutor executor(clock, SimExecutorOptions{double(trace.front().resume_overhead.count()), config.placement.elastic});
  std::map<std::string, Executor*> executors;
  for (const auto& r : regions) executors[r.name] = &executor;

  auto source = make_file_intensity_source(catalog, carbon::make_forecaster(options.forecaster, options.seed));
  SchedulerOptions so;
  so.intensity = source.get();
  so.placement = config.placement;
  so.placement.policy = options.policy;
  so.replan_period_ms = options.replan_period_ms;
  so.replan = config.replan;   // the library's re-plan rules (carbon/replan.h)
  so.learn_expected_load = config.learn_expected_load;
  so.load_learning_rate = config.load_learning_rate;
  so.max_pending_per_cycle = 100000;
  Scheduler sched(registry, clock, regions, executors, nullptr, so);

  std::vector<std::string> ids(trace.size());
  size_t next = 0, finished = 0;
  int64_t t = clock.now_ms();
  const int64_t give_up = cycle_of(trace[order.back()].submit) + 60 * 24 * kHourMs;
  int64_t cycles = 0, hours = 0;
  while (next < order.size() || finished < trace.size()) {
    if (t > give_up) {
      std::string states;
      for (auto [state, n] : registry.count_by_state())
        states += " " + std::string(to_string(state)) + "=" + std::to_string(n);
      for (const Job& j : registry.live_jobs()) {
        states += "\n  " + j.id() + " " + std::string(to_string(j.state())) + " windows:";
        if (j.placement)
          for (auto [a, b] : j.placement->windows)
            states += " [" + carbon::format_time(carbon::time_of_ms(a)) + ", " + carbon::format_time(carbon::time_of_ms(b)) + ")";
        for (const auto& c : j.conditions())
          states += "\n    " + carbon::format_time(carbon::time_of_ms(c.time_ms)) + " " + std::string(to_string(c.state)) + " " + c.reason + ": " + c.message;
      }
      throw std::runtime_error("service simulation: jobs still unfinished 60 days after the last submission:" + states);
    }
    // Submissions during the step before t, each at its own time.
    for (; next < order.size() && cycle_of(trace[order[next]].submit) <= t; ++next) {
      const carbon::Job& cj = trace[order[next]];
      const carbon::SimRegion& home = *by_zone.at(cj.home_region);
      const int per = std::max(1, home.hardware.resources_per_server);
      if (cj.gpus % per != 0)
        throw std::runtime_error("service simulation: job " + cj.id + ": " + std::to_string(cj.gpus) +
                                 " GPUs are not whole servers of " + std::to_string(per));
      JobSpec s;
      s.name = "sim";
      s.nodes = cj.gpus / per;
      s.gpus_per_node = per;
      s.procs_per_node = 1;
      s.regions = cj.allowed_regions;
      if (s.regions.empty())
        for (const auto& r : config.regions) s.regions.push_back(r.zone);
      s.home_region = cj.home_region;
      if (cj.deadline != carbon::Time::max()) s.deadline_ms = carbon::ms_of_time(cj.deadline);
      s.interruptible = cj.interruptible;
      s.max_restarts = 0;
      s.duration_s = double(cj.duration.count());
      s.power_watts = home.hardware.power_w(per, cj.utilization);
      if (cj.elastic()) {
        // Widths in nodes (whole servers), as for gpus.
        auto nodes_of = [&](int gpus, const char* what) {
          if (gpus % per != 0)
            throw std::runtime_error("service simulation: job " + cj.id + ": " + what + " " + std::to_string(gpus) +
                                     " GPUs are not whole servers of " + std::to_string(per));
          return gpus / per;
        };
        s.min_nodes = nodes_of(cj.min_width(), "min width");
        s.max_nodes = nodes_of(cj.max_width(), "max width");
        s.migratable = cj.migratable;
        for (const auto& p : cj.scaling) s.scaling.push_back({nodes_of(p.gpus, "scaling point"), p.speed});
        // The same checkpoint (and so the same transfer time) as the library
        // plans with: its default is per GPU, the service's would be per node.
        s.checkpoint_gb = carbon::checkpoint_gb(cj, config.placement.elastic);
      }
      clock.set_ms(std::max(clock.now_ms(), carbon::ms_of_time(cj.submit)));
      ids[order[next]] = registry.submit("sim", std::move(s), "").job.id();
    }
    clock.set_ms(t);
    sched.cycle();
    ++cycles;
    finished = next - size_t(registry.live_count());
    if (carbon::floor_mod(t, kHourMs) == 0 && ++hours % (24 * 7) == 0 && options.progress)
      std::fprintf(stderr, "service simulation: %s, %zu/%zu submitted, %zu finished\n",
                   carbon::format_time(carbon::time_of_ms(t)).c_str(), next, trace.size(), finished);
    t += step_ms;
  }

  std::vector<carbon::JobOutcome> out(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    auto job = registry.get(ids[i]);
    if (!job || job->state() != JobState::kSucceeded)
      throw std::runtime_error("service simulation: job " + trace[i].id + " ended " +
                               (job ? std::string(to_string(job->state())) + ": " + job->failure_reason : "missing"));
    carbon::JobOutcome& o = out[i];
    o.job_id = trace[i].id;
    o.region = job->placement->region;
    // An elastic or migratable job's windows carry their region and width
    // (GPUs); the others' are the decision's region at the job's GPUs.
    const int per = std::max(1, by_zone.at(trace[i].home_region)->hardware.resources_per_server);
    for (const SimRun& r : executor.runs(ids[i])) {
      // A run ends when its work is done: rounded up to the second, as the
      // library's plan rounds its last window.
      if (trace[i].elastic()) o.windows.push_back({carbon::time_of_ms(r.start_ms), carbon::time_of_ms(r.end_ms + 999), r.region, r.nodes * per});
      else o.windows.push_back({carbon::time_of_ms(r.start_ms), carbon::time_of_ms(r.end_ms)});
    }
    o.expected_grams = job->placement->expected_grams;
    o.fallback = job->placement->policy != carbon::policy_name(options.policy);
  }
  if (stats) {
    stats->cycles = cycles;
    stats->hours = hours;
    stats->store_commits = store.commits();
    stats->wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  }
  return out;
}

carbon::PolicyResult simulate_service(const std::vector<carbon::Job>& trace, const carbon::SimConfig& config,
                                      const carbon::Catalog& catalog, const ServiceSimOptions& options,
                                      ServiceSimStats* stats) {
  auto outcomes = replay_through_scheduler(trace, config, catalog, options, stats);
  return carbon::score_placements(trace, config, sim_policy(options.policy), options.forecaster, "service",
                                  std::move(outcomes));
}

}  // namespace controller
