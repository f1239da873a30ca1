// Scheduler: one numbered cycle at a time, in the style of Kueue's
// schedule(), with an injected Clock so tests drive time by hand.
//
// cycle() runs these phases in order, each timed (metrics, CycleReport):
//   snapshot  regions (capacity minus active gangs, intensity now and the
//             forecast) and the live jobs (active ones plus the head of the
//             pending queue);
//   observe   poll every active gang: STARTING->RUNNING, RUNNING->SUCCEEDED,
//             a failed gang ->RECOVERING (backoff, counted) or ->FAILED after
//             max_restarts / on a worker config error (exit 2); an
//             interruptible job whose window closed is told to checkpoint
//             and stop, then ->SUSPENDED (in the same cycle when the gang is
//             already down when polled again); a gang the cluster preempted
//             (it checkpointed, exited 0) ->RECOVERING without using a
//             restart;
//   order     pending jobs by priority (desc) then age (Registry::live_jobs);
//   place     every PENDING job within its tenant's quota (controller/config/quota.h;
//             a job over it waits with "QuotaExceeded") -- and, every replan_period, the
//             SCHEDULED jobs whose first window has not opened and whose
//             inputs changed since their plan (carbon/replan.h: a forecast
//             revised beyond SchedulerOptions::replan.forecast_threshold
//             -- down over the job's span in one of its regions, or up
//             where its plan runs --, capacity freed there, capacity lost
//             where its plan runs), their reservations released first;
//             the others keep their reservation untouched -- in ONE
//             carbon::schedule_pass
//             (carbon/scheduling_pass.h: place_all, earliest deadline
//             first, then the fallback policy) over a CapacityLedger of each
//             region's capacity minus running gangs minus the reservations
//             in the store; capacity is priced by the expected load learned
//             (carbon::ExpectedLoad) from the store's load history. Each
//             region's forecast is planned at its snapshot's step
//             (forecast_step_ms, regions.h: hourly, or the 5/15/30-minute
//             points of a sub-hourly source), so on 30-minute data windows
//             start and end on half hours (carbon/placement.h, "Slots"). Placed
//             ->SCHEDULED (its windows become reservations in the store, in
//             the same transaction), ->FAILED when no allowed region can
//             ever take it, or deferred (still PENDING) while nothing fits
//             in the look-ahead; then this hour's realized load is recorded;
//   preempt   a job that waits for capacity (or for its tenant's quota) may
//             preempt RUNNING interruptible jobs of lower priority in one of
//             its regions (of its own tenant when it waits for quota): each
//             is told to checkpoint and stop, as at the end of a carbon
//             window, and goes back to PENDING ("Preempted") once down, to
//             resume from that checkpoint when placed again. Never a job of
//             equal or higher priority, never a non-interruptible one, and
//             only when the victims free enough; lowest priority first, then
//             the most recently started;
//   admit     SCHEDULED jobs whose window opened, SUSPENDED jobs whose next
//             window opened, and RECOVERING jobs whose backoff elapsed
//             ->STARTING; the executor launches the gang; a SCHEDULED job
//             whose region filled up meanwhile is requeued (->PENDING);
//   drain     escalate overdue stops, reap cancelled gangs, update gauges.
// Every decision is appended to the store's decision log and counted.
// State changes are persisted before the executor acts on them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <carbon/expected_load.h>
#include <carbon/placement.h>
#include <carbon/replan.h>
#include <carbon/time_ms.h>

#include "controller/core/clock.h"
#include "controller/executors/executor.h"
#include "controller/scheduling/metrics.h"
#include "controller/core/region_snapshot.h"
#include "controller/config/quota.h"
#include "controller/config/regions.h"
#include "controller/store/registry.h"

namespace controller {

struct SchedulerOptions {
  size_t max_pending_per_cycle = 256;
  std::chrono::milliseconds min_cycle_gap{100};  // run(): at most one cycle per gap
  std::chrono::milliseconds stop_grace{30000};
  int64_t backoff_base_ms = 1000;
  int64_t backoff_max_ms = 5 * carbon::kMinuteMs;
  std::string status_url_base;  // "http://127.0.0.1:8080" (no trailing '/')
  const IntensitySource* intensity = nullptr;  // for regions with `zone:`
  // Placement: policy (spatio-temporal; kRunNowHome is the FIFO baseline),
  // look-ahead (also the forecast horizon), windows, near-tie and capacity
  // price weight. expected_load_by_hour_of_week is ignored: it is learned.
  carbon::PlacementOptions placement = default_placement();
  // Jobs placed but not started are re-planned this often (on multiples of
  // the period since the epoch); 0 = decisions are final.
  int64_t replan_period_ms = carbon::kHourMs;
  // Which of them a re-plan places again (carbon/replan.h): by default only
  // those whose inputs changed since their plan -- a forecast revised by
  // more than forecast_threshold (5 %): down over the job's span in one of
  // its regions, or up where its plan runs; capacity freed in one of its
  // regions within its span; capacity lost where its plan runs (its region
  // gone, an hour it reserves over-committed, or with capacity pricing less
  // free capacity there: jobs placed since). Every other one keeps its plan and
  // reservation untouched and is not passed to placement. In any cycle, a
  // PENDING job of higher priority that its pass leaves unplaced or on its
  // fallback also releases the held plans of lower priority in its way
  // (carbon::in_the_way). The forecasts and free capacity each plan was made against
  // are kept in memory only: after a controller restart the first re-plan
  // places every such job again (a full re-plan). incremental = false: every
  // re-plan is a full one (--full-replan).
  carbon::ReplanOptions replan;
  // Capacity pricing from the store's load history (spatio-temporal only).
  bool learn_expected_load = true;
  double load_learning_rate = 0.3;
  // Tenant quotas (controller/config/quota.h); empty: none.
  QuotaConfig quotas;

