#include "controller/scheduling/scheduler.h"

#include <carbon/error.h>
#include <carbon/hardware.h>
#include <carbon/job.h>
#include <carbon/replan.h>
#include <carbon/scheduling_pass.h>
#include <carbon/time_ms.h>

#include "controller/core/decision_outcome.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <unordered_map>

namespace controller {

namespace {

using Fn = std::function<bool(Job&)>;
using SteadyClock = std::chrono::steady_clock;

using carbon::floor_hour_ms;
using carbon::kHourMs;

// Applies per-job changes in one store transaction; returns the ids of the
// jobs that changed.
std::set<std::string> apply(Registry& reg, std::unordered_map<std::string, Fn>& changes,
                            const std::vector<DecisionRecord>& decisions = {}) {
  if (changes.empty() && decisions.empty()) return {};
  std::vector<std::string> ids;
  for (auto& [id, fn] : changes) ids.push_back(id);
  auto changed = reg.update_many(ids, [&](Job& j) { return changes.at(j.id())(j); }, decisions);
  changes.clear();
  return {changed.begin(), changed.end()};
}

// apply(), then our copies of the jobs that changed are refreshed with what
// was persisted.
void apply_and_refresh(Registry& reg, std::unordered_map<std::string, Fn>& changes,
                       const std::vector<DecisionRecord>& decisions, std::vector<Job>& jobs) {
  const std::set<std::string> changed = apply(reg, changes, decisions);
  for (Job& j : jobs)
    if (changed.count(j.id()))
      if (auto fresh = reg.get(j.id())) j = *fresh;
}

// Nodes held by active gangs, per region.
std::map<std::string, int> used_nodes(const std::vector<Job>& jobs) {
  std::map<std::string, int> used;
  for (const Job& j : jobs)
    if (is_active(j.state()) && j.placement) used[gang_region(j)] += gang_nodes(j);
  return used;
}

// The worker's run summary into the job's progress. A field the summary
// left out (e.g. final_val_loss of a job that never evaluated) leaves the
// value as it was.
void take_summary(Job& j, const std::optional<greenshard::RunSummary>& s) {
  if (!s) return;
  auto& p = j.progress;
  auto take = [](const auto& from, auto& out) {
    if (from) out = static_cast<std::decay_t<decltype(out)>>(*from);
  };
  p.state = greenshard::phase_of(s->state);
  p.reported = true;
  take(s->steps, p.step);
  take(s->tokens, p.tokens);
  take(s->final_val_loss, p.val_loss);
  take(s->energy_joules, p.energy_joules);
  take(s->operational_grams, p.operational_grams);
  take(s->embodied_grams, p.embodied_grams);
}

// The window the job's gang runs (or ran) for: Job::gang.window, else (a
// document from before elastic jobs, or a plan made since) the last window
// opened by now; 0 when none has.
size_t gang_window(const Job& j, int64_t now) {
  const auto& w = j.placement->windows;
  if (j.gang.window >= 0 && size_t(j.gang.window) < w.size()) return size_t(j.gang.window);
  size_t k = 0;
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i].first <= now) k = i;
  return k;
}

std::string nodes_str(int n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

// "resized from 2 nodes to 1 node in DE", "moved from DE to FR (2 nodes ->
// 1 node)": what launching `to` changes after a gang at `from`.
std::string change_words(const WindowPlace& from, const WindowPlace& to) {
  if (from.region != to.region)
    return "moved from " + from.region + " to " + to.region +
           (from.nodes != to.nodes ? " (" + nodes_str(from.nodes) + " -> " + nodes_str(to.nodes) + ")"
                                   : " on " + nodes_str(to.nodes));
  return "resized from " + nodes_str(from.nodes) + " to " + nodes_str(to.nodes) + " in " + to.region;
}

// The planned change that starts window k (nullptr when none was planned,
// e.g. a hand-made or pre-elastic plan).
const PlannedChange* planned_change(const Job& j, size_t k) {
  for (const auto& c : j.placement->changes)
    if (c.at_ms == j.placement->windows[k].first) return &c;
  return nullptr;
}

// The scaling curve placement plans an elastic job with (speeds relative
// to one another, carbon::Job::scaling): the declared one, else the one its
// gangs measured (when valid: throughput never falling as the width grows),
// else none (linear).
std::vector<carbon::ScalingPoint> scaling_curve(const Job& j, Store& store) {
  std::vector<carbon::ScalingPoint> curve;
  for (const auto& p : j.spec().scaling) curve.push_back({p.nodes, p.tokens_per_second});
  if (!curve.empty()) return curve;
  for (const auto& m : store.measured_scaling(j.id())) curve.push_back({m.nodes, m.tokens_per_second});
  if (!carbon::scaling_problem(curve).empty()) curve.clear();
  return curve;
}

// carbon/'s view of a job for placement and re-planning: its identity,
// size, times and regions (every region of its spec; the pass narrows them
// to those in quota). A job without a deadline or max_delay gets now +
// duration (no time slack: the cleanest region now); *has_deadline tells.
carbon::Job carbon_job(const Job& j, carbon::Time tnow, bool* has_deadline) {
  const JobSpec& s = j.spec();
  carbon::Job c;
  c.id = j.id();
  c.seq = j.seq;  // ties in a pass: submission order
  c.gpus = s.nodes;
  c.duration = carbon::Seconds{std::max<int64_t>(1, std::llround(s.duration_s))};
  c.submit = carbon::time_of_ms(j.created_ms());
  c.home_region = s.home_region;
  c.allowed_regions = s.regions;
  c.interruptible = s.interruptible;
  bool deadline = true;
  if (s.deadline_ms > 0) c.deadline = carbon::time_of_ms(s.deadline_ms);
  else if (s.max_delay_s >= 0) c.deadline = carbon::deadline_from_max_delay(c, carbon::Seconds{s.max_delay_s});
  else {
    c.deadline = tnow + c.duration;
    deadline = false;
  }
  if (has_deadline) *has_deadline = deadline;
  return c;
}

// A placed job's plan as carbon/ holds it (its windows' regions and widths).
carbon::Decision plan_of(const Job& j) {
  carbon::Decision d;
  d.job_id = j.id();
  d.feasible = true;
  d.region = j.placement->region;
  for (size_t w = 0; w < j.placement->windows.size(); ++w) {
    const auto [a, b] = j.placement->windows[w];
    const WindowPlace at = window_place(j, w);
    d.windows.push_back({carbon::time_of_ms(a), carbon::time_of_ms(b), at.region, at.nodes});
  }
  d.start = d.windows.front().start;
  d.end = d.windows.back().end;
  d.expected_grams = j.placement->expected_grams;
  d.run_now_home_grams = j.placement->run_now_home_grams;
  d.explanation = j.placement->explanation;
  return d;
}

// What a placed job's windows not yet over reserve against its tenant's
// quota: region -> the most nodes of any of its windows there.
std::map<std::string, int> reserved_nodes(const Job& j, int64_t now) {
  std::map<std::string, int> held;
  if (!holds_reservation(j.state()) || !j.placement) return held;
  for (size_t w = 0; w < j.placement->windows.size(); ++w) {
    if (j.placement->windows[w].second <= now) continue;
    const WindowPlace at = window_place(j, w);
    held[at.region] = std::max(held[at.region], at.nodes);
  }
  return held;
}

std::string grams_str(double g) {
  char b[48];
  std::snprintf(b, sizeof b, "%.1f g", g);
  return b;
}

}  // namespace

