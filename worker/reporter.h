// Everything a training run reports, so that the step loop has no output
// code: the log (text, JSON lines, or a tty progress line), the Prometheus
// exporter, energy metering and emissions accounting (at the log cadence),
// the status push to the controller, and the run's summary files.
// No LibTorch here: the collectives it needs come in as functions.
#pragma once

#include "worker/spec/job_spec.h"
#include "worker/run_state.h"
#include "worker/spec/run_summary.h"
#include "worker/spec/status_push.h"

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace greenshard {

class StatusPusher;

// What one optimizer step did (trainer.cpp's train_step), the same on every rank.
struct StepResult {
  double loss = NAN;              // mean over ranks and micro-batches
  double lr = 0;
  double grad_norm = NAN;         // before clipping; NaN when not clipping
  double seconds = 0;             // wall time of the step
  double collective_seconds = 0;  // its closing all-reduce (loss, preemption)
  bool preempt = false;           // some rank got SIGTERM or SIGINT
};

struct ReporterContext {
  int rank = 0, world = 1, local_world_size = 1;
  int nvml_index = -1;            // this rank's GPU for NVML (-1: none)
  std::string hardware;           // carbon hardware profile
  double peak_flops = 0;          // per rank; 0 = MFU not reported
  double flops_per_token = 0;
  double tokens_per_rank_step = 0;   // B * T * grad_accum
  // Collective: element-wise sums over all ranks.
  std::function<std::vector<double>(std::vector<double>)> sum_over_ranks;
  // The FSDP runtime's peak unsharded bytes (for the memory gauge).
  std::function<double()> unsharded_peak_bytes;
};

class Reporter {
 public:
  // `pusher` (rank 0 with status.url set; else null) receives the status
  // pushes; `last_status` always holds the newest, so the caller can turn
  // it into a "failed" one if the run throws.
  Reporter(const JobConfig& cfg, ReporterContext ctx, StatusPusher* pusher,
           std::optional<StatusPush>& last_status);
  ~Reporter();

  // Rank 0 prints `line`.
  void say(const std::string& line) const;
  // The totals before this run (a resumed checkpoint's, or zeros).
  void begin(const RunState& base);
  // After every step (all ranks, same order: it may account, a collective).
  void on_step(const StepResult& r, RunState& st);
  // A validation loss (mean over ranks; NaN = none).
  void on_validation(double val_loss, RunState& st);
  // Collective: meters energy, folds it into st's totals.
  void account(RunState& st);
  // Rank 0 only (the others return): the summary and termination log, the
  // final status push. Call account() first.
  void finish(RunEnd end, RunState& st, int64_t resumed_from);
  // Wall time of the whole job: the resumed run's total plus this run's.
  double wall_s() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The status push that tells the controller a run failed: `last_status`
// (a Reporter's newest push, or nullopt before the first step) with state
// failed, eta 0 and the message (cut to fit kStatusMessageMaxBytes).
StatusPush failed_status(const std::optional<StatusPush>& last_status, int64_t total_steps,
                         const std::string& message);

}  // namespace greenshard
