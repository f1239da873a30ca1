#include "controller/executors/executor_sim.h"

#include <carbon/job.h>

#include <cmath>
#include <stdexcept>

namespace controller {

SimExecutor::SimExecutor(const Clock& clock, SimExecutorOptions options) : clock_(clock), opt_(options) {
  if (!(opt_.resume_overhead_s >= 0)) throw std::invalid_argument("SimExecutor: resume_overhead_s must be >= 0");
}

void SimExecutor::settle(Gang& g, int64_t now) const {
  if (!g.running) return;
  const int64_t end = g.started_ms + std::llround(g.overhead_ms + g.left_ms / g.speed);
  if (now < end) return;
  g.running = false;
  g.succeeded = true;
  g.left_ms = 0;
  g.runs.push_back({g.started_ms, end, g.region, g.nodes});
}

GangStatus SimExecutor::start(const GangSpec& gang) {
  std::lock_guard<std::mutex> l(mu_);
  Gang& g = gangs_[gang.job_id];
  if (g.running) throw std::runtime_error("sim: gang " + gang.job_id + " is already running");
  if (g.succeeded) throw std::runtime_error("sim: gang " + gang.job_id + " has already finished");
  const JobSpec& s = gang.spec;
  // The job as placement modelled it (widths in nodes).
  carbon::Job model;
  model.id = gang.job_id;
  model.gpus = s.nodes;
  model.min_gpus = s.min_width();
  model.max_gpus = s.max_width();
  model.migratable = s.migratable;
  model.checkpoint_gb = s.checkpoint_gb;
  for (const auto& p : s.scaling) model.scaling.push_back({p.nodes, p.tokens_per_second});
  model.resume_overhead = carbon::Seconds{std::llround(opt_.resume_overhead_s)};
  if (g.starts == 0) {
    g.left_ms = s.duration_s * 1000.0;
    g.overhead_ms = 0;
  } else if (s.elastic()) {
    g.overhead_ms += 1000.0 * double(carbon::change_overhead(model, opt_.elastic, gang.region != g.region).count());
  } else {
    g.overhead_ms += opt_.resume_overhead_s * 1000.0;  // plus what an early stop left of the last one
  }
  g.speed = gang.width() == s.nodes ? 1.0 : model.speed(gang.width());
  g.region = gang.region;
  g.nodes = gang.width();
  g.starts++;
  g.running = true;
  g.stopped = false;
  g.started_ms = clock_.now_ms();
  GangStatus st;
  st.phase = GangPhase::kRunning;
  st.runtime = {{"sim_starts", g.starts}};
  return st;
}

GangStatus SimExecutor::poll(const std::string& job_id) {
  std::lock_guard<std::mutex> l(mu_);
  GangStatus st;
  auto it = gangs_.find(job_id);
  if (it == gangs_.end()) {
    st.phase = GangPhase::kUnknown;
    st.message = "sim: no gang " + job_id;
    return st;
  }
  Gang& g = it->second;
  settle(g, clock_.now_ms());
  if (g.running) st.phase = GangPhase::kRunning;
  else if (g.succeeded) {
    st.phase = GangPhase::kSucceeded;
    st.summary = greenshard::RunSummary{.state = greenshard::RunEnd::kSucceeded};
  } else if (g.stopped) {
    st.phase = GangPhase::kPreempted;
    st.summary = greenshard::RunSummary{.state = greenshard::RunEnd::kPreempted};
    st.message = "checkpointed and stopped";
  } else {
    st.phase = GangPhase::kUnknown;
  }
  return st;
}

void SimExecutor::stop(const std::string& job_id, std::chrono::milliseconds) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = gangs_.find(job_id);
  if (it == gangs_.end()) return;
  Gang& g = it->second;
  const int64_t now = clock_.now_ms();
  settle(g, now);
  if (!g.running) return;  // done already, or stopped: safe to call twice
  g.running = false;
  g.stopped = true;
  // The run time goes to the resume overhead first, then to work.
  const double ran = double(now - g.started_ms);
  const double worked = std::max(0.0, ran - g.overhead_ms);
  g.overhead_ms = std::max(0.0, g.overhead_ms - ran);
  g.left_ms -= worked * g.speed;
  g.runs.push_back({g.started_ms, now, g.region, g.nodes});
}

bool SimExecutor::adopt(const std::string&, const nlohmann::json&, const AdoptOptions&) { return false; }

bool SimExecutor::gone(const std::string& job_id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = gangs_.find(job_id);
  return it == gangs_.end() || !it->second.running;
}

std::vector<SimRun> SimExecutor::runs(const std::string& job_id) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = gangs_.find(job_id);
  return it == gangs_.end() ? std::vector<SimRun>{} : it->second.runs;
}

}  // namespace controller
