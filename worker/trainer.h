// The training loop of one rank (see trainer.cpp, which reads top to
// bottom: set-up, resume, then one iteration per step with its log line).
#pragma once

#include "worker/spec/job_spec.h"

#include <string>

namespace greenshard {

// Exit codes (docs/worker-controller.md).
constexpr int kExitOk = 0;          // succeeded, or preempted after a checkpoint
constexpr int kExitBadConfig = 2;   // bad configuration: retrying will not help
constexpr int kExitFailure = 1;     // anything else

// Runs one rank of the job (RANK, WORLD_SIZE, MASTER_ADDR... in the
// environment, or a one-rank standalone run). Returns the exit code.
int train(const JobConfig& config);

// Installs SIGTERM/SIGINT handlers that ask the loop to checkpoint and stop.
void install_preemption_handlers();

}  // namespace greenshard
