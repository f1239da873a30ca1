#include "controller/core/job.h"

#include <cmath>
#include <stdexcept>

namespace controller {

using json = nlohmann::json;

std::string_view to_string(JobState s) {
  switch (s) {
    case JobState::kPending: return "PENDING";
    case JobState::kScheduled: return "SCHEDULED";
    case JobState::kStarting: return "STARTING";
    case JobState::kRunning: return "RUNNING";
    case JobState::kRecovering: return "RECOVERING";
    case JobState::kSuspended: return "SUSPENDED";
    case JobState::kSucceeded: return "SUCCEEDED";
    case JobState::kFailed: return "FAILED";
    case JobState::kCancelled: return "CANCELLED";
  }
  return "UNKNOWN";
}

std::optional<JobState> parse_state(std::string_view name) {
  for (JobState s : kAllStates)
    if (to_string(s) == name) return s;
  return std::nullopt;
}

bool is_terminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

bool is_active(JobState s) {
  return s == JobState::kStarting || s == JobState::kRunning || s == JobState::kRecovering;
}

bool allowed_transition(JobState from, JobState to) {
  using S = JobState;
  if (is_terminal(from) || from == to) return false;
  if (to == S::kFailed || to == S::kCancelled) return true;  // from any live state
  switch (from) {
    case S::kPending: return to == S::kScheduled;
    case S::kScheduled: return to == S::kStarting || to == S::kPending;
    case S::kStarting: return to == S::kRunning || to == S::kRecovering;
    case S::kRunning:
      return to == S::kSucceeded || to == S::kRecovering || to == S::kSuspended ||
             to == S::kPending;  // preempted: checkpointed and requeued
    case S::kRecovering: return to == S::kStarting;
    case S::kSuspended: return to == S::kStarting;
    default: return false;
  }
}

Job::Job(std::string id, std::string tenant, JobSpec spec, int64_t now_ms)
    : id_(std::move(id)), tenant_(std::move(tenant)), spec_(std::make_shared<const JobSpec>(std::move(spec))),
      created_ms_(now_ms), updated_ms_(now_ms) {
  conditions_ = std::vector<Condition>{{JobState::kPending, "Submitted", "accepted and stored", now_ms}};
}

bool Job::transition(JobState to, std::string reason, std::string message, int64_t now_ms) {
  if (!allowed_transition(state_, to)) return false;
  state_ = to;
  updated_ms_ = now_ms;
  // A new list (the job's copies keep theirs).
  std::vector<Condition> cs = *conditions_;
  cs.push_back({to, std::move(reason), std::move(message), now_ms});
  // Keep the history bounded: the first condition and the most recent ones.
  constexpr size_t kMaxConditions = 64;
  if (cs.size() > kMaxConditions) cs.erase(cs.begin() + 1, cs.begin() + 1 + (cs.size() - kMaxConditions));
  conditions_ = std::move(cs);
  return true;
}

namespace {

json change_json(const PlannedChange& c) {
  return {{"at_ms", c.at_ms},           {"from_region", c.from_region}, {"to_region", c.to_region},
          {"from_nodes", c.from_nodes}, {"to_nodes", c.to_nodes},       {"cost_grams", c.cost_grams},
          {"saved_grams", c.saved_grams}, {"why", c.why}};
}

}  // namespace

json placement_document(const PlacementView& p) {
  json w = json::array();
  for (size_t i = 0; i < p.windows.size(); ++i) {
    json x = {p.windows[i].first, p.windows[i].second};
    if (i < p.places.size()) {
      x.push_back(p.places[i].region);
      x.push_back(p.places[i].nodes);
    }
    w.push_back(x);
  }
  json d{{"region", p.region},
         {"policy", p.policy},
         {"start_ms", p.start_ms},
         {"windows", w},
         {"expected_grams", p.expected_grams},
         {"run_now_home_grams", p.run_now_home_grams},
         {"explanation", p.explanation},
         {"cycle", p.cycle}};
  if (!p.changes.empty()) {
    json cs = json::array();
    for (const auto& c : p.changes) cs.push_back(change_json(c));
    d["changes"] = cs;
  }
  return d;
}

namespace {

PlacementView placement_from(const json& j) {
  PlacementView p;
  p.region = j.at("region").get<std::string>();
  p.policy = j.at("policy").get<std::string>();
  p.start_ms = j.at("start_ms").get<int64_t>();
  for (const auto& w : j.at("windows")) {
    p.windows.emplace_back(w.at(0).get<int64_t>(), w.at(1).get<int64_t>());
    if (w.size() >= 4) p.places.push_back({w.at(2).get<std::string>(), w.at(3).get<int>()});
  }
  if (!p.places.empty() && p.places.size() != p.windows.size())
    throw std::runtime_error("placement: windows with and without a region and width");
  for (const auto& c : j.value("changes", json::array()))
    p.changes.push_back({c.at("at_ms").get<int64_t>(), c.at("from_region").get<std::string>(),
                         c.at("to_region").get<std::string>(), c.at("from_nodes").get<int>(),
                         c.at("to_nodes").get<int>(), c.at("cost_grams").get<double>(),
                         c.at("saved_grams").get<double>(), c.at("why").get<std::string>()});
  p.expected_grams = j.at("expected_grams").get<double>();
  p.run_now_home_grams = j.at("run_now_home_grams").get<double>();
  p.explanation = j.at("explanation").get<std::string>();
  p.cycle = j.at("cycle").get<int64_t>();
  return p;
}

// The phase as the API and the store spell it ("" before the first push).
std::string state_text(const Progress& p) { return p.reported ? std::string(greenshard::to_string(p.state)) : ""; }

// A loss not known yet is 0 in the store and the API (as it always was).
json progress_json(const Progress& p) {
  json j = greenshard::to_json(p);
  j["state"] = state_text(p);
  j["loss"] = p.loss.value_or(0);
  j["val_loss"] = p.val_loss.value_or(0);
  j["updated_ms"] = p.updated_ms;
  return j;
}

// Read leniently (the store wrote it): a missing field keeps its default.
Progress progress_from(const json& j) {
  Progress p;
  if (const std::string s = j.value("state", ""); !s.empty()) {
    const auto phase = greenshard::parse_run_phase(s);
    if (!phase) throw std::runtime_error("progress.state: not a run phase: '" + s + "'");
    p.state = *phase;
    p.reported = true;
  }
  p.step = j.value("step", int64_t{0});
  p.total_steps = j.value("total_steps", int64_t{0});
  p.tokens = j.value("tokens", int64_t{0});
  p.loss = j.value("loss", 0.0);
  p.val_loss = j.value("val_loss", 0.0);
  p.tokens_per_s = j.value("tokens_per_s", 0.0);
  p.mfu = j.value("mfu", 0.0);
  p.eta_s = j.value("eta_s", 0.0);
  p.energy_joules = j.value("energy_joules", 0.0);
  p.operational_grams = j.value("operational_grams", 0.0);
  p.embodied_grams = j.value("embodied_grams", 0.0);
  p.message = j.value("message", "");
  p.updated_ms = j.value("updated_ms", int64_t{0});
  return p;
}

}  // namespace

json conditions_document(const std::vector<Condition>& conditions) {
  json conds = json::array();
  for (const auto& c : conditions)
    conds.push_back({{"state", to_string(c.state)}, {"reason", c.reason},
                     {"message", c.message}, {"time_ms", c.time_ms}});
  return conds;
}

json Job::document_core() const {
  json d{{"id", id_},
         {"tenant", tenant_},
         {"state", to_string(state_)},
         {"created_ms", created_ms_},
         {"updated_ms", updated_ms_},
         {"progress", progress_json(progress)},
         {"recovery_count", recovery_count},
         {"failure_reason", failure_reason},
         {"idempotency_key", idempotency_key},
         {"body_hash", body_hash},
         {"worker_token", worker_token},
         {"next_attempt_ms", next_attempt_ms},
         {"runtime", runtime}};
  if (!gang.region.empty())
    d["gang"] = {{"region", gang.region}, {"nodes", gang.nodes}, {"window", gang.window}};
  if (stop.requested())
    d["stop"] = {{"intent", to_string(stop.intent)}, {"message", stop.message}, {"preempted_by", stop.preempted_by}};
  if (!waiting_reason.empty()) d["waiting_reason"] = waiting_reason;
  return d;
}

json Job::to_document() const {
  json d = document_core();
  d["spec"] = spec_->to_json();
  d["conditions"] = conditions_document(*conditions_);
  if (placement) d["placement"] = placement_document(*placement);
  return d;
}

std::string_view to_string(StopIntent i) {
  switch (i) {
    case StopIntent::kNone: return "";
    case StopIntent::kWindowEnd: return "window_end";
    case StopIntent::kPreempted: return "preempted";
  }
  return "";
}

Job Job::from_document(const json& d) {
  try {
    Job j;
    j.id_ = d.at("id").get<std::string>();
    j.tenant_ = d.at("tenant").get<std::string>();
    j.spec_ = std::make_shared<const JobSpec>(parse_job_spec(d.at("spec")));
    auto st = parse_state(d.at("state").get<std::string>());
    if (!st) throw std::runtime_error("unknown state '" + d.at("state").get<std::string>() + "'");
    j.state_ = *st;
    j.created_ms_ = d.at("created_ms").get<int64_t>();
    j.updated_ms_ = d.at("updated_ms").get<int64_t>();
    std::vector<Condition> conds;
    for (const auto& c : d.at("conditions")) {
      auto cs = parse_state(c.at("state").get<std::string>());
      if (!cs) throw std::runtime_error("unknown condition state");
      conds.push_back({*cs, c.at("reason").get<std::string>(), c.at("message").get<std::string>(),
                       c.at("time_ms").get<int64_t>()});
    }
    j.conditions_ = std::move(conds);
    j.progress = progress_from(d.value("progress", json::object()));
    j.recovery_count = d.value("recovery_count", 0);
    j.failure_reason = d.value("failure_reason", "");
    j.idempotency_key = d.value("idempotency_key", "");
    j.body_hash = d.value("body_hash", "");
    j.worker_token = d.value("worker_token", "");
    j.next_attempt_ms = d.value("next_attempt_ms", int64_t{0});
    j.runtime = d.value("runtime", json::object());
    if (d.contains("stop")) {
      const json& s = d["stop"];
      const std::string intent = s.at("intent").get<std::string>();
      if (intent == to_string(StopIntent::kWindowEnd)) j.stop.intent = StopIntent::kWindowEnd;
      else if (intent == to_string(StopIntent::kPreempted)) j.stop.intent = StopIntent::kPreempted;
      else throw std::runtime_error("stop.intent: unknown '" + intent + "'");
      j.stop.message = s.value("message", "");
      j.stop.preempted_by = s.value("preempted_by", "");
    }
    j.waiting_reason = d.value("waiting_reason", "");
    // Stores written before these were typed kept them in the runtime blob
    // ("suspending", "suspend_message", "preempted_by", "deferred"): carried
    // over, so a stop asked before an upgrade still means what it meant.
    if (j.runtime.is_object()) {
      if (j.runtime.value("suspending", json(false)) == true && !j.stop.requested()) {
        j.stop.preempted_by = j.runtime.value("preempted_by", "");
        j.stop.intent = j.stop.preempted_by.empty() ? StopIntent::kWindowEnd : StopIntent::kPreempted;
        j.stop.message = j.runtime.value("suspend_message", "");
      }
      if (j.waiting_reason.empty()) j.waiting_reason = j.runtime.value("deferred", "");
      for (const char* legacy : {"suspending", "suspend_message", "preempted_by", "deferred"}) j.runtime.erase(legacy);
    }
    if (d.contains("gang")) {
      const json& g = d["gang"];
      j.gang = {g.at("region").get<std::string>(), g.at("nodes").get<int>(), g.at("window").get<int>()};
    }
    if (d.contains("placement")) j.placement = placement_from(d["placement"]);
    return j;
  } catch (const ApiError& e) {
    throw std::runtime_error(std::string("job document: spec: ") + e.what());
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("job document: ") + e.what());
  }
}

