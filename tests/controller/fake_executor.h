// FakeExecutor: a scripted controller::Executor for scheduler tests, so the
// scheduler's state logic is tested without launching gangs.
//
// Contract (controller/executors/executor.h's, played from a script):
//   - script(job_id, statuses): every poll() of that job returns the next
//     status of the list; the last one repeats. A job started or adopted
//     without a script polls kRunning. A job never started nor adopted polls
//     kUnknown ("no such gang"), as a real executor answers.
//     A restart (start() again) continues the same script where it was, so
//     one script can span attempts ({kFailed, kRunning, kSucceeded}).
//   - start(gang) records the GangSpec and returns kRunning with runtime
//     {"executor": "fake", "job_id", "attempt"}; after fail_next_start(msg)
//     the next start() throws std::runtime_error(msg) instead (once) and
//     records nothing.
//   - stop(job_id, grace) records the call; from then on poll() returns
//     the after-stop status (default kPreempted, "stopped as asked") until
//     the next start(); after_stop(std::nullopt) makes a stopped gang keep
//     following its script instead. gone() is true after stop() (and for a
//     job this executor does not know), false while a gang runs.
//   - adopt(job_id, runtime, options) records the call and returns the answer
//     set by adopt_answer(job_id, bool) (default true: still alive, now
//     watched again).
//   - tick() is counted; logs() is always nullopt; kind() is "fake" unless
//     given.
// Every method takes one mutex: the scheduler's cycle thread and a test's
// thread may call it at once.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "controller/executors/executor.h"

namespace ctltest {

class FakeExecutor final : public controller::Executor {
 public:
  explicit FakeExecutor(std::string kind = "fake") : kind_(std::move(kind)) {
    after_stop_ = status(controller::GangPhase::kPreempted, "stopped as asked");
  }

  // A GangStatus in one expression: status(kFailed, "rank 1 exited 1").
  static controller::GangStatus status(controller::GangPhase phase, std::string message = "",
                                       nlohmann::json summary = nullptr) {
    controller::GangStatus s;
    s.phase = phase;
    s.message = std::move(message);
    if (!summary.is_null()) {  // as the worker writes it, read as the executors read it
      std::string error;
      s.summary = greenshard::read_run_summary(summary, &error);
      if (!s.summary) throw std::invalid_argument("FakeExecutor::status: summary: " + error);
    }
    return s;
  }

  // --- scripting ------------------------------------------------------------
  void script(const std::string& job_id, std::vector<controller::GangStatus> statuses) {
    if (statuses.empty()) throw std::invalid_argument("FakeExecutor::script: no status for " + job_id);
    std::lock_guard<std::mutex> l(mu_);
    scripts_[job_id] = {std::move(statuses), 0};
  }
  void fail_next_start(std::string message) {
    std::lock_guard<std::mutex> l(mu_);
    fail_next_start_ = std::move(message);
  }
  void after_stop(std::optional<controller::GangStatus> s) {
    std::lock_guard<std::mutex> l(mu_);
    after_stop_ = std::move(s);
  }
  void adopt_answer(const std::string& job_id, bool alive) {
    std::lock_guard<std::mutex> l(mu_);
    adopt_answers_[job_id] = alive;
  }

  // --- what was called ------------------------------------------------------
  std::vector<controller::GangSpec> starts() const {
    std::lock_guard<std::mutex> l(mu_);
    return starts_;
  }
  std::vector<std::pair<std::string, std::chrono::milliseconds>> stops() const {
    std::lock_guard<std::mutex> l(mu_);
    return stops_;
  }
  struct Adopt {
    std::string job_id;
    nlohmann::json runtime;
    bool stop_requested = false;
  };
  std::vector<Adopt> adopts() const {
    std::lock_guard<std::mutex> l(mu_);
    return adopts_;
  }
  int polls(const std::string& job_id) const {
    std::lock_guard<std::mutex> l(mu_);
    auto it = polls_.find(job_id);
    return it == polls_.end() ? 0 : it->second;
  }
  int ticks() const {
    std::lock_guard<std::mutex> l(mu_);
    return ticks_;
  }

  // --- controller::Executor -------------------------------------------------
  std::string kind() const override { return kind_; }

  controller::GangStatus start(const controller::GangSpec& gang) override {
    std::lock_guard<std::mutex> l(mu_);
    if (fail_next_start_) {
      std::string msg = std::move(*fail_next_start_);
      fail_next_start_.reset();
      throw std::runtime_error(msg);
    }
    starts_.push_back(gang);
    known_.insert(gang.job_id);
    stopped_.erase(gang.job_id);
    controller::GangStatus s = status(controller::GangPhase::kRunning);
    s.runtime = {{"executor", kind_}, {"job_id", gang.job_id}, {"attempt", gang.attempt}};
    return s;
  }

  controller::GangStatus poll(const std::string& job_id) override {
    std::lock_guard<std::mutex> l(mu_);
    polls_[job_id]++;
    if (!known_.count(job_id)) return status(controller::GangPhase::kUnknown, "no such gang");
    if (stopped_.count(job_id) && after_stop_) return *after_stop_;
    auto it = scripts_.find(job_id);
    if (it == scripts_.end()) return status(controller::GangPhase::kRunning);
    auto& [list, next] = it->second;
    controller::GangStatus s = list[std::min(next, list.size() - 1)];
    if (next < list.size()) ++next;
    return s;
  }

  void stop(const std::string& job_id, std::chrono::milliseconds grace) override {
    std::lock_guard<std::mutex> l(mu_);
    stops_.push_back({job_id, grace});
    stopped_.insert(job_id);
  }

  bool adopt(const std::string& job_id, const nlohmann::json& runtime, const controller::AdoptOptions& o) override {
    std::lock_guard<std::mutex> l(mu_);
    adopts_.push_back({job_id, runtime, o.stop_requested});
    auto it = adopt_answers_.find(job_id);
    const bool alive = it == adopt_answers_.end() || it->second;
    if (alive) known_.insert(job_id);
    return alive;
  }

  void tick() override {
    std::lock_guard<std::mutex> l(mu_);
    ++ticks_;
  }

  bool gone(const std::string& job_id) override {
    std::lock_guard<std::mutex> l(mu_);
    return !known_.count(job_id) || stopped_.count(job_id);
  }

  std::optional<std::string> logs(const std::string&, int, int64_t, int64_t) override { return std::nullopt; }

 private:
  const std::string kind_;
  mutable std::mutex mu_;
  std::map<std::string, std::pair<std::vector<controller::GangStatus>, size_t>> scripts_;
  std::set<std::string> known_, stopped_;
  std::map<std::string, bool> adopt_answers_;
  std::optional<std::string> fail_next_start_;
  std::optional<controller::GangStatus> after_stop_;
  std::vector<controller::GangSpec> starts_;
  std::vector<std::pair<std::string, std::chrono::milliseconds>> stops_;
  std::vector<Adopt> adopts_;
  std::map<std::string, int> polls_;
  int ticks_ = 0;
};

}  // namespace ctltest
