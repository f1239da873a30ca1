// The run summary: how a finished run ended and what it did. Written by the
// worker's reporter (rank 0, worker/reporter.cpp: summary.json, and in a
// Kubernetes pod the termination log), read by the controller (its local
// and Kubernetes executors, whose GangStatus carries it to the scheduler).
// One struct, one writer, one reader. No LibTorch (greenshard_spec, worker/spec/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace greenshard {

// How a run that exited 0 ended. A failed run writes no summary (its last
// status push and exit code say so).
enum class RunEnd {
  kSucceeded,  // every step done
  kPreempted,  // SIGTERM: checkpointed, to be resumed
};
std::string_view to_string(RunEnd e);                 // "succeeded", "preempted"
std::optional<RunEnd> parse_run_end(std::string_view s);  // nullopt: not one of to_string's

struct RunSummary {
  RunEnd state = RunEnd::kSucceeded;
  // The counters the controller takes into the job's progress. nullopt:
  // left out of the summary read (the reporter writes them all), or
  // final_val_loss of a run that never evaluated (written as null).
  std::optional<int64_t> steps, tokens;
  std::optional<double> final_val_loss, energy_joules, operational_grams, embodied_grams;
};

// The fields above as JSON (nullopt as null): the termination log as it is,
// and the head of summary.json, which adds fields for people and tools.
nlohmann::json to_json(const RunSummary& s);

// summary.json or a termination log: an object whose "state" is one of
// RunEnd's spellings and whose fields above, where present and not null,
// are numbers >= 0, the counters integers that fit int64 (other fields are
// ignored). Otherwise nullopt, with *error
// naming the field ("state: expected succeeded or preempted, got 'done'")
// when error is not null.
std::optional<RunSummary> read_run_summary(const nlohmann::json& j, std::string* error);

// The longest summary text read: summary.json is well under 1 KiB, and a
// Kubernetes termination log at most 4096 bytes.
inline constexpr size_t kMaxRunSummaryBytes = 64 * 1024;

// The text of summary.json or of a termination log (the worker writes it,
// the executors read it: input like any other), read as read_run_summary
// reads JSON. nullopt, with *error when error is not null, when it is longer
// than kMaxRunSummaryBytes, is not JSON, or is not a summary. A summary is
// flat: containers nested in it are skipped while parsing, never built, so
// no depth of nesting costs stack or memory.
std::optional<RunSummary> parse_run_summary(std::string_view text, std::string* error);

}  // namespace greenshard
