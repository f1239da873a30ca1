// The scheduler cycle with a hand-driven clock and the local executor
// running real processes: a small POSIX shell script that follows the
// worker contract (docs/worker-controller.md: exit codes, summary file,
// checkpoint-and-exit-0 on SIGTERM). The real worker is exercised by
// controller_e2e_test.
#include <gtest/gtest.h>

#include <carbon/time_ms.h>
#include <signal.h>

#include <filesystem>

#include "fixture.h"
#include "worker/spec/job_spec.h"  // kConfigErrorPrefix

using namespace controller;
using namespace ctltest;
using json = nlohmann::json;

namespace {

const char* kScript = R"SH(#!/bin/sh
B=$(sed -n 's/.*"behaviour": *"\([a-z0-9-]*\)".*/\1/p' "$2")
C=$GREENSHARD_CHECKPOINT_DIR
summary() { if [ "$RANK" = 0 ]; then printf '{"state":"%s","steps":5,"tokens":640,"energy_joules":3600,"operational_grams":0.4,"embodied_grams":0.1}\n' "$1" > "$GREENSHARD_SUMMARY_PATH"; fi; }
n=$(cat "$C/runs-$RANK" 2>/dev/null || echo 0)
echo $((n + 1)) > "$C/runs-$RANK"
echo "rank $RANK run $n behaviour $B region $GREENSHARD_REGION intensity $GREENSHARD_GRID_INTENSITY"
case "$B" in
  succeed) summary succeeded; exit 0 ;;
  config) echo "greenshard-worker: config error: model.embd: must be >= 1 and divisible by model.heads" >&2; exit 2 ;;
  always-fail) if [ "$RANK" = 1 ]; then exit 1; fi; sleep 60; exit 0 ;;
  fail-once)
    if [ "$n" = 0 ]; then
      if [ "$RANK" = 1 ]; then
        while [ ! -e "$C/runs-0" ]; do sleep 0.01; done
        exit 3
      fi
      sleep 60; exit 0
    fi
    summary succeeded; exit 0 ;;
  run) trap 'summary preempted; exit 0' TERM; echo "trap set"; while :; do sleep 0.05; done ;;
  stubborn) trap '' TERM; while :; do sleep 0.05; done ;;
esac
echo "unknown behaviour" >&2
exit 2
)SH";

json job_spec(const std::string& behaviour, json extra = json::object()) {
  json s = {{"name", "t-" + behaviour},
            {"worker", {{"behaviour", behaviour}}},
            {"regions", {"DE"}},
            {"procs_per_node", 2},
            {"max_restarts", 2}};
  for (auto& [k, v] : extra.items()) s[k] = v;
  return s;
}

std::string submit(Controller& c, const json& s, const std::string& tenant = "team-a") {
  return c.registry->submit(tenant, parse_job_spec(s), "").job.id();
}

Options opts(std::string regions = "regions:\n  - {name: DE, nodes: 2, intensity: 300}\n", int64_t grace_ms = 5000) {
  Options o;
  o.worker_script = kScript;
  o.regions_yaml = regions;
  o.grace_ms = grace_ms;
  return o;
}

bool alive(const json& runtime) {
  for (auto& p : runtime.value("pids", json::array()))
    if (::kill(p.get<int>(), 0) == 0) return true;
  return false;
}

std::vector<std::string> reasons(const Job& j) {
  std::vector<std::string> out;
  for (auto& c : j.conditions()) out.push_back(c.reason);
  return out;
}

}  // namespace

TEST(ControllerScheduler, AJobRunsToSuccessAndReportsItsEmissions) {
  Controller c(opts());
  auto id = submit(c, job_spec("succeed"));
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kSucceeded; }));
  Job j = *c.registry->get(id);
  EXPECT_EQ(reasons(j), (std::vector<std::string>{"Submitted", "Placed", "WindowOpened", "GangRunning", "Completed"}));
  EXPECT_DOUBLE_EQ(j.progress.operational_grams, 0.4);
  EXPECT_DOUBLE_EQ(j.progress.energy_joules, 3600);
  EXPECT_EQ(j.recovery_count, 0);
  // The worker got the region's intensity through the environment.
  auto log = c.local->logs(id, 1, 0, 4096);
  ASSERT_TRUE(log);
  EXPECT_NE(log->find("region DE intensity 300"), std::string::npos) << *log;
}

