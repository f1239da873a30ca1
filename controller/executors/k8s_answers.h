// Readers of the Kubernetes API's answers about a gang (an Indexed Job and
// its pods), and the mapping from them to a GangPhase. Pure functions of the
// answers' bodies, no HTTP: the Kubernetes executor (executor_k8s.cpp) calls
// them on what the API server sent, and fuzz_k8s_answers calls the same
// functions on fuzz input.
//
// Contract: nothing here throws on any answer. A body that is not a JSON
// object reads as an empty object; a field of another type than the API's
// reads as absent.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "controller/executors/executor.h"

namespace controller::k8s {

// The body of an answer as a JSON object ({} when it is not one).
nlohmann::json parse_object(const std::string& body);

// Tolerant readers: o[k] when o is an object and o[k] has that type (for
// int_at: an integer within int's range), else the default.
std::string string_at(const nlohmann::json& o, const char* k);
int int_at(const nlohmann::json& o, const char* k, int dflt);

// What a Job object says.
struct JobAnswer {
  enum class End { kNone, kComplete, kFailed };
  End end = End::kNone;        // the first condition Complete/Failed with status "True"
  std::string end_why;         // that condition's reason and message
  std::string uid;             // metadata.uid
  bool deleting = false;       // metadata.deletionTimestamp is set
  bool suspended = false;      // spec.suspend (Kueue has not admitted it)
  int want = 1;                // spec.parallelism, else spec.completions, else 1
  int active = 0, succeeded = 0;
  int ready = 0;               // status.ready; clusters without it: status.active
};
JobAnswer read_job(const nlohmann::json& job);

// What the pods of an ended Job tell.
struct PodsVerdict {
  bool config_error = false;  // a worker exited 2
  bool disrupted = false;     // a pod with DisruptionTarget=True (eviction, preemption, drain)
  bool only_killed = true;    // every non-zero exit is 137 or 143 (SIGKILL / SIGTERM)
  // The worker's run summary, from a termination message (the lowest
  // index's when several wrote one).
  std::optional<greenshard::RunSummary> summary;
  std::string failure;        // "pod P (index I) exited N: <last line>", the first failure (exit 2 first)
  bool failure_is_config = false;
};
PodsVerdict read_pods(const nlohmann::json& pod_list);

// metadata.name of a pod list's first item ("" when there is none).
std::string first_pod_name(const nlohmann::json& pod_list);

// poll()'s answer for Job `name`, and what the executor does next.
struct Decision {
  GangStatus status;                 // phase, message, summary (runtime: the executor's)
  bool forget = false;               // the gang ended: stop watching it
  const char* remove = nullptr;      // delete the Job with this propagation ("Background", "Foreground")
};

// The Job answered HTTP `code` (0: no answer) with `job`; `pods` is read
// only when the Job ended (the executor fetches the pods then, and passes
// an empty verdict otherwise). `stop_requested`: the controller asked the gang
// to stop; `last`: the phase reported before (kept while the API cannot
// answer). The mapping (docs/controller.md, "Kubernetes: how a gang's end is read"):
//   Job 404, stop requested               -> kPreempted (stopped as asked)
//   Job 404, not requested                -> kFailed (deleted by someone else)
//   Complete, stop requested              -> kPreempted
//   Complete, summary state "preempted"   -> kPreempted
//   Complete, a pod disrupted (exit 0)    -> kPreempted
//   Complete otherwise                    -> kSucceeded
//   Failed, a worker exited 2             -> kConfigError
//   Failed, stop requested, only exits 137/143 -> kPreempted (killed after the grace)
//   Failed otherwise                      -> kFailed (and the Job is removed: the gang restarts as a new one)
//   suspended (Kueue) or a pod not ready  -> kStarting
//   every pod ready (or active)           -> kRunning
//   the API cannot answer                 -> the last phase reported
// A running gang whose stop was requested but whose Job is not being deleted
// gets its delete again (remove = the stop's propagation).
Decision decide(const std::string& name, int code, const JobAnswer& job, const PodsVerdict& pods,
                bool stop_requested, GangPhase last);

// The propagation a stop's delete uses: Foreground, so that the Job stays
// visible (with a deletionTimestamp) until its pods have ended.
inline constexpr const char* kStopPropagation = "Foreground";

}  // namespace controller::k8s