Scheduler::Scheduler(Registry& registry, const Clock& clock, std::vector<RegionConfig> regions,
                     std::map<std::string, Executor*> executors, Metrics* metrics, SchedulerOptions options)
    : registry_(registry), clock_(clock), regions_(std::move(regions)), executors_(std::move(executors)),
      metrics_(metrics), opt_(std::move(options)), expected_load_(opt_.load_learning_rate) {
  const int64_t now = clock_.now_ms();
  last_regions_ = snapshot_regions(regions_, {}, now, horizon_h(), opt_.intensity);
  // Capacity pricing learns from the store's own history: every hour before
  // this one, in order; this hour's sample may still change.
  for (const LoadSample& x : registry_.store().load_history()) {
    if (x.hour_ms < floor_hour_ms(now))
      expected_load_.observe(carbon::time_of_ms(x.hour_ms), x.capacity_nodes > 0 ? x.busy_nodes / x.capacity_nodes : 0.0);
    else if (x.hour_ms == floor_hour_ms(now)) {
      load_hour_ms_ = x.hour_ms;
      load_now_ = x;
    }
  }
}

std::string describe_placement_settings(const SchedulerOptions& o) {
  const carbon::PlacementOptions& p = o.placement;
  char buf[320];
  const bool priced = o.learn_expected_load && p.capacity_price_weight > 0;
  std::snprintf(buf, sizeof buf,
                "look-ahead %lld h, re-plan every %lld s (%s, forecast threshold %g), capacity price %g (load spread "
                "%g, learned at rate %g)%s, at most %d windows, prefer earlier within %g",
                static_cast<long long>(p.max_lookahead.count()), static_cast<long long>(o.replan_period_ms / 1000),
                o.replan.incremental ? "incremental" : "full", o.replan.forecast_threshold,
                priced ? p.capacity_price_weight : 0.0, p.capacity_price_load_spread, o.load_learning_rate,
                priced ? "" : " off", p.max_windows, p.prefer_earlier_within);
  return buf;
}

int Scheduler::horizon_h() const { return int(std::max<int64_t>(1, opt_.placement.max_lookahead.count())); }

