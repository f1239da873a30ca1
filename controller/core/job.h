// Job and JobState: the job lifecycle and its allowed transitions.
//
//   PENDING ─► SCHEDULED ─► STARTING ─► RUNNING ─► SUCCEEDED
//      │           │  ▲         │          │ ▲
//      │           │  └─ requeue│          │ └──────────────┐
//      │           ▼            ▼          ▼                │
//      │       (PENDING)    RECOVERING ◄───┤          SUSPENDED
//      │                        │          └─────────►  (interruptible, between
//      ▼                        ▼                        carbon windows)
//   RUNNING ─► PENDING: preempted for a higher-priority job (it checkpointed;
//   placed again, it resumes from that checkpoint).
//   FAILED | CANCELLED from every non-terminal state.
//
// A Job's state can only change through Job::transition(), which refuses any
// edge not in the table below (allowed_transition). There is no setter, so an
// illegal transition cannot be written anywhere in the controller; the store
// persists what a Job holds and restores it with Job::restore(), which checks
// that the state name is known.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "controller/core/api_types.h"
#include "controller/core/shared_value.h"
#include "worker/spec/status_push.h"

namespace controller {

enum class JobState {
  kPending,
  kScheduled,
  kStarting,
  kRunning,
  kRecovering,
  kSuspended,
  kSucceeded,
  kFailed,
  kCancelled,
};

inline constexpr JobState kAllStates[] = {
    JobState::kPending,    JobState::kScheduled, JobState::kStarting,
    JobState::kRunning,    JobState::kRecovering, JobState::kSuspended,
    JobState::kSucceeded,  JobState::kFailed,    JobState::kCancelled};

// "PENDING", "SCHEDULED", ... (the API spelling).
std::string_view to_string(JobState s);
// Inverse of to_string; nullopt for an unknown name (case-sensitive).
std::optional<JobState> parse_state(std::string_view name);

bool is_terminal(JobState s);
// True while the job holds (or is acquiring) executor resources.
bool is_active(JobState s);
// The one table of legal edges. A self-edge is never legal.
bool allowed_transition(JobState from, JobState to);

// One entry of a job's history: the state it entered, why, and when.
struct Condition {
  JobState state = JobState::kPending;
  std::string reason;   // CamelCase machine word: "Submitted", "Placed", ...
  std::string message;  // human sentence
  int64_t time_ms = 0;  // unix ms
};

// Where and how wide one placement window runs (elastic and migratable
// jobs; see PlacementView::places).
struct WindowPlace {
  std::string region;
  int nodes = 0;
  bool operator==(const WindowPlace&) const = default;
};

// A change of width or region between two consecutive windows, as placement
// planned it (carbon::PlanChange, in nodes and unix ms).
struct PlannedChange {
  int64_t at_ms = 0;                   // start of the later window
  std::string from_region, to_region;  // equal: no move
  int from_nodes = 0, to_nodes = 0;    // equal: no resize
  double cost_grams = 0;               // the change's own grams
  double saved_grams = 0;              // grams it avoids (may be < 0)
  std::string why;                     // one sentence
  bool operator==(const PlannedChange&) const = default;
};

// The placement decision as exposed in the API (what carbon/ decided).
struct PlacementView {
  std::string region;                  // where the first window runs
  std::string policy;         // "carbon-window", "run-now-home", ...
  int64_t start_ms = 0;       // when the first window opens
  std::vector<std::pair<int64_t, int64_t>> windows;  // [start, end) unix ms
  double expected_grams = 0;  // for the chosen plan
  double run_now_home_grams = 0;  // baseline: start now in the home region
  std::string explanation;
  int64_t cycle = 0;          // scheduler cycle that decided
  // Per window (same size as `windows`): its region and width. Empty for a
  // job that runs every window in `region` on spec.nodes (and for documents
  // written before elastic jobs): use window_place().
  std::vector<WindowPlace> places;
  std::vector<PlannedChange> changes;  // one per change between windows
};

// Capacity a job holds in its region for one planned run window [start, end).
struct Reservation {
  std::string job_id, region;
  int64_t start_ms = 0, end_ms = 0;
  int nodes = 0;
  bool operator==(const Reservation&) const = default;
};


// Where the job's gang runs, or last ran: set when a gang is launched,
// kept while it is down (SUSPENDED, RECOVERING) so the next launch knows
// what changes. window: the placement window it was launched for (-1: none,
// e.g. a document from before elastic jobs, or a placement made since).
struct GangPlace {
  std::string region;   // "" = never launched
  int nodes = 0;
  int window = -1;
  bool operator==(const GangPlace&) const = default;
};

// A stop the scheduler asked of a job's running gang, kept until the gang is
// down: what the gang's end then means (SUSPENDED at a window's end, or back
// to PENDING for the job it was preempted for) and the condition to record.
enum class StopIntent { kNone, kWindowEnd, kPreempted };
std::string_view to_string(StopIntent i);  // "" | "window_end" | "preempted"
struct StopRequest {
  StopIntent intent = StopIntent::kNone;
  std::string message;       // the condition's message once the gang is down
  std::string preempted_by;  // kPreempted: the waiting job it makes room for
  bool requested() const { return intent != StopIntent::kNone; }
  bool operator==(const StopRequest&) const = default;
};

// What the worker last pushed (docs/worker-controller.md "Status push"):
// the newest status push of the job's rank 0 (worker/spec/status_push.h),
// or what its run summary said once it ended.
struct Progress : greenshard::StatusPush {
  bool reported = false;  // false: nothing pushed or summarised yet (state means nothing)
  int64_t updated_ms = 0;
};

class Job {
 public:
  // A new job in PENDING with a "Submitted" condition.
  Job(std::string id, std::string tenant, JobSpec spec, int64_t now_ms);