  static carbon::PlacementOptions default_placement() {
    carbon::PlacementOptions p;
    p.max_lookahead = carbon::Hours{48};
    return p;
  }
};

// The placement settings of `o` in one line, as the controller logs them
// at start and greenshard-sim prints them ("look-ahead 48 h, re-plan every
// 3600 s (incremental, forecast threshold 0.05), capacity price 0.9 (load
// spread 0.2, learned at rate 0.3), at most 6 windows, prefer earlier
// within 0.05"); the policy is not in it.
std::string describe_placement_settings(const SchedulerOptions& o);

struct CycleReport {
  int64_t cycle = 0;
  std::vector<std::pair<std::string, double>> phase_seconds;
  int placed = 0, deferred = 0, rejected = 0, started = 0, finished = 0, recovering = 0,
      suspended = 0, requeued = 0, preempting = 0, preempted = 0, quota_waiting = 0;
  // A re-plan: every held plan it looked at (SCHEDULED, first window not
  // open) and why it was placed again; kUnchanged: left untouched.
  std::map<std::string, carbon::ReplanReason> replan;
};

class Scheduler {
 public:
  Scheduler(Registry& registry, const Clock& clock, std::vector<RegionConfig> regions, std::map<std::string, Executor*> executors,
            Metrics* metrics, SchedulerOptions options);

  // At controller start: re-adopt or restart every job that was active.
  void recover();
  CycleReport cycle();
  int64_t cycles() const { return cycle_no_.load(); }

  // Runs cycle() every `period` (sooner after wake()) until stop().
  void run(std::chrono::milliseconds period);
  void wake();
  void stop();

  // The job was cancelled (already CANCELLED in the registry): stop its gang.
  void on_cancelled(const Job& job);
  // Executor of a region (nullptr when unknown).
  Executor* executor_for(const std::string& region) const;
  // Regions as of the last cycle (for GET /v1/regions).
  std::vector<RegionSnapshot> regions_now() const;
  const std::vector<RegionConfig>& region_configs() const { return regions_; }
  // "spatio-temporal", "fifo", ... (carbon::policy_name).
  std::string policy_name() const { return carbon::policy_name(opt_.placement.policy); }
  // Capacity pricing's expected load, as learned so far.
  const carbon::ExpectedLoad& expected_load() const { return expected_load_; }
  // Where workers push status (set once the API port is known, before run()).
  void set_status_url_base(std::string url) { opt_.status_url_base = std::move(url); }

 private:
  void observe(std::vector<Job>& jobs, CycleReport& rep);
  void place(std::vector<Job>& jobs, std::vector<RegionSnapshot>& regions, CycleReport& rep);
  void admit(std::vector<Job>& jobs, std::vector<RegionSnapshot>& regions, CycleReport& rep);
  // What each tenant holds or has reserved (jobs whose reservations were
  // released for a re-plan count only their live gang).
  QuotaLedger quota_usage(const std::vector<Job>& jobs, const std::set<std::string>& released) const;
  struct Waiting {
    const Job* job;
    std::vector<std::string> regions;  // allowed regions with intensity data
    int nodes;                         // what it needs to start
    bool quota;                        // waits for its tenant's quota (else capacity)
  };
  void preempt(std::vector<Job>& jobs, const std::vector<Waiting>& waiting, const QuotaLedger& quota,
               const std::map<std::string, int>& free_now, CycleReport& rep);
  void drain();
  void learn_load(int64_t now_ms);
  int horizon_h() const;
  // Launches window `window` of the job's placement (its region and width,
  // window_place) in `region` (that window's snapshot); records a change of
  // region or width against the gang before (condition, metrics).
  bool start_gang(const Job& job, size_t window, RegionSnapshot* region, CycleReport& rep);
  int64_t backoff_ms(int recovery_count) const;

  Registry& registry_;
  const Clock& clock_;
  std::vector<RegionConfig> regions_;
  std::map<std::string, Executor*> executors_;
  Metrics* metrics_;
  SchedulerOptions opt_;
  carbon::ExpectedLoad expected_load_;
  int64_t load_hour_ms_ = INT64_MIN;   // the hour of load_now_
  LoadSample load_now_;                // this hour's load as last recorded
  int64_t last_replan_ms_ = INT64_MIN;
  // What each SCHEDULED job's plan was made against (carbon::PlanBasis),
  // shared by the plans of one pass; in memory only (a restart forgets it).
  std::map<std::string, std::shared_ptr<const carbon::PlanBasis>> basis_;
  std::atomic<int64_t> cycle_no_{0};
  std::mutex cycle_mu_;  // one cycle at a time

  mutable std::mutex mu_;
  std::vector<RegionSnapshot> last_regions_;
  std::map<std::string, Executor*> draining_;  // cancelled gangs not yet gone

  std::mutex run_mu_;
  std::condition_variable run_cv_;
  bool wake_ = false, stop_ = false;
};

}  // namespace controller