void Scheduler::learn_load(int64_t now_ms) {
  const int64_t h = floor_hour_ms(now_ms);
  if (load_hour_ms_ != INT64_MIN && load_hour_ms_ < h) {
    // The hour is over: its last recorded sample is final.
    expected_load_.observe(carbon::time_of_ms(load_hour_ms_),
                           load_now_.capacity_nodes > 0 ? load_now_.busy_nodes / load_now_.capacity_nodes : 0.0);
    load_hour_ms_ = INT64_MIN;
  }
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
    Executor* ex = j.placement ? executor_for(gang_region(j)) : nullptr;
    if (ex && ex->adopt(j.id(), j.runtime, AdoptOptions{opt_.stop_grace, j.stop.requested()})) continue;
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
  std::vector<RegionSnapshot> regions =
      snapshot_regions(regions_, used_nodes(jobs), clock_.now_ms(), horizon_h(), opt_.intensity);
  if (metrics_)
    for (const auto& r : regions) metrics_->set_intensity(r.name, r.intensity_now);
  phase("snapshot");

  observe(jobs, rep);
  // Gangs that ended (or were suspended) in observe free their nodes now.
  set_free_nodes(regions, used_nodes(jobs));
  phase("observe");

  // order: pending jobs by priority, then age (Registry::live_jobs returns
  // them so; a job observe() just requeued joins them in its place).
  auto pending = std::stable_partition(jobs.begin(), jobs.end(),
                                       [](const Job& j) { return j.state() != JobState::kPending; });
  std::stable_sort(pending, jobs.end(), [](const Job& a, const Job& b) {
    return a.spec().priority != b.spec().priority ? a.spec().priority > b.spec().priority : a.seq < b.seq;
  });
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
    Executor* ex = j.placement ? executor_for(gang_region(j)) : nullptr;
    if (!ex) continue;
    GangStatus st = ex->poll(j.id());
    const bool suspending = j.stop.requested();
    switch (st.phase) {
      case GangPhase::kStarting:
        break;
      case GangPhase::kRunning: {
        if (j.state() == JobState::kStarting) {
          changes[j.id()] = [now, rt = st.runtime](Job& job) {
            job.runtime = rt;
            return job.transition(JobState::kRunning, "GangRunning", "every rank is running", now);
          };
        } else if (!suspending && j.placement && j.placement->windows.size() > 1) {
          // Interruptible, elastic and migratable jobs: is the gang's window
          // over with a later one still to come? Then it checkpoints and
          // stops; the next window starts (with its own region and width)
          // only once this gang is down (SUSPENDED).
          const auto& w = j.placement->windows;
          const size_t k = gang_window(j, now);
          if (now < w[k].second || k + 1 >= w.size()) break;
          const WindowPlace here{gang_region(j), gang_nodes(j)};
          if (w[k + 1].first <= now && window_place(j, k + 1) == here) {
            // The next window is open and runs where and as wide as this
            // one: carry on without a restart.
            changes[j.id()] = [k](Job& job) {
              job.gang.window = int(k) + 1;
              return true;
            };
            break;
          }
          const WindowPlace next = window_place(j, k + 1);
          const std::string msg =
              next == here ? std::string("checkpointed at the end of its carbon window; resumes in the next")
                           : "checkpointed at the end of its window; the next one " +
                                 (next.region != here.region
                                      ? "runs in " + next.region + " on " + nodes_str(next.nodes)
                                      : "runs on " + nodes_str(next.nodes)) +
                                 ", from this checkpoint";
          ex->stop(j.id(), opt_.stop_grace);
          GangStatus after = ex->poll(j.id());
          if (after.phase == GangPhase::kPreempted) {
            // Already down (checkpointed): suspended in this very cycle.
            rep.suspended++;
            changes[j.id()] = [now, after, msg](Job& job) {
              take_summary(job, after.summary);
              job.stop = {};
              return job.transition(JobState::kSuspended, "WindowClosed", msg, now);
            };
          } else {
            changes[j.id()] = [msg](Job& job) {
              job.stop = {StopIntent::kWindowEnd, msg, ""};
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
        if (j.stop.intent == StopIntent::kPreempted) {
          // Stopped for a higher-priority job: back in line, to resume from
          // the checkpoint it just wrote once placed again.
          rep.requeued++;
          changes[j.id()] = [now, st](Job& job) {
            take_summary(job, st.summary);
            const std::string msg = job.stop.message.empty() ? std::string("preempted") : job.stop.message;
            job.stop = {};
            return job.transition(JobState::kPending, "Preempted", msg, now);
          };
          break;
        }
        if (suspending) {
          rep.suspended++;
          changes[j.id()] = [now, st](Job& job) {
            take_summary(job, st.summary);
            const std::string msg = job.stop.message.empty()
                                        ? std::string("checkpointed at the end of its carbon window; resumes in the next")
                                        : job.stop.message;
            job.stop = {};
            return job.transition(JobState::kSuspended, "WindowClosed", msg, now);
          };
          break;
        }
        // Preempted by the cluster (eviction, Kueue), not by us: the gang
        // checkpointed and exited 0. It restarts from that checkpoint after
        // the first backoff, without using up a restart: nothing failed.
        rep.recovering++;
        changes[j.id()] = [now, st, delay = backoff_ms(1)](Job& job) {
          take_summary(job, st.summary);
          if (!job.transition(JobState::kRecovering, "Preempted",
                              "preempted by the cluster after a checkpoint; restarting from it in " +
                                  std::to_string(delay) + " ms (no restart used)",
                              now))
            return false;
          job.next_attempt_ms = now + delay;
          return true;
        };
        break;
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
  apply_and_refresh(registry_, changes, {}, jobs);
}

void Scheduler::place(std::vector<Job>& jobs, std::vector<RegionSnapshot>& regions,
                      CycleReport& rep) {
  const int64_t now = clock_.now_ms();
  const int64_t hour = floor_hour_ms(now);
  const int64_t cyc = cycle_no_.load();
  const carbon::Time tnow = carbon::time_of_ms(now);
  const std::string policy = carbon::policy_name(opt_.placement.policy);
  std::unordered_map<std::string, Fn> changes;
  std::vector<DecisionRecord> decisions;
  learn_load(now);
  // A PENDING job that waits: counted every cycle, recorded once per reason.
  auto defer = [&](const Job& j, DecisionRecord rec, const std::string& why) {
    rep.deferred++;
    if (j.waiting_reason == why) return;
    rec.outcome = DecisionOutcome::kDeferred;
    rec.explanation = why;
    decisions.push_back(rec);
    if (metrics_) metrics_->decision(policy, rec.outcome);
    changes[j.id()] = [why](Job& job) {
      job.waiting_reason = why;
      return true;
    };
  };

  // 1. What to plan: every PENDING job; when a re-plan is due, the SCHEDULED
  //    jobs whose first window has not opened ("held") whose inputs changed
  //    since their plan (carbon/replan.h, step 4) -- every held job when
  //    opt_.replan.incremental is off, or after a restart (no basis). A held
  //    job placed again has its reservation released from the ledger, its
  //    old plan kept as a fallback; every other held job keeps its
  //    reservation and is not passed to placement.
  // Re-plans fall on multiples of the period since the epoch (every 6 h:
  // 00:00, 06:00, ... UTC), as carbon::simulate's replan_every does.
  auto period_of = [&](int64_t t) { return t / opt_.replan_period_ms - (t % opt_.replan_period_ms < 0); };
  const bool replan = opt_.replan_period_ms > 0 &&
                      (last_replan_ms_ == INT64_MIN || period_of(now) > period_of(last_replan_ms_));
  if (replan) last_replan_ms_ = now;
  // Held plans also matter outside re-plans when a higher-priority job may
  // release those in its way (step 6: incremental re-planning only).
  const bool arrivals_release = opt_.replan_period_ms > 0 && opt_.replan.incremental;
  std::vector<Job*> pending_jobs, held_jobs;
  for (Job& j : jobs) {
    if (j.state() == JobState::kPending) pending_jobs.push_back(&j);
    else if ((replan || arrivals_release) && j.state() == JobState::kScheduled && j.placement &&
             j.placement->start_ms > now)
      held_jobs.push_back(&j);
  }
  // The bases of plans no longer held are forgotten (every SCHEDULED job
  // is among `jobs`).
  if (!basis_.empty()) {
    std::set<std::string> scheduled;
    for (const Job& j : jobs)
      if (j.state() == JobState::kScheduled) scheduled.insert(j.id());
    for (auto it = basis_.begin(); it != basis_.end();) it = scheduled.count(it->first) ? std::next(it) : basis_.erase(it);
  }

  // 2. The ledger: reservations in the store, and every active gang holds
  //    its nodes this hour even past its windows. The held jobs'
  //    reservations are noted: a re-plan that places one again releases it.
  std::map<std::string, const RegionSnapshot*> snap;
  for (const auto& r : regions) snap[r.name] = &r;
  carbon::CapacityLedger ledger;
  std::set<std::string> held_ids;
  for (const Job* j : held_jobs) held_ids.insert(j->id());
  std::unordered_map<std::string, std::vector<Reservation>> held_reservations;
  std::map<std::string, std::string> holding_now;  // job id -> region, reserved this hour
  for (const Reservation& v : registry_.reservations()) {
    if (!snap.count(v.region) || v.end_ms <= hour) continue;
    ledger.reserve(v.region, carbon::time_of_ms(std::max(v.start_ms, hour)), carbon::time_of_ms(v.end_ms), v.nodes);
    if (held_ids.count(v.job_id)) held_reservations[v.job_id].push_back(v);
    if (v.start_ms < hour + kHourMs) holding_now[v.job_id] = v.region;
  }
  for (const Job& j : jobs)
    if (is_active(j.state()) && j.placement && snap.count(gang_region(j)) && !holding_now.count(j.id()))
      ledger.reserve(gang_region(j), carbon::time_of_ms(hour), carbon::time_of_ms(hour + kHourMs), gang_nodes(j));
  std::set<std::string> released;
  auto release = [&](const std::string& id) {
    released.insert(id);
    for (const Reservation& v : held_reservations[id])
      ledger.reserve(v.region, carbon::time_of_ms(std::max(v.start_ms, hour)), carbon::time_of_ms(v.end_ms), -v.nodes);
  };

  // 3. carbon/'s regions: those with an intensity now. A node is one
  //    resource; its power is each job's own estimate (as utilization of
  //    the largest estimate among the jobs to plan and the held ones, so
  //    that a re-plan sees the same regions whichever it places), embodied
  //    grams the region's hardware profile per server = node.
  double p_ref = 1;
  for (const auto* list : {&pending_jobs, &held_jobs})
    for (const Job* j : *list) p_ref = std::max(p_ref, j->spec().power_watts);
  std::vector<carbon::Region> cregions;
  if (!pending_jobs.empty() || !held_jobs.empty()) {
    for (const auto& s : regions) {
      if (!std::isfinite(s.intensity_now) || s.forecast.empty()) continue;
      carbon::Region r;
      r.name = s.name;
      r.capacity = s.capacity_nodes;
      r.pue = s.pue;
      r.hardware.name = s.hardware.empty() ? "job-estimate" : s.hardware;
      r.hardware.resource = "node";
      r.hardware.resources_per_server = 1;
      r.hardware.resource_tdp_w = p_ref;
      r.hardware.lifetime_years = 1;
      if (!s.hardware.empty()) {
        const carbon::HardwareProfile& hw = carbon::hardware_profile(s.hardware);
        r.hardware.embodied_kg_per_server = hw.embodied_kg_per_server;
        r.hardware.lifetime_years = hw.lifetime_years;
      }
      // Values at the snapshot's step (forecast_step_ms: hourly, or the
      // sub-hourly step the source serves; placement plans in slots of the
      // finest step among the regions) from the step of now through the
      // hour horizon_h() after this one; a gap repeats the value before it.
      const int64_t step = forecast_step_ms(s);
      const int64_t first = carbon::floor_div(now, step) * step;  // = hour on hourly points
      std::vector<double> values;
      double last = s.intensity_now;
      size_t k = 0;
      for (int64_t t = first; t < hour + int64_t(horizon_h() + 1) * kHourMs; t += step) {
        while (k < s.forecast.size() && s.forecast[k].time_ms <= t) last = s.forecast[k++].gco2_per_kwh;
        if (k == s.forecast.size() && t > s.forecast.back().time_ms) break;
        values.push_back(last);
      }
      r.forecast = carbon::IntensitySeries(s.name, carbon::time_of_ms(first), carbon::Seconds{step / carbon::kSecondMs},
                                           std::move(values));
      cregions.push_back(std::move(r));
    }
  }
  std::set<std::string> usable;
  for (const auto& r : cregions) usable.insert(r.name);
  carbon::PlacementOptions popt = opt_.placement;
  popt.expected_load_by_hour_of_week.clear();
  if (opt_.learn_expected_load && popt.policy == carbon::Policy::kSpatioTemporal)
    popt.expected_load_by_hour_of_week = expected_load_.by_hour_of_week();

  // 4. Which held jobs are placed again (carbon::select_replans: a forecast
  //    revised, capacity freed or lost, no basis; or all of them). The
  //    others stay as they are ("untouched"); a higher-priority job left
  //    without a plan may still release those in its way (step 6), in any
  //    cycle. carbon/'s view of a held job is built when first needed.
  std::vector<carbon::Job> held_cjobs(held_jobs.size());
  std::vector<carbon::Decision> held_plans(held_jobs.size());
  std::vector<char> converted(held_jobs.size(), 0);
  auto held_plan = [&](size_t k) {
    if (!converted[k]) {
      held_cjobs[k] = carbon_job(*held_jobs[k], tnow, nullptr);
      held_plans[k] = plan_of(*held_jobs[k]);
      converted[k] = 1;
    }
    auto b = basis_.find(held_jobs[k]->id());
    return carbon::HeldPlan{&held_cjobs[k], &held_plans[k], b == basis_.end() ? nullptr : b->second.get(),
                            held_jobs[k]->spec().priority};
  };
  std::vector<size_t> untouched;   // indices into held_jobs
  if (replan && !held_jobs.empty()) {
    std::vector<carbon::HeldPlan> held;
    for (size_t k = 0; k < held_jobs.size(); ++k) held.push_back(held_plan(k));
    const auto why = carbon::select_replans(held, cregions, ledger, tnow, popt, opt_.replan);
    for (size_t k = 0; k < held_jobs.size(); ++k) {
      rep.replan[held_jobs[k]->id()] = why[k];
      if (why[k] != carbon::ReplanReason::kUnchanged) release(held_jobs[k]->id());
      else untouched.push_back(k);
    }
  } else {
    for (size_t k = 0; k < held_jobs.size(); ++k) untouched.push_back(k);
  }
  if (!arrivals_release) untouched.clear();

  // Quotas: what each tenant holds or has reserved before this pass. Jobs
  // admitted to the pass below add theirs as they go (highest priority
  // first), in every region they may be placed in: a pass never places a
  // tenant past its quota.
  QuotaLedger quota = quota_usage(jobs, released);
  if (metrics_)
    for (const auto& row : quota.rows())
      metrics_->set_tenant_quota(row.tenant, row.region, row.quota_nodes, row.quota_gpus, row.used_nodes,
                                 row.used_gpus);
  std::vector<Waiting> waiting;
  std::map<std::string, int> quota_waiting;
  for (const auto& [t, _] : opt_.quotas.tenants) quota_waiting[t] = 0;

  std::vector<Job*> todo;
  for (Job& j : jobs)
    if (j.state() == JobState::kPending || released.count(j.id())) todo.push_back(&j);
  // Decisions the plans' basis must not count (a job without a deadline
  // whose plan starts later waits instead: its reservation is not stored).
  std::vector<std::pair<const carbon::Decision*, int>> not_stored;   // (decision, its width)
  std::vector<const Job*> now_planned;   // SCHEDULED by this pass (placed or kept)

  if (!todo.empty()) {
    // 5. carbon/'s jobs. Ties in earliest-deadline order go to the older
    //    job: the id carbon/ sees is the submission sequence number.
    std::vector<carbon::Job> cjobs;
    std::vector<std::optional<carbon::Decision>> previous;
    std::vector<Job*> placed_jobs;
    std::vector<bool> has_deadline;
    // Admits one job to the pass (false: it waits, is rejected, or has no
    // region now).
    auto admit_to_pass = [&](Job& j) {
      const JobSpec& s = j.spec();
      std::vector<std::string> ever, now_ok;
      std::string why_not;
      for (const auto& name : s.regions) {
        auto it = snap.find(name);
        if (it == snap.end()) continue;
        const RegionSnapshot& r = *it->second;
        // An elastic job fits a region that holds its narrowest width.
        if (r.capacity_nodes < s.min_width() || r.gpus_per_node < s.gpus_per_node) {
          why_not += "; " + name + ": has " + std::to_string(r.capacity_nodes) + " nodes x " +
                     std::to_string(r.gpus_per_node) + " GPUs";
          continue;
        }
        ever.push_back(name);
        if (usable.count(name)) now_ok.push_back(name);
        else why_not += "; " + name + ": no intensity data now";
      }
      DecisionRecord rec{cyc, j.id(), now, DecisionOutcome::kRejected, "", policy, ""};
      if (ever.empty()) {
        rep.rejected++;
        rec.outcome = DecisionOutcome::kRejected;
        rec.explanation = "no allowed region can ever hold " + std::to_string(s.min_width()) + " nodes x " +
                          std::to_string(s.gpus_per_node) + " GPUs" + why_not;
        decisions.push_back(rec);
        if (metrics_) metrics_->decision(policy, rec.outcome);
        changes[j.id()] = [now, msg = rec.explanation](Job& job) {
          job.failure_reason = msg;
          return job.transition(JobState::kFailed, "Unplaceable", msg, now);
        };
        return false;
      }
      if (now_ok.empty()) {
        if (j.state() == JobState::kPending) defer(j, rec, "waiting for intensity data" + why_not);
        return false;
      }
      // Quota: only the regions where the tenant has room for the job's
      // narrowest width; an elastic job grows no wider than that room.
      const int need = s.min_width();
      std::vector<std::string> in_quota;
      std::string over;
      int widest = 0;
      for (const auto& name : now_ok) {
        const int room = quota.room(j.tenant(), name);
        if (room >= need) {
          in_quota.push_back(name);
          widest = std::max(widest, std::min(room, s.max_width()));
        } else {
          over += "; " + quota.explain(j.tenant(), name, need);
        }
      }
      if (in_quota.empty()) {
        if (j.state() == JobState::kPending) {
          rep.quota_waiting++;
          quota_waiting[j.tenant()]++;
          waiting.push_back({&j, now_ok, need, true});
          defer(j, rec, "QuotaExceeded: " + over.substr(2));
        }
        return false;
      }
      for (const auto& name : in_quota) quota.add(j.tenant(), name, s.elastic() ? widest : s.nodes);
      bool deadline = true;
      carbon::Job c = carbon_job(j, tnow, &deadline);
      c.allowed_regions = in_quota;
      c.utilization = s.power_watts / p_ref;
      if (s.elastic()) {
        c.min_gpus = s.min_width();
        c.max_gpus = widest;
        c.migratable = s.migratable;
        c.checkpoint_gb = s.checkpoint_gb;
        c.scaling = scaling_curve(j, registry_.store());
      }
      std::optional<carbon::Decision> prev;
      if (j.state() == JobState::kScheduled && j.placement) prev = plan_of(j);
      cjobs.push_back(std::move(c));
      previous.push_back(std::move(prev));
      placed_jobs.push_back(&j);
      has_deadline.push_back(deadline);
      return true;
    };
    for (Job* jp : todo) admit_to_pass(*jp);

    // 6. One pass per priority, highest first, over the same ledger:
    //    placement, kept plans, fallback (carbon/scheduling_pass.h); within
    //    a priority, earliest deadline first. A PENDING job this pass leaves
    //    unplaced, or placed only by the fallback, while held plans of lower
    //    priority that a re-plan left untouched reserve capacity in its way
    //    (carbon::in_the_way): those are released and join their own
    //    priority's pass, and this priority's pass runs again on the ledger
    //    as it was before it.
    std::vector<carbon::PassResult> results(cjobs.size());
    std::map<int, std::vector<size_t>, std::greater<int>> tiers;
    for (size_t i = 0; i < placed_jobs.size(); ++i) tiers[placed_jobs[i]->spec().priority].push_back(i);
    for (const auto& [prio, idx] : tiers) {
      auto run_pass = [&, &idx = idx] {
        std::vector<carbon::Job> tj;
        std::vector<std::optional<carbon::Decision>> tp;
        for (size_t i : idx) {
          tj.push_back(cjobs[i]);
          tp.push_back(previous[i]);
        }
        try {
          return carbon::schedule_pass(tj, tp, cregions, ledger, tnow, popt, carbon::fallback_policy(popt.policy));
        } catch (const carbon::CarbonError& e) {
          std::fprintf(stderr, "greenshard-controller: cycle %lld: placement failed: %s\n",
                       static_cast<long long>(cyc), e.what());
          return std::vector<carbon::PassResult>(idx.size());
        }
      };
      bool below = false;   // untouched held plans of lower priority
      for (size_t k : untouched) below = below || held_jobs[k]->spec().priority < prio;
      std::optional<carbon::CapacityLedger> before;
      if (below) before = ledger;
      auto r = run_pass();
      if (below) {
        std::vector<carbon::Unserved> unserved;
        for (size_t k = 0; k < idx.size(); ++k)
          if (placed_jobs[idx[k]]->state() == JobState::kPending &&
              (r[k].outcome == carbon::PassOutcome::kUnplaced || r[k].outcome == carbon::PassOutcome::kFallback))
            unserved.push_back({&cjobs[idx[k]], prio});
        std::vector<Job*> in_way;
        if (!unserved.empty()) {
          std::vector<carbon::HeldPlan> candidates;
          std::vector<size_t> which;
          for (size_t k : untouched)
            if (!released.count(held_jobs[k]->id())) {
              candidates.push_back(held_plan(k));
              which.push_back(k);
            }
          const auto way = carbon::in_the_way(unserved, candidates, cregions, tnow, popt);
          for (size_t c = 0; c < way.size(); ++c)
            if (way[c]) in_way.push_back(held_jobs[which[c]]);
        }
        if (!in_way.empty()) {
          ledger = std::move(*before);
          for (Job* v : in_way) {
            release(v->id());
            rep.replan[v->id()] = carbon::ReplanReason::kHigherPriority;
            for (const auto& [region, nodes] : reserved_nodes(*v, now)) quota.release(v->tenant(), region, nodes);
            if (admit_to_pass(*v)) {
              tiers[v->spec().priority].push_back(cjobs.size() - 1);
              results.resize(cjobs.size());
            }
          }
          r = run_pass();
        }
      }
      for (size_t k = 0; k < idx.size(); ++k) results[idx[k]] = std::move(r[k]);
    }

    // 7. Decisions: SCHEDULED with their windows (reservations), or waiting.
    //    A job without a deadline runs now or waits in line (PENDING): it
    //    holds no capacity in the future, it takes the first that frees up.
    for (size_t i = 0; i < placed_jobs.size(); ++i) {
      Job& j = *placed_jobs[i];
      carbon::PassResult r = results[i];
      if (!has_deadline[i] && r.outcome != carbon::PassOutcome::kUnplaced && r.decision.start > tnow) {
        not_stored.push_back({&results[i].decision, cjobs[i].gpus});
        r.decision.reason = "no room now in any allowed region";
        r.outcome = carbon::PassOutcome::kUnplaced;
      }
      const bool was_scheduled = j.state() == JobState::kScheduled;
      DecisionRecord rec{cyc, j.id(), now, DecisionOutcome::kAdmitted, r.decision.region, policy,
                         r.decision.explanation};
      if (r.outcome == carbon::PassOutcome::kUnplaced) {
        const std::string why = "waiting for capacity: " + r.decision.reason;
        if (was_scheduled) {
          rep.requeued++;
          rec.outcome = DecisionOutcome::kRequeued;
          rec.explanation = why;
          decisions.push_back(rec);
          changes[j.id()] = [now, why](Job& job) {
            return job.transition(JobState::kPending, "Replanned", "its plan no longer fits; " + why, now);
          };
        } else {
          defer(j, rec, why);
          waiting.push_back({&j, cjobs[i].allowed_regions, j.spec().min_width(), false});
        }
        continue;
      }
      now_planned.push_back(&j);
      if (r.outcome == carbon::PassOutcome::kKeptPrevious) continue;  // re-planned, unchanged
      const carbon::Decision& d = r.decision;
      PlacementView pv;
      pv.region = d.region;
      pv.policy = r.outcome != carbon::PassOutcome::kFallback ? policy
                  : has_deadline[i] && !d.deadline_met ? std::string("deadline-infeasible")
                                                       : std::string(carbon::policy_name(carbon::fallback_policy(popt.policy)));
      for (const auto& w : d.windows) pv.windows.push_back({std::max(now, carbon::ms_of_time(w.start)), carbon::ms_of_time(w.end)});
      pv.start_ms = pv.windows.front().first;
      // Elastic and migratable plans: each window's region and width (kept
      // only when one differs from the decision's region at spec.nodes).
      bool shaped = false;
      for (const auto& w : d.windows) {
        pv.places.push_back({w.region.empty() ? d.region : w.region, w.gpus > 0 ? w.gpus : j.spec().nodes});
        shaped = shaped || !(pv.places.back() == WindowPlace{d.region, j.spec().nodes});
      }
      if (!shaped) pv.places.clear();
      for (const auto& c : d.changes)
        pv.changes.push_back({carbon::ms_of_time(c.at), c.from_region, c.to_region, c.from_gpus, c.to_gpus, c.cost_grams,
                              c.saved_grams, c.why});
      pv.expected_grams = d.expected_grams;
      pv.run_now_home_grams = std::isnan(d.run_now_home_grams) ? d.expected_grams : d.run_now_home_grams;
      pv.explanation = d.explanation;
      pv.cycle = cyc;
      if (was_scheduled && j.placement && j.placement->region == pv.region && j.placement->windows == pv.windows &&
          j.placement->places == pv.places)
        continue;  // re-planned to the same plan
      rep.placed++;
      rec.outcome = was_scheduled ? DecisionOutcome::kReplanned : DecisionOutcome::kAdmitted;
      rec.policy = pv.policy;
      if (auto w = rep.replan.find(j.id()); was_scheduled && w != rep.replan.end())
        rec.explanation = std::string("re-planned (") + carbon::replan_reason_name(w->second) + "): " + rec.explanation;
      decisions.push_back(rec);
      if (metrics_) metrics_->decision(pv.policy, rec.outcome);
      changes[j.id()] = [now, pv, was_scheduled](Job& job) {
        job.placement = pv;
        job.waiting_reason.clear();
        if (was_scheduled) return job.state() == JobState::kScheduled;
        return job.transition(JobState::kScheduled, "Placed", pv.explanation, now);
      };
    }
    // What every plan of this pass was made against (carbon::PlanBasis),
    // kept in memory for the next re-plans: the regions' forecasts and the
    // free capacity once the plans stored are reserved.
    if (opt_.replan_period_ms > 0 && opt_.replan.incremental && !now_planned.empty()) {
      carbon::CapacityLedger stored = ledger;
      for (const auto& [d, gpus] : not_stored) stored.reserve(d->region, d->windows, -gpus);
      auto b = std::make_shared<const carbon::PlanBasis>(carbon::plan_basis(cregions, stored, tnow, popt));
      for (const Job* j : now_planned) basis_[j->id()] = b;
    }
  }
  // 8. Preemption for the jobs that wait (before `jobs` is refreshed: the
  //    waiting list points into it), against the capacity free this hour.
  std::map<std::string, int> free_now;
  for (const auto& r : regions) free_now[r.name] = r.capacity_nodes - ledger.used(r.name, carbon::time_of_ms(hour));
  preempt(jobs, waiting, quota, free_now, rep);
  if (metrics_)
    for (const auto& [t, n] : quota_waiting) metrics_->set_quota_waiting(t, n);
  apply_and_refresh(registry_, changes, decisions, jobs);

  // 9. This hour's realized load (what capacity pricing learns from).
  LoadSample x{hour, 0, 0};
  for (const auto& r : regions) {
    x.capacity_nodes += r.capacity_nodes;
    x.busy_nodes += ledger.used(r.name, carbon::time_of_ms(hour));
  }
  if (load_hour_ms_ != hour || load_now_.busy_nodes != x.busy_nodes || load_now_.capacity_nodes != x.capacity_nodes) {
    registry_.store().record_load(x);
    load_hour_ms_ = hour;
    load_now_ = x;
  }
}

QuotaLedger Scheduler::quota_usage(const std::vector<Job>& jobs, const std::set<std::string>& released) const {
  QuotaLedger q(opt_.quotas, regions_);
  const int64_t now = clock_.now_ms();
  for (const Job& j : jobs) {
    std::map<std::string, int> held;  // region -> nodes
    if (!released.count(j.id())) held = reserved_nodes(j, now);
    if (is_active(j.state()) && j.placement) held[gang_region(j)] = std::max(held[gang_region(j)], gang_nodes(j));
    for (const auto& [region, nodes] : held) q.add(j.tenant(), region, nodes);
  }
  return q;
}

namespace {

// When the job's gang last started (its newest STARTING condition).
int64_t started_ms(const Job& j) {
  const auto& cs = j.conditions();
  for (auto it = cs.rbegin(); it != cs.rend(); ++it)
    if (it->state == JobState::kStarting) return it->time_ms;
  return j.created_ms();
}

}  // namespace

void Scheduler::preempt(std::vector<Job>& jobs, const std::vector<Waiting>& waiting, const QuotaLedger& quota,
                        const std::map<std::string, int>& free_now, CycleReport& rep) {
  if (waiting.empty()) return;
  const int64_t now = clock_.now_ms();
  const int64_t cyc = cycle_no_.load();
  std::unordered_map<std::string, Fn> changes;
  std::vector<DecisionRecord> decisions;
  // Gangs already stopping for a waiting job: their nodes are on the way,
  // and nobody else takes them as victims.
  std::set<std::string> taken;
  std::set<std::string> served;
  for (const Job& v : jobs) {
    if (!is_active(v.state())) continue;
    const std::string& by = v.stop.preempted_by;
    if (v.stop.intent != StopIntent::kPreempted || by.empty()) continue;
    taken.insert(v.id());
    served.insert(by);
  }
  std::vector<const Waiting*> order;
  for (const Waiting& w : waiting) order.push_back(&w);
  std::stable_sort(order.begin(), order.end(), [](const Waiting* a, const Waiting* b) {
    return a->job->spec().priority > b->job->spec().priority;
  });
  for (const Waiting* w : order) {
    const Job& p = *w->job;
    if (served.count(p.id())) {
      rep.preempting++;  // waits for the gangs it preempted to stop
      continue;
    }
    for (const std::string& region : w->regions) {
      auto f = free_now.find(region);
      const int free = f == free_now.end() ? 0 : std::max(0, f->second);
      int need = std::max(0, w->nodes - free);
      if (w->quota) need = std::max(need, w->nodes - quota.room(p.tenant(), region));
      if (need <= 0) continue;
      std::vector<const Job*> candidates;
      for (const Job& v : jobs) {
        if (v.state() != JobState::kRunning || taken.count(v.id()) || !v.placement) continue;
        if (!v.spec().interruptible || v.spec().priority >= p.spec().priority) continue;
        if (gang_region(v) != region || v.stop.requested()) continue;
        if (w->quota && v.tenant() != p.tenant()) continue;  // a quota wait preempts only its own tenant
        candidates.push_back(&v);
      }
      // Kueue's order: lowest priority first, then the most recently started.
      std::stable_sort(candidates.begin(), candidates.end(), [](const Job* a, const Job* b) {
        if (a->spec().priority != b->spec().priority) return a->spec().priority < b->spec().priority;
        return started_ms(*a) > started_ms(*b);
      });
      std::vector<const Job*> victims;
      int freed = 0;
      for (const Job* v : candidates) {
        if (freed >= need) break;
        victims.push_back(v);
        freed += gang_nodes(*v);
      }
      if (freed < need) continue;  // preempting would not make it fit here
      Executor* ex = executor_for(region);
      if (!ex) continue;
      std::string names;
      for (const Job* v : victims) {
        names += (names.empty() ? "" : ", ") + v->id() + " (priority " + std::to_string(v->spec().priority) + ")";
        const std::string msg = "preempted by " + p.id() + " (priority " + std::to_string(p.spec().priority) +
                                ") in " + region + (w->quota ? " within " + p.tenant() + "'s quota" : "") +
                                "; it checkpointed and waits in line to resume from that checkpoint";
        ex->stop(v->id(), opt_.stop_grace);
        taken.insert(v->id());
        rep.preempted++;
        if (metrics_) metrics_->preempted(v->tenant(), region);
        changes[v->id()] = [msg, by = p.id()](Job& job) {
          if (job.state() != JobState::kRunning) return false;
          job.stop = {StopIntent::kPreempted, msg, by};
          return true;
        };
      }
      rep.preempting++;
      DecisionRecord rec{cyc, p.id(), now, DecisionOutcome::kPreempting, region,
                         carbon::policy_name(opt_.placement.policy),
                         "preempting " + names + " to free " + nodes_str(need) + " in " + region +
                             (w->quota ? " within " + p.tenant() + "'s quota" : "")};
      decisions.push_back(rec);
      if (metrics_) metrics_->decision(rec.policy, rec.outcome);
      break;
    }
  }
  apply_and_refresh(registry_, changes, decisions, jobs);
}

bool Scheduler::start_gang(const Job& job, size_t window, RegionSnapshot* region, CycleReport& rep) {
  const int64_t now = clock_.now_ms();
  const WindowPlace at = window_place(job, window);
  Executor* ex = executor_for(at.region);
  const JobState from = job.state();
  // A change: the gang launches somewhere else, or at another width, than
  // the gang before it (an elastic or migratable job's next window).
  const bool launched_before = !job.gang.region.empty();
  const WindowPlace before{gang_region(job), gang_nodes(job)};
  const bool change = launched_before && !(before == at);
  const PlannedChange* planned = change ? planned_change(job, window) : nullptr;
  std::string reason = from == JobState::kScheduled   ? "WindowOpened"
                       : from == JobState::kSuspended ? (!change                         ? "Resumed"
                                                         : before.region != at.region ? "Migrated"
                                                                                      : "Resized")
                                                      : "Restarting";
  std::string message = "launching " + std::to_string(at.nodes * job.spec().procs_per_node) + " ranks in " +
                        at.region;
  if (change) {
    message += " from the newest checkpoint: " + change_words(before, at);
    if (planned)
      message += "; expected to avoid " + grams_str(planned->saved_grams) + " (" + planned->why + ")";
  }
  auto started = registry_.update(job.id(), kAllTenants, [&](Job& j) {
    if (j.state() != from) return false;
    j.gang = {at.region, at.nodes, int(window)};
    return j.transition(JobState::kStarting, reason, message, now);
  });
  if (!started || started->state() != JobState::kStarting) return false;
  if (change && metrics_) {
    metrics_->resized(before.nodes, at.nodes);
    metrics_->migrated(before.region, at.region);
    if (planned) metrics_->change_avoided_grams(planned->saved_grams);
  }
  // A job leaves SCHEDULED for STARTING once in its life (a requeued job
  // goes back to PENDING, a restart starts from RECOVERING): the CO2 it
  // avoids is counted here, once per job.
  if (from == JobState::kScheduled && metrics_) {
    metrics_->observe_queue_wait(double(now - job.created_ms()) / 1000.0);
    metrics_->avoided_grams(job.placement->run_now_home_grams - job.placement->expected_grams);
  }
  GangSpec g;
  g.job_id = job.id();
  g.spec = job.spec();
  g.region = at.region;
  g.nodes = at.nodes;
  g.attempt = job.recovery_count;
  g.status_url = opt_.status_url_base + "/v1/jobs/" + job.id() + "/status";
  g.status_token = job.worker_token;
  g.intensity = region->intensity_now;
  // The intensity in force, served by this controller (GET
  // /v1/regions/{name}/intensity): the worker integrates it per interval.
  if (!opt_.status_url_base.empty())
    g.intensity_url = opt_.status_url_base + "/v1/regions/" + at.region + "/intensity";
  g.pue = region->pue;
  try {
    if (!ex) throw std::runtime_error("no executor for region " + at.region);
    GangStatus st = ex->start(g);
    rep.started++;
    auto after = registry_.update(job.id(), kAllTenants, [&](Job& j) {
      j.runtime = st.runtime;
      j.stop = {};  // a new gang: no stop asked of it yet
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
  auto snapshot = [&](const std::string& name) -> RegionSnapshot* {
    for (auto& r : regions)
      if (r.name == name) return &r;
    return nullptr;
  };
  std::unordered_map<std::string, Fn> requeue;
  // Recovering and suspended jobs first: they already hold a place in line.
  for (int pass = 0; pass < 2; ++pass) {
    for (const Job& j : jobs) {
      if (!j.placement || j.placement->windows.empty()) continue;
      const auto& w = j.placement->windows;
      // Which window to launch, if any is due.
      std::optional<size_t> window;
      if (pass == 0 && j.state() == JobState::kRecovering && j.next_attempt_ms <= now) {
        // The window open now (a failed gang's window may have ended), else
        // the gang's own.
        window = gang_window(j, now);
        for (size_t i = *window; i < w.size(); ++i)
          if (w[i].first <= now && now < w[i].second) window = i;
      }
      if (pass == 0 && j.state() == JobState::kSuspended) {
        // The next window once it opens; when every window is over (its
        // gang took longer than planned), the last one, now.
        const size_t k = j.gang.window < 0 ? 0 : size_t(j.gang.window) + 1;
        for (size_t i = k; i < w.size() && !window; ++i)
          if (w[i].first <= now && now < w[i].second) window = i;
        if (!window && now >= w.back().second) window = w.size() - 1;
      }
      if (pass == 1 && j.state() == JobState::kScheduled && j.placement->start_ms <= now) window = 0;
      if (!window) continue;
      const WindowPlace at = window_place(j, *window);
      RegionSnapshot* r = snapshot(at.region);
      if (!r) continue;
      // A RECOVERING gang keeps its nodes (it is active): they count as free
      // for its own restart there.
      const bool holds = j.state() == JobState::kRecovering;
      RegionSnapshot* held = holds ? snapshot(gang_region(j)) : nullptr;
      const int free = r->free_nodes + (held == r ? gang_nodes(j) : 0);
      if (free < at.nodes) {
        if (j.state() == JobState::kScheduled) {
          rep.requeued++;
          requeue[j.id()] = [now](Job& job) {
            return job.transition(JobState::kPending, "CapacityLost",
                                  "its region filled up before its window; placing it again", now);
          };
        }
        continue;
      }
      if (!start_gang(j, *window, r, rep)) continue;
      if (held) held->free_nodes += gang_nodes(j);
      r->free_nodes -= at.nodes;
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
  Executor* ex = executor_for(gang_region(job));
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
