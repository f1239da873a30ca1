// The S3 client's configuration (Config), and how the checkpoint store
// fills it from the environment (config_from_env). Used by s3_client.h
// (Client takes a Config) and checkpoint_store_s3.cpp; the value checks
// shared by config_from_env and Client's constructor are here too (detail).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace shard::s3 {

struct Config {
  std::string endpoint;  // "http://host[:port]" or "https://host[:port]"; path-style addressing always
  std::string region = "us-east-1";
  std::string access_key, secret_key;
  std::string session_token;                 // optional: sent as x-amz-security-token
  std::chrono::milliseconds timeout{60000};  // per request (whole transfer), and the connect timeout
  // Retries (of every request): a transient failure (no connection, DNS,
  // timeout, HTTP 429/500/502/503/504, S3's SlowDown/RequestTimeout; never
  // another 4xx) after attempt k = 0, 1, ... sleeps a random time in
  // [0, min(retry_cap, retry_base * 2^k)] ("full jitter") and tries again,
  // as long as retry_budget has not passed since the request's first
  // attempt (the sleep is cut to what is left of it; zero: one attempt).
  std::chrono::milliseconds retry_budget{60000};
  std::chrono::milliseconds retry_base{100};
  std::chrono::milliseconds retry_cap{5000};
  // Multipart part size of the checkpoint store's writer (S3: 5 MiB to 5 GiB).
  size_t part_bytes = size_t{16} << 20;
};

// From the environment:
//   AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL      (required; http(s)://host[:port])
//   AWS_REGION, else AWS_DEFAULT_REGION            (default us-east-1)
//   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY       (required), AWS_SESSION_TOKEN (optional)
// When GREENSHARD_S3_SECRET_DIR is set, the three credentials are read instead
// from the files of those names in that directory (a mounted Kubernetes
// Secret; surrounding whitespace and the trailing newline are stripped;
// AWS_SESSION_TOKEN may be absent) and the credential variables are ignored.
// Retries and parts (optional):
//   GREENSHARD_S3_RETRY_SECONDS   retry_budget in seconds (0 .. 86400, decimals allowed; default 60)
//   GREENSHARD_S3_PART_MIB        part_bytes in MiB (5 .. 5120; default 16)
// An empty variable counts as unset. getenv is injectable (nullptr: ::getenv).
// Throws std::invalid_argument naming the variable (or file) on a missing or
// bad value.
Config config_from_env(const std::function<const char*(const char*)>& getenv = nullptr);

// The checks of config_from_env that Client's constructor repeats on a
// Config it is given; each caller names the value in its message.
namespace detail {
// "" when e is http(s)://host[:port] (an optional trailing '/' allowed), with
// *base set to it without the '/' and *https to whether it is https://;
// otherwise what is wrong with it (shard/object_store_url.h: the rules the
// controller checks too).
std::string check_endpoint(const std::string& e, std::string* base, bool* https);
// "" when r is a region name (1 to 64 lowercase letters, digits and '-'),
// otherwise what is wrong with it.
std::string check_region(const std::string& r);
// std::invalid_argument "s3: <name> holds a control character ..." when
// value holds one.
void check_credential(const std::string& name, const std::string& value);
}  // namespace detail

}  // namespace shard::s3
