#include "controller/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <unordered_map>

namespace controller {

namespace {

using Fn = std::function<bool(Job&)>;
using SteadyClock = std::chrono::steady_clock;

// Applies per-job changes in one store transaction.
void apply(Registry& reg, std::unordered_map<std::string, Fn>& changes,
           const std::vector<DecisionRecord>& decisions = {}) {
  if (changes.empty() && decisions.empty()) return;
  std::vector<std::string> ids;
  for (auto& [id, fn] : changes) ids.push_back(id);
  reg.update_many(ids, [&](Job& j) { return changes.at(j.id())(j); }, decisions);
  changes.clear();
}

void take_summary(Job& j, const nlohmann::json& s) {
  if (!s.is_object()) return;
  auto& p = j.progress;
  p.state = s.value("state", p.state);
  p.step = s.value("steps", p.step);
  p.tokens = s.value("tokens", p.tokens);
  p.val_loss = s.value("final_val_loss", p.val_loss);
  p.energy_joules = s.value("energy_joules", p.energy_joules);
  p.operational_grams = s.value("operational_grams", p.operational_grams);
  p.embodied_grams = s.value("embodied_grams", p.embodied_grams);
}

}  // namespace

Scheduler::Scheduler(Registry& registry, const Clock& clock, const Placer& placer,
                     std::vector<RegionConfig> regions, std::map<std::string, Executor*> executors,
                     Metrics* metrics, SchedulerOptions options)
    : registry_(registry), clock_(clock), placer_(placer), regions_(std::move(regions)),
      executors_(std::move(executors)), metrics_(metrics), opt_(std::move(options)) {
  last_regions_ = snapshot_regions(regions_, {}, clock_.now_ms(), 48, opt_.intensity);
}

Executor* Scheduler::executor_for(const std::string& region) const {
  auto it = executors_.find(region);
  return it == executors_.end() ? nullptr : it->second;
}

std::vector<RegionSnapshot> Scheduler::regions_now() const {
  std::lock_guard<std::mutex> l(mu_);
  return last_regions_;
}

int64_t Scheduler::backoff_ms(int n) const {
  int64_t b = opt_.backoff_base_ms;
  for (int i = 1; i < n && b < opt_.backoff_max_ms; ++i) b *= 2;
  return std::min(b, opt_.backoff_max_ms);
}

void Scheduler::recover() {
  std::lock_guard<std::mutex> cl(cycle_mu_);
  std::unordered_map<std::string, Fn> changes;
  const int64_t now = clock_.now_ms();
  for (const Job& j : registry_.live_jobs(0)) {
    if (j.state() != JobState::kStarting && j.state() != JobState::kRunning) continue;
    Executor* ex = j.placement ? executor_for(j.placement->region) : nullptr;
    if (ex && ex->adopt(j.id(), j.runtime, opt_.stop_grace)) continue;
    changes[j.id()] = [now](Job& job) {
      if (!job.transition(JobState::kRecovering, "ControllerRestarted",
                          "the controller restarted; the gang restarts from its newest checkpoint",
                          now))
        return false;
      job.next_attempt_ms = now;
      return true;
    };
  }
  apply(registry_, changes);
}

CycleReport Scheduler::cycle() {
  std::lock_guard<std::mutex> cl(cycle_mu_);
  CycleReport rep;
  rep.cycle = ++cycle_no_;
  auto t = SteadyClock::now();
  auto phase = [&](const char* name) {
    auto now = SteadyClock::now();
    double s = std::chrono::duration<double>(now - t).count();
    rep.phase_seconds.push_back({name, s});
    if (metrics_) metrics_->observe_phase(name, s);
    t = now;
  };

  // snapshot
  std::vector<Job> jobs = registry_.live_jobs(opt_.max_pending_per_cycle);
  std::map<std::string, int> used;
  for (const Job& j : jobs)
    if (is_active(j.state()) && j.placement) used[j.placement->region] += j.spec().nodes;
  std::vector<RegionSnapshot> regions = snapshot_regions(regions_, used, clock_.now_ms(), 48, opt_.intensity);
  if (metrics_)
    for (const auto& r : regions) metrics_->set_intensity(r.name, r.intensity_now);
  phase("snapshot");

  observe(jobs, rep);
  phase("observe");

  // order: Registry::live_jobs returns pending jobs by priority then age;
  // keep that order stable for the jobs after it.
  std::stable_partition(jobs.begin(), jobs.end(),
                        [](const Job& j) { return j.state() != JobState::kPending; });
  phase("order");

  place(jobs, regions, rep);
  phase("place");

  admit(jobs, regions, rep);
  phase("admit");

  drain();
  {
    std::lock_guard<std::mutex> l(mu_);
    last_regions_ = regions;
  }
  if (metrics_) {
    for (auto [s, n] : registry_.count_by_state()) metrics_->set_jobs(std::string(to_string(s)), n);
    metrics_->cycle_done();
  }
  phase("drain");
  return rep;
}

void Scheduler::observe(std::vector<Job>& jobs, CycleReport& rep) {
  const int64_t now = clock_.now_ms();
  std::unordered_map<std::string, Fn> changes;
  for (Job& j : jobs) {
    if (j.state() != JobState::kStarting && j.state() != JobState::kRunning) continue;
    Executor* ex = j.placement ? executor_for(j.placement->region) : nullptr;
    if (!ex) continue;
    GangStatus st = ex->poll(j.id());
    const bool suspending = j.runtime.value("suspending", false);
    switch (st.phase) {
      case GangPhase::kStarting:
        break;
      case GangPhase::kRunning: {
        if (j.state() == JobState::kStarting) {
          changes[j.id()] = [now, rt = st.runtime](Job& job) {
            job.runtime = rt;
            return job.transition(JobState::kRunning, "GangRunning", "every rank is running", now);
          };
        } else if (j.spec().interruptible && !suspending && j.placement &&
                   j.placement->windows.size() > 1) {
          // Is the current window over with a later one still to come?
          const auto& w = j.placement->windows;
          bool inside = false, later = false;
          for (auto [a, b] : w) {
            if (a <= now && now < b) inside = true;
            if (a > now) later = true;
          }
          if (!inside && later) {
            ex->stop(j.id(), opt_.stop_grace);
            changes[j.id()] = [](Job& job) {
              job.runtime["suspending"] = true;
              return true;
            };
          }
        }
        break;
      }
      case GangPhase::kSucceeded:
        rep.finished++;
        changes[j.id()] = [now, st](Job& job) {
          take_summary(job, st.summary);
          return job.transition(JobState::kSucceeded, "Completed", st.message, now);
        };
        break;
      case GangPhase::kPreempted:
        if (suspending) {
          rep.suspended++;
          changes[j.id()] = [now, st](Job& job) {
            take_summary(job, st.summary);
            job.runtime["suspending"] = false;
            return job.transition(JobState::kSuspended, "WindowClosed",
                                  "checkpointed at the end of its carbon window; resumes in the next",
                                  now);
          };
          break;
        }
        [[fallthrough]];
      case GangPhase::kFailed:
      case GangPhase::kUnknown:
      case GangPhase::kConfigError: {
        const bool config = st.phase == GangPhase::kConfigError;
        const bool give_up = config || j.recovery_count >= j.spec().max_restarts;
        if (give_up) {
          rep.finished++;
          changes[j.id()] = [now, st, config](Job& job) {
            take_summary(job, st.summary);
            job.failure_reason =
                config ? "the worker rejected its configuration (exit 2): " + st.message
                       : "gave up after " + std::to_string(job.recovery_count) +
                             " restarts: " + st.message;
            return job.transition(JobState::kFailed, config ? "WorkerConfigError" : "MaxRestartsExceeded",
                                  job.failure_reason, now);
          };
        } else {
          rep.recovering++;
          if (metrics_) metrics_->restart(ex->kind());
          const int64_t delay = backoff_ms(j.recovery_count + 1);
          changes[j.id()] = [now, st, delay](Job& job) {
            take_summary(job, st.summary);
            if (!job.transition(JobState::kRecovering, "GangFailed",
                                st.message + "; restarting from the newest checkpoint in " +
                                    std::to_string(delay) + " ms",
                                now))
              return false;
            job.recovery_count++;
            job.next_attempt_ms = now + delay;
            return true;
          };
        }
        break;
      }
    }
  }
  apply(registry_, changes);
  // Refresh our copies with what was persisted.
  for (Job& j : jobs)
    if (auto fresh = registry_.get(j.id())) j = *fresh;
}

void Scheduler::place(std::vector<Job>& jobs, std::vector<RegionSnapshot>& regions,
                      CycleReport& rep) {
  const int64_t now = clock_.now_ms();
  const int64_t cyc = cycle_no_.load();
  std::unordered_map<std::string, Fn> changes;
  std::vector<DecisionRecord> decisions;
  for (Job& j : jobs) {
    if (j.state() != JobState::kPending) continue;
    const JobSpec& s = j.spec();
    PlacementRequest req;
    req.job_id = j.id();
    req.allowed = s.regions;
    req.home_region = s.home_region;
    req.nodes = s.nodes;
    req.gpus_per_node = s.gpus_per_node;
    req.duration_s = s.duration_s;
    req.power_watts = s.power_watts;
    req.interruptible = s.interruptible;
    req.earliest_start_ms = now;
    if (s.deadline_ms > 0) req.latest_end_ms = s.deadline_ms;
    else if (s.max_delay_s >= 0)
      req.latest_end_ms = j.created_ms() + s.max_delay_s * 1000 + int64_t(s.duration_s * 1000);
    PlacementDecision d = placer_.place(req, regions, now);
    DecisionRecord rec{cyc, j.id(), now, "", d.region, d.policy, d.explanation};
    if (d.impossible) {
      rep.rejected++;
      rec.outcome = "rejected";
      rec.policy = placer_.name();
      decisions.push_back(rec);
      if (metrics_) metrics_->decision(placer_.name(), "rejected");
      changes[j.id()] = [now, d](Job& job) {
        job.failure_reason = d.explanation;
        return job.transition(JobState::kFailed, "Unplaceable", d.explanation, now);
      };
      continue;
    }
    if (d.wait_for_capacity) {
      rep.deferred++;
      // Record a deferral once, not every cycle.
      if (j.runtime.value("deferred", "") != d.explanation) {
        rec.outcome = "deferred";
        rec.policy = placer_.name();
        decisions.push_back(rec);
        if (metrics_) metrics_->decision(placer_.name(), "deferred");
        changes[j.id()] = [d](Job& job) {
          job.runtime["deferred"] = d.explanation;
          return true;
        };
      }
      continue;
    }
    rep.placed++;
    rec.outcome = "admitted";
    decisions.push_back(rec);
    if (metrics_) {
      metrics_->decision(d.policy, "admitted");
      metrics_->avoided_grams(d.run_now_home_grams - d.expected_grams);
    }
    PlacementView pv{d.region, d.policy, d.windows.front().first, d.windows, d.expected_grams,
                     d.run_now_home_grams, d.explanation, cyc};
    // Hold the nodes in this cycle's snapshot when it starts now, so the
    // next pending job sees them taken.
    if (pv.start_ms <= now)
      for (auto& r : regions)
        if (r.name == d.region) r.free_nodes -= s.nodes;
    changes[j.id()] = [now, pv](Job& job) {
      job.placement = pv;
      job.runtime.erase("deferred");
      return job.transition(JobState::kScheduled, "Placed", pv.explanation, now);
    };
  }
  apply(registry_, changes, decisions);
  for (Job& j : jobs)
    if (j.state() == JobState::kPending)
      if (auto fresh = registry_.get(j.id())) j = *fresh;
  // Give back the nodes we held: admit() takes them for real.
  for (const Job& j : jobs)
    if (j.state() == JobState::kScheduled && j.placement && j.placement->start_ms <= now &&
        j.placement->cycle == cyc)
      for (auto& r : regions)
        if (r.name == j.placement->region) r.free_nodes += j.spec().nodes;
}

bool Scheduler::start_gang(const Job& job, RegionSnapshot* region, CycleReport& rep) {
  const int64_t now = clock_.now_ms();
  Executor* ex = executor_for(job.placement->region);
  const JobState from = job.state();
  std::string reason = from == JobState::kScheduled   ? "WindowOpened"
                       : from == JobState::kSuspended ? "Resumed"
                                                      : "Restarting";
  auto started = registry_.update(job.id(), kAllTenants, [&](Job& j) {
    if (j.state() != from) return false;
    return j.transition(JobState::kStarting, reason,
                        "launching " + std::to_string(j.spec().nodes * j.spec().procs_per_node) +
                            " ranks in " + j.placement->region,
                        now);
  });
  if (!started || started->state() != JobState::kStarting) return false;
  if (from != JobState::kRecovering) region->free_nodes -= job.spec().nodes;
  if (from == JobState::kScheduled && metrics_)
    metrics_->observe_queue_wait(double(now - job.created_ms()) / 1000.0);
  GangSpec g;
  g.job_id = job.id();
  g.spec = job.spec();
  g.region = job.placement->region;
  g.attempt = job.recovery_count;
  g.status_url = opt_.status_url_base + "/v1/jobs/" + job.id() + "/status";
  g.status_token = job.worker_token;
  g.intensity = region->intensity_now;
  g.pue = region->pue;
  try {
    if (!ex) throw std::runtime_error("no executor for region " + job.placement->region);
    GangStatus st = ex->start(g);
    rep.started++;
    auto after = registry_.update(job.id(), kAllTenants, [&](Job& j) {
      j.runtime = st.runtime;
      return j.transition(JobState::kRunning, "GangRunning", "every rank is running",
                          clock_.now_ms());
    });
    if (!after || after->state() != JobState::kRunning) {
      // Cancelled while launching: take the gang down again.
      ex->stop(job.id(), opt_.stop_grace);
      std::lock_guard<std::mutex> l(mu_);
      draining_[job.id()] = ex;
    }
  } catch (const std::exception& e) {
    rep.recovering++;
    const std::string msg = std::string("launch failed: ") + e.what();
    const int64_t delay = backoff_ms(job.recovery_count + 1);
    registry_.update(job.id(), kAllTenants, [&](Job& j) {
      if (j.recovery_count >= j.spec().max_restarts) {
        j.failure_reason = msg;
        return j.transition(JobState::kFailed, "LaunchFailed", msg, now);
      }
      if (!j.transition(JobState::kRecovering, "LaunchFailed", msg, now)) return false;
      j.recovery_count++;
      j.next_attempt_ms = now + delay;
      return true;
    });
  }
  return true;
}

void Scheduler::admit(std::vector<Job>& jobs, std::vector<RegionSnapshot>& regions,
                      CycleReport& rep) {
  const int64_t now = clock_.now_ms();
  auto region_of = [&](const Job& j) -> RegionSnapshot* {
    for (auto& r : regions)
      if (j.placement && r.name == j.placement->region) return &r;
    return nullptr;
  };
  std::unordered_map<std::string, Fn> requeue;
  // Recovering and suspended jobs first: they already hold a place in line.
  for (int pass = 0; pass < 2; ++pass) {
    for (const Job& j : jobs) {
      bool due = false;
      if (pass == 0 && j.state() == JobState::kRecovering) due = j.next_attempt_ms <= now;
      if (pass == 0 && j.state() == JobState::kSuspended && j.placement)
        for (auto [a, b] : j.placement->windows) due = due || (a <= now && now < b);
      if (pass == 1 && j.state() == JobState::kScheduled && j.placement)
        due = j.placement->start_ms <= now;
      if (!due) continue;
      RegionSnapshot* r = region_of(j);
      if (!r) continue;
      // A RECOVERING gang keeps its nodes (it is active): no capacity check.
      const bool holds_nodes = j.state() == JobState::kRecovering;
      if (!holds_nodes && r->free_nodes < j.spec().nodes) {
        if (j.state() == JobState::kScheduled) {
          rep.requeued++;
          requeue[j.id()] = [now](Job& job) {
            return job.transition(JobState::kPending, "CapacityLost",
                                  "its region filled up before its window; placing it again", now);
          };
        }
        continue;
      }
      start_gang(j, r, rep);
    }
  }
  apply(registry_, requeue);
}

void Scheduler::drain() {
  std::map<std::string, Executor*> d;
  {
    std::lock_guard<std::mutex> l(mu_);
    d = draining_;
  }
  std::set<Executor*> all;
  for (auto& [region, ex] : executors_) all.insert(ex);
  for (Executor* ex : all) ex->tick();
  for (auto& [id, ex] : d)
    if (ex->gone(id)) {
      std::lock_guard<std::mutex> l(mu_);
      draining_.erase(id);
    }
}

void Scheduler::on_cancelled(const Job& job) {
  if (!job.placement) return;
  Executor* ex = executor_for(job.placement->region);
  if (!ex) return;
  ex->stop(job.id(), opt_.stop_grace);
  std::lock_guard<std::mutex> l(mu_);
  draining_[job.id()] = ex;
}

void Scheduler::run(std::chrono::milliseconds period) {
  for (;;) {
    {
      std::unique_lock<std::mutex> l(run_mu_);
      run_cv_.wait_for(l, period, [&] { return wake_ || stop_; });
      if (stop_) return;
      wake_ = false;
    }
    try {
      cycle();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "greenshard-controller: scheduler cycle %lld failed: %s\n",
                   static_cast<long long>(cycle_no_.load()), e.what());
    }
    // A burst of wake() calls (one per submission) runs one cycle, not one
    // each: cycles are at least min_gap apart.
    std::unique_lock<std::mutex> l(run_mu_);
    run_cv_.wait_for(l, std::min(period, opt_.min_cycle_gap), [&] { return stop_; });
    if (stop_) return;
  }
}

void Scheduler::wake() {
  std::lock_guard<std::mutex> l(run_mu_);
  wake_ = true;
  run_cv_.notify_all();
}

void Scheduler::stop() {
  std::lock_guard<std::mutex> l(run_mu_);
  stop_ = true;
  run_cv_.notify_all();
}

}  // namespace controller
