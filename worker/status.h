// HTTP to the controller (docs/worker-controller.md): the status push of
// rank 0 and the grid-intensity poll. Neither ever stops training: failures
// are logged and retried. No LibTorch here.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace greenshard {

// Splits "http://host:port/path" into ("http://host:port", "/path").
// Throws std::invalid_argument naming the URL otherwise.
std::pair<std::string, std::string> split_url(const std::string& url);

// POSTs the newest payload (older unsent ones are dropped) from a
// background thread.
class StatusPusher {
 public:
  StatusPusher(std::string url, std::string token);
  ~StatusPusher();
  void push(std::string json_body);
  // Waits until the newest payload was sent (or failed), at most `limit`.
  void flush(std::chrono::milliseconds limit);
  int failures() const { return failures_; }

 private:
  void loop();
  std::string base_, path_, token_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::string> pending_;
  bool busy_ = false, stop_ = false;
  int failures_ = 0;
  std::thread thread_;
};

// GET url -> {"gco2_per_kwh": x}, with "Authorization: Bearer <token>" when
// token is not empty (the controller's GET /v1/regions/{name}/intensity takes
// the job's status token); nullopt on any failure (the caller keeps its last
// value and marks it stale).
std::optional<double> fetch_intensity(const std::string& url, const std::string& token = "");

}  // namespace greenshard
