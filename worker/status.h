// HTTP to the controller (docs/worker-controller.md): the status push of
// rank 0 and the grid-intensity poll. Neither ever stops training: failures
// are logged and retried. No LibTorch here.
//
// https:// URLs: the controller's certificate is verified (chain and host
// name) against the PEM bundle named by GREENSHARD_CA_BUNDLE, or the
// system's CAs when it is unset or empty. The clients are
// carbon::make_http_client's; a failed push is logged with the cause
// carbon::explain_http_failure names.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "worker/spec/status_push.h"

namespace greenshard {

// The environment variable naming the CA bundle.
inline constexpr const char* kCaBundleVar = "GREENSHARD_CA_BUNDLE";

// GREENSHARD_CA_BUNDLE from `env` ("" when unset or empty). Throws
// ConfigError (worker/config.h; exit 2) naming GREENSHARD_CA_BUNDLE when it is
// set but not a readable file holding a PEM certificate.
std::string ca_bundle_from_env(const std::map<std::string, std::string>& env);

// POSTs the newest push (older unsent ones are dropped) from a
// background thread. `ca_bundle`: verifies an https:// url (nullopt: from
// the process environment, GREENSHARD_CA_BUNDLE; "": the system's CAs).
// Throws std::invalid_argument naming `url` unless it is
// http[s]://HOST[:PORT]/PATH (carbon::split_http_url).
class StatusPusher {
 public:
  StatusPusher(std::string url, std::string token, std::optional<std::string> ca_bundle = std::nullopt);
  ~StatusPusher();
  void push(const StatusPush& status);
  // Waits until the newest payload was sent (or failed), at most `limit`.
  void flush(std::chrono::milliseconds limit);
  int failures() const { return failures_; }

 private:
  void loop();
  std::string base_, path_, token_, ca_bundle_;
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
// value and marks it stale). `ca_bundle` as for StatusPusher.
std::optional<double> fetch_intensity(const std::string& url, const std::string& token = "",
                                      const std::optional<std::string>& ca_bundle = std::nullopt);

}  // namespace greenshard
