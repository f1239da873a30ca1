#include "worker/status.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>
#include <stdexcept>

namespace greenshard {

std::pair<std::string, std::string> split_url(const std::string& url) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos || (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0))
    throw std::invalid_argument("not an http(s) URL: '" + url + "'");
  const auto slash = url.find('/', scheme + 3);
  if (slash == std::string::npos) return {url, "/"};
  return {url.substr(0, slash), url.substr(slash)};
}

StatusPusher::StatusPusher(std::string url, std::string token) : token_(std::move(token)) {
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

void StatusPusher::push(std::string body) {
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
                << (res ? "HTTP " + std::to_string(res->status) : httplib::to_string(res.error())) << ")" << std::endl;
    }
    cv_.notify_all();
    if (stop_ && !pending_) return;
  }
}

std::optional<double> fetch_intensity(const std::string& url, const std::string& token) {
  try {
    auto [base, path] = split_url(url);
    httplib::Client client(base);
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
