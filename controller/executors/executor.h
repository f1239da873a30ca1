// Executor: starts, watches and stops one job's gang of workers.
//
// The scheduler is the only caller (from its cycle thread) except logs(),
// which the API may call concurrently; implementations are thread-safe.
//
// Contract:
//   - start() launches every rank (or creates the cluster objects) and
//     returns; it throws std::runtime_error when nothing could be launched
//     (the scheduler then treats it as a failed attempt);
//   - poll() is non-blocking; once a gang ends it reports kSucceeded,
//     kPreempted (exit 0 with summary state "preempted": the worker saved a
//     checkpoint on SIGTERM), kConfigError (exit 2: retrying will not help)
//     or kFailed (any other failure; the whole gang has been stopped);
//   - when one rank fails the executor stops the others (a gang lives and
//     dies together);
//   - stop() asks the gang to end (SIGTERM / delete with a grace period),
//     escalating to SIGKILL after `grace`; it returns at once, and the
//     executor keeps reaping in poll()/reap() until nothing is left;
//   - adopt() is called at controller start for every job the store says is
//     STARTING/RUNNING on this executor: it returns true when the gang is
//     still alive and now watched again, false when it is gone (the
//     scheduler then restarts it from checkpoint).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "controller/core/api_types.h"
#include "worker/spec/run_summary.h"

namespace controller {

struct GangSpec {
  std::string job_id;
  JobSpec spec;
  std::string region;
  int attempt = 0;             // 0 for the first start, +1 per restart
  std::string status_url;      // the controller's POST /v1/jobs/{id}/status
  std::string status_token;    // per-job worker token
  double intensity = 0;        // gCO2e/kWh now in the region
  double pue = 1.0;
  std::string intensity_url;   // optional GREENSHARD_INTENSITY_URL
  // This run's width: the placement window's nodes (an elastic job's may
  // differ from spec.nodes); 0 = spec.nodes. Executors launch width() x
  // spec.procs_per_node ranks; the worker reshards its checkpoint to them.
  int nodes = 0;
  int width() const { return nodes > 0 ? nodes : spec.nodes; }
};

enum class GangPhase { kStarting, kRunning, kSucceeded, kPreempted, kConfigError, kFailed, kUnknown };
std::string_view to_string(GangPhase p);

struct GangStatus {
  GangPhase phase = GangPhase::kUnknown;
  std::string message;         // why it ended ("rank 1 killed by signal 9")
  // The worker's run summary (worker/run_summary.h), when it wrote one
  // that read_run_summary accepts.
  std::optional<greenshard::RunSummary> summary;
  nlohmann::json runtime;      // bookkeeping to persist (pgid, pids, k8s uid)
};

// adopt()'s inputs beside the runtime the executor returned.
struct AdoptOptions {
  std::chrono::milliseconds grace{30000};  // SIGTERM -> SIGKILL for a gang adopt() stops
  // The scheduler had asked this gang to stop (Job::stop): its end,
  // including its disappearance while the controller was down, is the stop
  // done (kPreempted), not a lost gang.
  bool stop_requested = false;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string kind() const = 0;  // "local" | "kubernetes"
  virtual GangStatus start(const GangSpec& gang) = 0;
  virtual GangStatus poll(const std::string& job_id) = 0;
  virtual void stop(const std::string& job_id, std::chrono::milliseconds grace) = 0;
  virtual bool adopt(const std::string& job_id, const nlohmann::json& runtime, const AdoptOptions& options) = 0;
  // Escalates overdue stops to SIGKILL and reaps stopped gangs; called once
  // per scheduler cycle.
  virtual void tick() = 0;
  // True when nothing of `job_id` is left running (after stop + tick).
  virtual bool gone(const std::string& job_id) = 0;
  // Rank `rank`'s log from byte `offset`; nullopt when there is no such log.
  virtual std::optional<std::string> logs(const std::string& job_id, int rank, int64_t offset,
                                          int64_t max_bytes) = 0;
};

}  // namespace controller