  const std::string& id() const { return id_; }
  const std::string& tenant() const { return tenant_; }
  const JobSpec& spec() const { return *spec_; }
  JobState state() const { return state_; }
  int64_t created_ms() const { return created_ms_; }
  int64_t updated_ms() const { return updated_ms_; }
  const std::vector<Condition>& conditions() const { return *conditions_; }

  // Moves to `to` and records a condition. Returns false (and changes
  // nothing) when the edge is not allowed.
  [[nodiscard]] bool transition(JobState to, std::string reason,
                                std::string message, int64_t now_ms);

  // Mutable per-job data that does not affect the lifecycle. The
  // placement is replaced whole when re-planned, and shared by the job's
  // copies until then.
  SharedValue<PlacementView> placement;
  Progress progress;
  int recovery_count = 0;
  std::string failure_reason;
  int64_t seq = 0;                 // store insertion order (pagination)
  std::string idempotency_key;     // "" when none
  std::string body_hash;           // sha256 of the canonical spec
  std::string worker_token;        // per-job token for the status push
  int64_t next_attempt_ms = 0;     // RECOVERING: earliest restart (backoff)
  GangPlace gang;                  // the current (or last) gang's region and width
  StopRequest stop;                // the scheduler's stop of the running gang (none: not stopping)
  std::string waiting_reason;      // PENDING: why it waits, as last recorded ("" = not deferred)
  nlohmann::json runtime = nlohmann::json::object();  // the executor's bookkeeping, opaque here

  // Whole-job document for the store (everything, including the state):
  // document_core() with "spec" (JobSpec::to_json), "conditions"
  // (conditions_document) and, when placed, "placement"
  // (placement_document). The store adds those three from texts it makes
  // once per value: the spec never changes, and the conditions and the
  // placement are replaced whole (shared_conditions(), placement).
  nlohmann::json to_document() const;
  nlohmann::json document_core() const;
  const std::shared_ptr<const JobSpec>& shared_spec() const { return spec_; }
  const SharedValue<std::vector<Condition>>& shared_conditions() const { return conditions_; }
  // Rebuilds a job from to_document(); throws std::runtime_error on a
  // malformed document or an unknown state name.
  static Job from_document(const nlohmann::json& doc);

 private:
  Job() = default;
  std::string id_, tenant_;
  // Never changes after submission: copies of a job (Registry snapshots)
  // share it.
  std::shared_ptr<const JobSpec> spec_ = std::make_shared<const JobSpec>();
  JobState state_ = JobState::kPending;
  int64_t created_ms_ = 0, updated_ms_ = 0;
  // Appended to by transition() (a new vector each time); shared by the
  // job's copies until then.
  SharedValue<std::vector<Condition>> conditions_ = std::vector<Condition>{};
};

// The "placement" and "conditions" values of a job's document
// (Job::to_document).
nlohmann::json placement_document(const PlacementView& p);
nlohmann::json conditions_document(const std::vector<Condition>& conditions);

// Window i's region and width (PlacementView::places, else the placement's
// region at spec.nodes). Requires a placement and i < windows.size().
WindowPlace window_place(const Job& job, size_t i);
// The region and width of the job's current (or last) gang: Job::gang once
// launched, else the first window's.
std::string gang_region(const Job& job);
int gang_nodes(const Job& job);

// True in the states whose placement windows hold capacity: SCHEDULED,
// STARTING, RUNNING, RECOVERING and SUSPENDED. PENDING (not placed, or
// released to be placed again) and the ended states hold none.
bool holds_reservation(JobState s);
// The job's reservations: one per placement window (its region and width,
// window_place) while holds_reservation(state), none otherwise. The store keeps them in their own
// table, written in the same transaction as the job.
std::vector<Reservation> reservations_of(const Job& job);

// Parses a worker status push (docs/worker-controller.md "Status push"):
// an object; `state` required (running | succeeded | preempted | failed);
// counters are integers >= 0, rates finite numbers >= 0 (null = not known
// yet, e.g. val_loss before the first evaluation); `message` at most 4096
// bytes; unknown fields are errors naming the field. Throws ApiError 400.
Progress parse_worker_status(const nlohmann::json& body);

// JobView: the API rendering of a job (GET /v1/jobs/{id}).
nlohmann::json job_view(const Job& job);

}  // namespace controller