TEST(ControllerScheduler, AFailedRankTakesTheGangDownAndItRestartsFromCheckpoint) {
  // One node: the recovering gang keeps it and restarts on it.
  Controller c(opts("regions:\n  - {name: DE, nodes: 1, intensity: 300}\n"));
  auto id = submit(c, job_spec("fail-once"));
  // Rank 0 sleeps 60 s on the first run: the gang can only end within the
  // bound if the executor kills it when rank 1 fails.
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kRecovering; }, 250));
  EXPECT_NE(c.registry->get(id)->conditions().back().message.find("rank 1 failed: exit code 3"), std::string::npos);
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kSucceeded; }, 250))
      << c.registry->get(id)->to_document().dump(1) << *c.local->logs(id, 0, 0, 10000)
      << *c.local->logs(id, 1, 0, 10000);
  Job j = *c.registry->get(id);
  EXPECT_EQ(j.recovery_count, 1);
  auto r = reasons(j);
  EXPECT_EQ(std::count(r.begin(), r.end(), "GangFailed"), 1);
  EXPECT_EQ(std::count(r.begin(), r.end(), "Restarting"), 1);
  EXPECT_NE(c.metrics.render().find("greenshard_executor_restarts_total{executor=\"local\"} 1"), std::string::npos);
}

TEST(ControllerScheduler, AConfigurationErrorFailsWithoutRestarts) {
  Controller c(opts());
  auto id = submit(c, job_spec("config"));
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kFailed; }));
  Job j = *c.registry->get(id);
  EXPECT_EQ(j.recovery_count, 0);
  EXPECT_EQ(j.conditions().back().reason, "WorkerConfigError");
  EXPECT_NE(j.failure_reason.find("exit 2"), std::string::npos);
  // The worker's own words (its stderr line, docs/worker-controller.md), not just the exit code.
  ASSERT_NE(std::string(kScript).find(greenshard::kConfigErrorPrefix), std::string::npos) << "the stand-in's format";
  EXPECT_NE(j.failure_reason.find(": model.embd: must be >= 1 and divisible by model.heads"), std::string::npos)
      << j.failure_reason;
  EXPECT_EQ(j.failure_reason.find(greenshard::kConfigErrorPrefix), std::string::npos) << j.failure_reason;
}

TEST(ControllerScheduler, AWorkerThatCannotBeExecutedIsALaunchFailureNamingItAndNoRunningGang) {
  // A controller image has no worker next to it: the gang must not be
  // reported running while its ranks exit 127.
  Controller c(opts());
  std::filesystem::remove(c.dir.file("worker.sh"));
  auto id = submit(c, job_spec("succeed", {{"max_restarts", 0}}));
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kFailed; }));
  Job j = *c.registry->get(id);
  auto r = reasons(j);
  EXPECT_EQ(std::count(r.begin(), r.end(), "GangRunning"), 0) << j.to_document().dump(1);
  EXPECT_EQ(j.conditions().back().reason, "LaunchFailed");
  EXPECT_NE(j.failure_reason.find("cannot execute the worker " + c.dir.file("worker.sh") +
                                  ": No such file or directory"),
            std::string::npos)
      << j.failure_reason;
}

TEST(ControllerScheduler, RestartsStopAtMaxRestarts) {
  Controller c(opts());
  auto id = submit(c, job_spec("always-fail", {{"max_restarts", 2}}));
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kFailed; }, 1000));
  Job j = *c.registry->get(id);
  EXPECT_EQ(j.recovery_count, 2);
  EXPECT_EQ(j.conditions().back().reason, "MaxRestartsExceeded");
}

TEST(ControllerScheduler, CancelTerminatesTheGangAndLeavesNoProcess) {
  Controller c(opts());
  auto id = submit(c, job_spec("run"));
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kRunning; }));
  json rt = c.registry->get(id)->runtime;
  ASSERT_TRUE(alive(rt));
  auto after = c.registry->update(id, kAllTenants, [&](Job& j) {
    return j.transition(JobState::kCancelled, "Cancelled", "", c.clock.now_ms());
  });
  c.sched->on_cancelled(*after);
  ASSERT_TRUE(c.cycle_until([&] { return !alive(rt) && c.local->gone(id); }));
  EXPECT_EQ(c.state(id), JobState::kCancelled);
}