Progress parse_worker_status(const json& b) {
  Progress p;
  try {
    static_cast<greenshard::StatusPush&>(p) = greenshard::read_status_push(b);
  } catch (const greenshard::StatusPushError& e) {
    if (e.code == "unknown_field") throw ApiError(400, e.code, "unknown field " + quote_untrusted(e.field), e.field);
    throw ApiError(400, e.code, e.what(), e.field);
  }
  p.reported = true;
  return p;
}

json job_view(const Job& job) {
  json conds = json::array();
  for (const auto& c : job.conditions())
    conds.push_back({{"state", to_string(c.state)}, {"reason", c.reason},
                     {"message", c.message}, {"time", format_rfc3339(c.time_ms)}});
  json v{{"id", job.id()},
         {"tenant", job.tenant()},
         {"state", to_string(job.state())},
         {"spec", job.spec().to_json()},
         {"created", format_rfc3339(job.created_ms())},
         {"updated", format_rfc3339(job.updated_ms())},
         {"conditions", conds},
         {"recovery_count", job.recovery_count},
         {"failure_reason", job.failure_reason},
         {"placement", nullptr}};
  if (job.placement) {
    const auto& p = *job.placement;
    json w = json::array();
    for (size_t i = 0; i < p.windows.size(); ++i) {
      const WindowPlace at = window_place(job, i);
      w.push_back({{"start", format_rfc3339(p.windows[i].first)},
                   {"end", format_rfc3339(p.windows[i].second)},
                   {"region", at.region},
                   {"nodes", at.nodes}});
    }
    json cs = json::array();
    for (const auto& c : p.changes)
      cs.push_back({{"at", format_rfc3339(c.at_ms)},
                    {"from_region", c.from_region},
                    {"to_region", c.to_region},
                    {"from_nodes", c.from_nodes},
                    {"to_nodes", c.to_nodes},
                    {"resize", c.from_nodes != c.to_nodes},
                    {"move", c.from_region != c.to_region},
                    {"cost_grams", c.cost_grams},
                    {"saved_grams", c.saved_grams},
                    {"why", c.why}});
    v["placement"] = {{"region", p.region},
                      {"changes", cs},
                      {"policy", p.policy},
                      {"start", format_rfc3339(p.start_ms)},
                      {"windows", w},
                      {"expected_grams", p.expected_grams},
                      {"run_now_home_grams", p.run_now_home_grams},
                      {"grams_avoided", p.run_now_home_grams - p.expected_grams},
                      {"explanation", p.explanation},
                      {"cycle", p.cycle}};
  }
  const auto& pr = job.progress;
  v["progress"] = {{"state", state_text(pr)},         {"step", pr.step},
                   {"total_steps", pr.total_steps}, {"tokens", pr.tokens},
                   {"loss", pr.loss.value_or(0)}, {"val_loss", pr.val_loss.value_or(0)},
                   {"tokens_per_s", pr.tokens_per_s}, {"mfu", pr.mfu},
                   {"eta_s", pr.eta_s},         {"message", pr.message}};
  // Why a PENDING job waits, as the scheduler last recorded it.
  v["waiting"] = nullptr;
  const std::string& why = job.waiting_reason;
  if (job.state() == JobState::kPending && !why.empty()) {
    const std::string quota = "QuotaExceeded: ";
    const bool over = why.rfind(quota, 0) == 0;
    v["waiting"] = {{"reason", over                                     ? "QuotaExceeded"
                               : why.rfind("waiting for capacity", 0) == 0 ? "WaitingForCapacity"
                                                                           : "WaitingForIntensityData"},
                    {"message", over ? why.substr(quota.size()) : why}};
  }
  v["gang"] = nullptr;
  if (!job.gang.region.empty())
    v["gang"] = {{"region", job.gang.region}, {"nodes", job.gang.nodes}, {"window", job.gang.window}};
  v["energy"] = {{"joules", pr.energy_joules},
                 {"operational_grams", pr.operational_grams},
                 {"embodied_grams", pr.embodied_grams},
                 {"total_grams", pr.operational_grams + pr.embodied_grams}};
  return v;
}

