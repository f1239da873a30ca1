// Readers of the Kubernetes API's Job and pod answers (see k8s_answers.h).
#include "controller/executors/k8s_answers.h"

#include <cstdint>
#include <cstdlib>

#include "worker/spec/job_spec.h"  // config_error_in

namespace controller::k8s {

using json = nlohmann::json;

namespace {

// o[k] when it is an object, else {}.
const json& obj(const json& o, const char* k) {
  static const json empty = json::object();
  if (!o.is_object()) return empty;
  auto it = o.find(k);
  return it != o.end() && it->is_object() ? *it : empty;
}

std::string last_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  const size_t nl = s.find_last_of('\n');
  if (nl != std::string::npos) s = s.substr(nl + 1);
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

}  // namespace

std::string string_at(const json& o, const char* k) {
  if (!o.is_object()) return "";
  auto it = o.find(k);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

int int_at(const json& o, const char* k, int dflt) {
  if (!o.is_object()) return dflt;
  auto it = o.find(k);
  if (it == o.end() || !it->is_number_integer()) return dflt;
  // A number past int's range reads as absent, not as a wrapped value.
  if (it->is_number_unsigned()) {
    const auto u = it->get<uint64_t>();
    return u <= uint64_t(INT32_MAX) ? int(u) : dflt;
  }
  const auto v = it->get<int64_t>();
  return v >= INT32_MIN && v <= INT32_MAX ? int(v) : dflt;
}

json parse_object(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  return j.is_discarded() || !j.is_object() ? json::object() : j;
}

JobAnswer read_job(const json& job) {
  JobAnswer a;
  const json& meta = obj(job, "metadata");
  const json& spec = obj(job, "spec");
  const json& status = obj(job, "status");
  a.uid = string_at(meta, "uid");
  a.deleting = meta.contains("deletionTimestamp");
  if (auto it = status.find("conditions"); it != status.end() && it->is_array())
    for (const auto& cond : *it) {
      if (!cond.is_object() || string_at(cond, "status") != "True") continue;
      const std::string type = string_at(cond, "type");
      if (type == "Complete" || type == "Failed") {
        a.end = type == "Complete" ? JobAnswer::End::kComplete : JobAnswer::End::kFailed;
        const std::string msg = string_at(cond, "message");
        a.end_why = string_at(cond, "reason") + (msg.empty() ? "" : " " + msg);
        break;
      }
    }
  if (auto it = spec.find("suspend"); it != spec.end()) a.suspended = *it == true;
  a.want = int_at(spec, "parallelism", int_at(spec, "completions", 1));
  a.active = int_at(status, "active", 0);
  a.succeeded = int_at(status, "succeeded", 0);
  a.ready = status.contains("ready") ? int_at(status, "ready", 0) : a.active;
  return a;
}

PodsVerdict read_pods(const json& pod_list) {
  PodsVerdict v;
  if (!pod_list.is_object()) return v;
  auto items = pod_list.find("items");
  if (items == pod_list.end() || !items->is_array()) return v;
  int summary_index = -1;
  for (const auto& p : *items) {
    const json& meta = obj(p, "metadata");
    const json& status = obj(p, "status");
    const std::string pod = string_at(meta, "name");
    std::string index = string_at(obj(meta, "annotations"), "batch.kubernetes.io/job-completion-index");
    if (index.empty()) index = string_at(obj(meta, "labels"), "batch.kubernetes.io/job-completion-index");
    if (auto c = status.find("conditions"); c != status.end() && c->is_array())
      for (const auto& cond : *c)
        if (string_at(cond, "type") == "DisruptionTarget" && string_at(cond, "status") == "True") v.disrupted = true;
    auto css = status.find("containerStatuses");
    if (css == status.end() || !css->is_array()) continue;
    for (const auto& cs : *css) {
      const json& term = obj(obj(cs, "state"), "terminated");
      if (term.empty()) continue;
      const int exit = int_at(term, "exitCode", -1);
      const std::string msg = string_at(term, "message");
      if (exit == 0) {
        auto s = greenshard::parse_run_summary(msg, nullptr);
        const int at = index.empty() ? 1 << 20 : std::atoi(index.c_str());
        if (s && (summary_index < 0 || at < summary_index)) {
          v.summary = std::move(s);  // rank 0's (the lowest index) when several wrote one
          summary_index = at;
        }
        continue;
      }
      if (exit == 2) v.config_error = true;
      if (exit != 137 && exit != 143) v.only_killed = false;
      if (v.failure.empty() || (exit == 2 && !v.failure_is_config)) {
        v.failure = "pod " + pod + (index.empty() ? "" : " (index " + index + ")") + " exited " + std::to_string(exit);
        v.failure_is_config = exit == 2;
        // Exit 2: the worker's own words (its config error line) when the
        // log tail holds them.
        std::string line = exit == 2 ? greenshard::config_error_in(msg) : "";
        if (line.empty()) line = last_line(msg);
        if (!line.empty()) v.failure += ": " + line;
      }
    }
  }
  return v;
}

std::string first_pod_name(const json& pod_list) {
  if (!pod_list.is_object()) return "";
  auto items = pod_list.find("items");
  if (items == pod_list.end() || !items->is_array() || items->empty()) return "";
  return string_at(obj(items->front(), "metadata"), "name");
}

Decision decide(const std::string& name, int code, const JobAnswer& job, const PodsVerdict& pods,
                bool stop_requested, GangPhase last) {
  Decision d;
  GangStatus& st = d.status;
  if (code == 404) {
    d.forget = true;
    if (stop_requested) {
      st.phase = GangPhase::kPreempted;
      st.message = "Job " + name + " was deleted by the controller to stop the gang (stopped as asked)";
    } else {
      st.phase = GangPhase::kFailed;
      st.message = "Job " + name + " disappeared from the cluster (deleted by someone else)";
    }
    return d;
  }
  if (code != 200) {
    st.phase = last;
    st.message = "kubernetes API " + (code == 0 ? std::string("unreachable") : "HTTP " + std::to_string(code)) +
                 " reading Job " + name + "; keeping the last phase seen";
    return d;
  }
  if (job.end == JobAnswer::End::kComplete) {
    d.forget = true;
    st.summary = pods.summary;
    const bool preempted = pods.summary && pods.summary->state == greenshard::RunEnd::kPreempted;
    const std::string said =
        pods.summary ? " (summary: " + std::string(greenshard::to_string(pods.summary->state)) + ")" : "";
    if (stop_requested) {
      st.phase = GangPhase::kPreempted;
      st.message = "Job " + name + " ended after the controller asked it to stop (stopped as asked)" + said;
    } else if (preempted) {
      st.phase = GangPhase::kPreempted;
      st.message = "Job " + name + " completed after the worker checkpointed on SIGTERM" + said;
    } else if (pods.disrupted) {
      st.phase = GangPhase::kPreempted;
      st.message = "Job " + name + " completed after Kubernetes disrupted a pod (DisruptionTarget)" + said;
    } else {
      st.phase = GangPhase::kSucceeded;
      st.message = "Job " + name + " completed" + said;
    }
    return d;
  }
  if (job.end == JobAnswer::End::kFailed) {
    d.forget = true;
    st.message = "Job " + name + " failed: " + job.end_why + (pods.failure.empty() ? "" : "; " + pods.failure);
    if (pods.config_error) {
      st.phase = GangPhase::kConfigError;
      st.message += " (a worker exited 2: bad configuration)";
    } else if (stop_requested && pods.only_killed) {
      st.phase = GangPhase::kPreempted;
      st.message = "Job " + name + " was stopped as asked; ranks were killed after the grace period (" +
                   job.end_why + ")";
    } else {
      st.phase = GangPhase::kFailed;
    }
    // The gang restarts as a new Job; remove this one (and, through the
    // owner references, its Service and ConfigMap). A stopped gang's
    // deletion is already under way.
    if (!stop_requested) d.remove = "Background";
    return d;
  }
  if (stop_requested && !job.deleting) d.remove = kStopPropagation;  // the delete of stop() did not get through
  if (job.suspended) {
    st.phase = GangPhase::kStarting;
    st.message = "Job " + name + " is suspended (waiting for admission by Kueue)";
  } else if (job.active > 0 && int64_t{job.ready} + job.succeeded >= job.want) {  // int64: no overflow
    st.phase = GangPhase::kRunning;
  } else {
    st.phase = GangPhase::kStarting;
    st.message = std::to_string(job.ready) + " of " + std::to_string(job.want) + " pods of Job " + name + " ready";
  }
  return d;
}

}  // namespace controller::k8s