TEST(ControllerScheduler, AGangThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  Controller c(opts("regions:\n  - {name: DE, nodes: 2, intensity: 300}\n", 300));
  auto id = submit(c, job_spec("stubborn"));
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kRunning; }));
  json rt = c.registry->get(id)->runtime;
  auto after = c.registry->update(id, kAllTenants, [&](Job& j) {
    return j.transition(JobState::kCancelled, "Cancelled", "", c.clock.now_ms());
  });
  c.sched->on_cancelled(*after);
  ASSERT_TRUE(c.cycle_until([&] { return !alive(rt) && c.local->gone(id); }));
}

TEST(ControllerScheduler, AJobWaitsForCapacityAndTheDeferralIsRecordedOnce) {
  Controller c(opts());
  auto a = submit(c, job_spec("run", {{"nodes", 2}}));
  auto b = submit(c, job_spec("succeed", {{"nodes", 2}}));
  ASSERT_TRUE(c.cycle_until([&] { return c.state(a) == JobState::kRunning; }));
  for (int i = 0; i < 5; ++i) c.sched->cycle();
  EXPECT_EQ(c.state(b), JobState::kPending);
  auto d = c.store->decisions(b);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].outcome, controller::DecisionOutcome::kDeferred);
  auto after = c.registry->update(a, kAllTenants, [&](Job& j) {
    return j.transition(JobState::kCancelled, "Cancelled", "", c.clock.now_ms());
  });
  c.sched->on_cancelled(*after);
  ASSERT_TRUE(c.cycle_until([&] { return c.state(b) == JobState::kSucceeded; }));
}

TEST(ControllerScheduler, HigherPriorityRunsFirstThenOlder) {
  Controller c(opts("regions:\n  - {name: DE, nodes: 1, intensity: 300}\n"));
  auto low = submit(c, job_spec("succeed", {{"priority", 0}}));
  auto high = submit(c, job_spec("succeed", {{"priority", 5}}));
  auto low2 = submit(c, job_spec("succeed", {{"priority", 0}}));
  c.sched->cycle();
  EXPECT_EQ(c.state(high), JobState::kRunning);
  EXPECT_EQ(c.state(low), JobState::kPending);
  ASSERT_TRUE(c.cycle_until([&] { return c.state(high) == JobState::kSucceeded && c.state(low) != JobState::kPending; }));
  EXPECT_EQ(c.state(low2), JobState::kPending);
  ASSERT_TRUE(c.cycle_until([&] { return c.state(low2) == JobState::kSucceeded; }));
}

TEST(ControllerScheduler, ADelayTolerantJobWaitsForTheCleanHour) {
  // DE is dirty for the next two hours (from 00:00 UTC), then clean.
  std::string hourly = "[500, 500, 20, 20, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500]";
  Controller c(opts("regions:\n  - {name: DE, nodes: 2, hourly: " + hourly + "}\n"));
  auto id = submit(c, job_spec("succeed", {{"max_delay_s", 4 * 3600}, {"estimate", {{"duration_s", 3600}}}}));
  c.sched->cycle();
  Job j = *c.registry->get(id);
  ASSERT_EQ(j.state(), JobState::kScheduled);
  EXPECT_EQ(j.placement->policy, "spatio-temporal");
  EXPECT_EQ(j.placement->start_ms, c.clock.now_ms() + 2 * carbon::kHourMs);
  EXPECT_NEAR(j.placement->run_now_home_grams / j.placement->expected_grams, 25.0, 1e-6);
  for (int i = 0; i < 3; ++i) c.sched->cycle();
  EXPECT_EQ(c.state(id), JobState::kScheduled);
  c.clock.advance_ms(2 * carbon::kHourMs);
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kSucceeded; }));
}

