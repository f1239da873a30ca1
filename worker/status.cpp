#include "worker/status.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "worker/spec/ca_bundle.h"
#include "worker/spec/job_spec.h"

namespace greenshard {

namespace {

std::string resolve_ca_bundle(const std::optional<std::string>& given) {
  if (given) return *given;
  const char* v = std::getenv(kCaBundleVar);
  return v ? v : "";
}

bool is_https(const std::string& base) { return base.rfind("https://", 0) == 0; }

// An https:// client verifies the controller: chain (the bundle, else the
// system's CAs) and host name.
void configure_tls(httplib::Client& client, const std::string& base, const std::string& ca_bundle) {
  if (!is_https(base)) return;
  client.enable_server_certificate_verification(true);
  if (!ca_bundle.empty()) client.set_ca_cert_path(ca_bundle.c_str());
}

std::string describe_failure(const httplib::Result& res, const std::string& ca_bundle) {
  if (res) return "HTTP " + std::to_string(res->status);
  const std::string against = ca_bundle.empty() ? std::string("the system's CAs (") + kCaBundleVar + " unset)"
                                                : std::string(kCaBundleVar) + "=" + ca_bundle;
  switch (res.error()) {
    case httplib::Error::SSLServerVerification:
      return "TLS: certificate verify failed, checked against " + against;
    case httplib::Error::SSLLoadingCerts:
      return "TLS: cannot load " + against;
    case httplib::Error::SSLConnection:
      return "TLS: handshake failed";
    default:
      return httplib::to_string(res.error());
  }
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

std::pair<std::string, std::string> split_url(const std::string& url) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos || (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0))
    throw std::invalid_argument("not an http(s) URL: '" + url + "'");
  const auto slash = url.find('/', scheme + 3);
  if (slash == std::string::npos) return {url, "/"};
  return {url.substr(0, slash), url.substr(slash)};
}

StatusPusher::StatusPusher(std::string url, std::string token, std::optional<std::string> ca_bundle)
    : token_(std::move(token)), ca_bundle_(resolve_ca_bundle(ca_bundle)) {
  std::tie(base_, path_) = split_url(url);
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
  httplib::Client client(base_);
  configure_tls(client, base_, ca_bundle_);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  client.set_write_timeout(5);
  httplib::Headers headers;
  if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || pending_; });
    if (!pending_) return;  // stopping, nothing left
    std::string body = std::move(*pending_);
    pending_.reset();
    busy_ = true;
    lock.unlock();
    auto res = client.Post(path_, headers, body, "application/json");
    const bool ok = res && res->status >= 200 && res->status < 300;
    lock.lock();
    busy_ = false;
    if (!ok) {
      ++failures_;
      std::cerr << "warning: status push to " << base_ << path_ << " failed ("
                << describe_failure(res, ca_bundle_) << ")" << std::endl;
    }
    cv_.notify_all();
    if (stop_ && !pending_) return;
  }
}

std::optional<double> fetch_intensity(const std::string& url, const std::string& token,
                                      const std::optional<std::string>& ca_bundle) {
  try {
    auto [base, path] = split_url(url);
    httplib::Client client(base);
    configure_tls(client, base, resolve_ca_bundle(ca_bundle));
    client.set_connection_timeout(2);
    client.set_read_timeout(5);
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    auto res = client.Get(path, headers);
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
