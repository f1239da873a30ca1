// SimExecutor: an Executor whose gangs launch nothing and run on a Clock for
// their job's estimated duration -- what the simulation engine
// (sim_engine.h) drives the controller's own Scheduler with.
//
// Contract (the Executor contract of executor.h, on simulated time):
//   - start(gang): the gang runs from clock.now_ms(); the work left is
//     gang.spec.duration_s (seconds at width spec.nodes) on the first
//     start, or what an earlier stop() left. Every start after the first
//     first spends a resume overhead of run time: `resume_overhead_s`, or
//     for an elastic or migratable job carbon::change_overhead (the same
//     overhead plus, when the gang starts in another region than its last
//     run, the checkpoint's transfer: as placement plans it). The work
//     then goes at speed(gang.width()) relative to width spec.nodes
//     (carbon::Job::speed over spec.scaling; linear without one);
//     starting a gang that is already running throws;
//   - poll(): kRunning until the work is done, then kSucceeded (summary
//     state "succeeded"); after stop(), kPreempted at once (the checkpoint
//     is instantaneous) with the work done so far kept; kUnknown for a job
//     never started;
//   - every run interval [start, end) is recorded with its region and
//     width (runs()): the realized windows the simulation scores;
//   - adopt() is false (nothing survives a restart), tick() does nothing,
//     gone() is true unless running, logs() is nullopt. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <carbon/placement.h>

#include "controller/core/clock.h"
#include "controller/executors/executor.h"

namespace controller {

struct SimExecutorOptions {
  double resume_overhead_s = 600;
  carbon::ElasticCosts elastic;   // elastic and migratable jobs' change costs
};

// One realized run of a simulated gang.
struct SimRun {
  int64_t start_ms = 0, end_ms = 0;   // [start, end)
  std::string region;
  int nodes = 0;
};

class SimExecutor final : public Executor {
 public:
  SimExecutor(const Clock& clock, SimExecutorOptions options = {});

  std::string kind() const override { return "sim"; }
  GangStatus start(const GangSpec& gang) override;
  GangStatus poll(const std::string& job_id) override;
  void stop(const std::string& job_id, std::chrono::milliseconds grace) override;
  bool adopt(const std::string& job_id, const nlohmann::json& runtime, const AdoptOptions& options) override;
  void tick() override {}
  bool gone(const std::string& job_id) override;
  std::optional<std::string> logs(const std::string&, int, int64_t, int64_t) override { return std::nullopt; }

  // The runs of a job, oldest first.
  std::vector<SimRun> runs(const std::string& job_id) const;

 private:
  struct Gang {
    bool running = false, succeeded = false, stopped = false;
    int starts = 0;
    int64_t started_ms = 0;
    double overhead_ms = 0;  // run time the current start spends resuming
    double left_ms = 0;      // work left (ms at width spec.nodes) when (re)started
    double speed = 1;        // of the current run, relative to width spec.nodes
    std::string region;
    int nodes = 0;
    std::vector<SimRun> runs;
  };
  void settle(Gang& g, int64_t now) const;  // finishes a gang whose work is done

  const Clock& clock_;
  SimExecutorOptions opt_;
  mutable std::mutex mu_;
  std::map<std::string, Gang> gangs_;
};

}  // namespace controller
