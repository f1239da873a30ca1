#include "worker/status.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "carbon/http_client.h"
#include "carbon/http_failure.h"
#include "worker/spec/ca_bundle.h"
#include "worker/spec/job_spec.h"

namespace greenshard {

namespace {

std::string resolve_ca_bundle(const std::optional<std::string>& given) {
  if (given) return *given;
  const char* v = std::getenv(kCaBundleVar);
  return v ? v : "";
}

// A client of the controller at `base`: an https:// one verifies it (chain
// and host name) against `ca_bundle`, else the system's CAs, and messages
// name the bundle as GREENSHARD_CA_BUNDLE; 2 s to connect, 5 s per read or
// write; the bearer `token` unless empty.
carbon::HttpClientOptions controller_options(const std::string& base, const std::string& token,
                                             const std::string& ca_bundle) {
  carbon::HttpClientOptions o;
  o.base_url = base;
  o.ca_bundle = ca_bundle;
  o.ca_bundle_variable = kCaBundleVar;
  o.connect_timeout = std::chrono::seconds(2);
  o.read_timeout = std::chrono::seconds(5);
  o.write_timeout = std::chrono::seconds(5);
  o.bearer_token = token;
  return o;
}

}  // namespace

std::string ca_bundle_from_env(const std::map<std::string, std::string>& env) {
  auto it = env.find(kCaBundleVar);
  if (it == env.end() || it->second.empty()) return "";
  const std::string& path = it->second;
  try {
    check_ca_bundle(path, std::string("environment ") + kCaBundleVar);
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what(), kCaBundleVar);
  }
  return path;
}

// The server and the path of a status or intensity URL ("/" when it has none).
static std::pair<std::string, std::string> server_and_path(const std::string& url) {
  carbon::HttpUrl u = carbon::split_http_url(url);
  return {u.base, u.path.empty() ? "/" : u.path};
}

StatusPusher::StatusPusher(std::string url, std::string token, std::optional<std::string> ca_bundle)
    : token_(std::move(token)), ca_bundle_(resolve_ca_bundle(ca_bundle)) {
  std::tie(base_, path_) = server_and_path(url);  // here, not in loop(): throws std::invalid_argument
  thread_ = std::thread([this] { loop(); });
}

StatusPusher::~StatusPusher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StatusPusher::push(const StatusPush& status) {
  // A failure message may hold any bytes: invalid UTF-8 is replaced, never thrown.
  std::string body = to_json(status).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = std::move(body);
  }
  cv_.notify_all();
}

void StatusPusher::flush(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, limit, [&] { return !pending_ && !busy_; });
}

void StatusPusher::loop() {
  const carbon::HttpClientOptions options = controller_options(base_, token_, ca_bundle_);
  httplib::Client client = carbon::make_http_client(options);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || pending_; });
    if (!pending_) return;  // stopping, nothing left
    std::string body = std::move(*pending_);
    pending_.reset();
    busy_ = true;
    lock.unlock();
    const auto sent = std::chrono::steady_clock::now();
    auto res = client.Post(path_, body, "application/json");
    const bool ok = res && res->status >= 200 && res->status < 300;
    // Named before push() is blocked again: explaining a failed connect
    // tries once more (up to the connect timeout).
    const std::string failure = ok    ? ""
                                : res ? "HTTP " + std::to_string(res->status)
                                      : carbon::explain_http_failure(res, client, options, sent).cause;
    lock.lock();
    busy_ = false;
    if (!ok) {
      ++failures_;
      std::cerr << "warning: status push to " << base_ << path_ << " failed (" << failure << ")" << std::endl;
    }
    cv_.notify_all();
    if (stop_ && !pending_) return;
  }
}

std::optional<double> fetch_intensity(const std::string& url, const std::string& token,
                                      const std::optional<std::string>& ca_bundle) {
  try {
    auto [base, path] = server_and_path(url);
    httplib::Client client = carbon::make_http_client(controller_options(base, token, resolve_ca_bundle(ca_bundle)));
    auto res = client.Get(path);
    if (!res || res->status != 200) return std::nullopt;
    auto j = nlohmann::json::parse(res->body);
    const double v = j.at("gco2_per_kwh").get<double>();
    if (!std::isfinite(v) || v < 0) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace greenshard