bool holds_reservation(JobState s) {
  switch (s) {
    case JobState::kScheduled:
    case JobState::kStarting:
    case JobState::kRunning:
    case JobState::kRecovering:
    case JobState::kSuspended:
      return true;
    default:
      return false;
  }
}

WindowPlace window_place(const Job& job, size_t i) {
  const PlacementView& p = *job.placement;
  if (i < p.places.size()) return p.places[i];
  return {p.region, job.spec().nodes};
}

std::string gang_region(const Job& job) {
  if (!job.gang.region.empty()) return job.gang.region;
  if (!job.placement) return "";
  return job.placement->windows.empty() ? job.placement->region : window_place(job, 0).region;
}

int gang_nodes(const Job& job) {
  if (job.gang.nodes > 0) return job.gang.nodes;
  if (!job.placement || job.placement->windows.empty()) return job.spec().nodes;
  return window_place(job, 0).nodes;
}

std::vector<Reservation> reservations_of(const Job& job) {
  std::vector<Reservation> out;
  if (!holds_reservation(job.state()) || !job.placement) return out;
  const auto& w = job.placement->windows;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i].second <= w[i].first) continue;
    const WindowPlace at = window_place(job, i);
    out.push_back({job.id(), at.region, w[i].first, w[i].second, at.nodes});
  }
  return out;
}

}  // namespace controller
