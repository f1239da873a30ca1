// Rank 0's progress push: the body of POST /v1/jobs/{id}/status. Written by
// the worker's reporter (worker/reporter.cpp, sent by StatusPusher,
// worker/status.h), read by the controller's API (controller/api/api.cpp),
// which keeps it as the job's progress. One struct, one writer, one reader.
// No LibTorch (greenshard_spec).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "worker/spec/run_summary.h"

namespace greenshard {

// Where the run is, as its rank 0 tells it.
enum class RunPhase { kRunning, kSucceeded, kPreempted, kFailed };
inline constexpr RunPhase kAllRunPhases[] = {RunPhase::kRunning, RunPhase::kSucceeded, RunPhase::kPreempted,
                                             RunPhase::kFailed};
std::string_view to_string(RunPhase p);                    // "running", "succeeded", "preempted", "failed"
std::optional<RunPhase> parse_run_phase(std::string_view s);  // nullopt: not one of to_string's

// The phase of a run that ended as `e` says (its summary's state).
RunPhase phase_of(RunEnd e);

// The longest message the controller takes, in bytes.
inline constexpr size_t kStatusMessageMaxBytes = 4096;

struct StatusPush {
  RunPhase state = RunPhase::kRunning;
  int64_t step = 0, total_steps = 0, tokens = 0;
  // nullopt: not known yet (no step done, no evaluation yet); sent as null.
  std::optional<double> loss, val_loss;
  double tokens_per_s = 0, mfu = 0, eta_s = 0;
  double energy_joules = 0, operational_grams = 0, embodied_grams = 0;
  std::string message;  // why a run failed; "" otherwise
};

nlohmann::json to_json(const StatusPush& s);

// A body read_status_push refuses: `code` is the API's error code
// (invalid_body, invalid_field, unknown_field, missing_field) and `field`
// the field at fault ("" for the body as a whole). An unknown field's key is
// the sender's text, unquoted: the message is just "unknown field", and the
// caller shows the key as it shows untrusted text.
struct StatusPushError : std::invalid_argument {
  StatusPushError(std::string code_, const std::string& message, std::string field_)
      : std::invalid_argument(message), code(std::move(code_)), field(std::move(field_)) {}
  std::string code, field;
};

// The pushed JSON: an object with "state" (one of RunPhase's spellings),
// counters that are integers >= 0, measures that are finite numbers >= 0,
// a "message" string of at most kStatusMessageMaxBytes, and nothing else.
// null stands for "not known yet" in every field but state and message (a
// null counter or measure reads as 0, a null loss as nullopt). Throws
// StatusPushError naming the first field at fault.
StatusPush read_status_push(const nlohmann::json& body);

}  // namespace greenshard