TEST(ControllerScheduler, AnInterruptibleJobIsSuspendedBetweenItsWindows) {
  // Two clean spells, hours 0-1 and 3-4: a 3 h job runs 2 h, then 1 h 10 min
  // (the resume overhead) after a dirty hour.
  std::string hourly = "[20, 20, 500, 20, 20, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500]";
  Controller c(opts("regions:\n  - {name: DE, nodes: 2, hourly: " + hourly + "}\n"));
  auto id = submit(c, job_spec("run", {{"interruptible", true},
                                       {"deadline", format_rfc3339(c.clock.now_ms() + 6 * carbon::kHourMs)},
                                       {"estimate", {{"duration_s", 3 * 3600}}}}));
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kRunning; }));
  Job j = *c.registry->get(id);
  ASSERT_EQ(j.placement->windows.size(), 2u);
  EXPECT_EQ(j.placement->policy, "spatio-temporal");
  // Let the script install its SIGTERM trap (it logs after the trap line is reached).
  ASSERT_TRUE(c.cycle_until([&] {
    auto l = c.local->logs(id, 0, 0, 4096);
    return l && l->find("trap set") != std::string::npos;
  }));
  c.clock.advance_ms(2 * carbon::kHourMs);  // the first window closes
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kSuspended; }));
  EXPECT_TRUE(c.registry->get(id)->progress.reported);
  EXPECT_EQ(c.registry->get(id)->progress.state, greenshard::RunPhase::kPreempted);
  for (int i = 0; i < 3; ++i) c.sched->cycle();
  EXPECT_EQ(c.state(id), JobState::kSuspended);
  c.clock.advance_ms(carbon::kHourMs);  // the second window opens
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kRunning; }));
  EXPECT_EQ(c.registry->get(id)->conditions()[c.registry->get(id)->conditions().size() - 2].reason, "Resumed");
}

TEST(ControllerScheduler, AJobNoRegionCanHoldFails) {
  Controller c(opts());
  auto id = submit(c, job_spec("succeed", {{"gpus_per_node", 4}}));
  c.sched->cycle();
  EXPECT_EQ(c.state(id), JobState::kFailed);
  EXPECT_EQ(c.registry->get(id)->conditions().back().reason, "Unplaceable");
}

TEST(ControllerScheduler, EachCycleIsNumberedAndEveryPhaseTimed) {
  Controller c(opts());
  auto r1 = c.sched->cycle();
  auto r2 = c.sched->cycle();
  EXPECT_EQ(r2.cycle, r1.cycle + 1);
  std::vector<std::string> phases;
  for (auto& [p, s] : r2.phase_seconds) {
    phases.push_back(p);
    EXPECT_GE(s, 0);
  }
  EXPECT_EQ(phases, (std::vector<std::string>{"snapshot", "observe", "order", "place", "admit", "drain"}));
}

TEST(ControllerScheduler, RecoveringBacksOffExponentiallyOnTheInjectedClock) {
  Options o = opts();
  o.backoff_ms = 1000;
  Controller c(o);
  auto id = submit(c, job_spec("always-fail", {{"max_restarts", 3}}));
  // Cycles while real time passes (the gang fails on its own) and the
  // injected clock stands still: only advance_ms below moves it.
  auto cycle_frozen = [&](auto pred) {
    for (int i = 0; i < 500; ++i) {
      c.sched->cycle();
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  };
  std::vector<int64_t> delays;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    ASSERT_TRUE(cycle_frozen([&] {
      Job j = *c.registry->get(id);
      return j.state() == JobState::kRecovering && j.recovery_count == attempt;
    })) << "attempt " << attempt;
    Job j = *c.registry->get(id);
    ASSERT_EQ(j.conditions().back().reason, "GangFailed");
    const int64_t failed_at = j.conditions().back().time_ms;
    ASSERT_EQ(c.clock.now_ms(), failed_at);
    const int64_t delay = j.next_attempt_ms - failed_at;
    delays.push_back(delay);
    EXPECT_NE(j.conditions().back().message.find("in " + std::to_string(delay) + " ms"), std::string::npos)
        << j.conditions().back().message;
    // Not a moment before the delay has passed on the clock, however many cycles run.
    for (int i = 0; i < 5; ++i) c.sched->cycle();
    c.clock.advance_ms(delay - 1);
    for (int i = 0; i < 5; ++i) c.sched->cycle();
    EXPECT_EQ(c.state(id), JobState::kRecovering);
    c.clock.advance_ms(1);
    c.sched->cycle();
    j = *c.registry->get(id);
    EXPECT_NE(j.state(), JobState::kRecovering);
    auto conds = j.conditions();
    auto restart = std::find_if(conds.rbegin(), conds.rend(), [](const Condition& x) { return x.reason == "Restarting"; });
    ASSERT_NE(restart, conds.rend());
    EXPECT_EQ(restart->state, JobState::kStarting);
    EXPECT_EQ(restart->time_ms, failed_at + delay);
  }
  // The delay doubles from --backoff-ms with each restart.
  EXPECT_EQ(delays, (std::vector<int64_t>{1000, 2000, 4000}));
  ASSERT_TRUE(cycle_frozen([&] { return c.state(id) == JobState::kFailed; }));
  EXPECT_EQ(c.registry->get(id)->conditions().back().reason, "MaxRestartsExceeded");
}
