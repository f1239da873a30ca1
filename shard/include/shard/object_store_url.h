// Checkpoint roots in S3-compatible object storage: "s3://bucket[/prefix]",
// and the endpoints that serve them: "http(s)://host[:port]".
// Header-only and LibTorch-free, the one place these rules live: the job
// spec (checkpoint.dir, at submit), the controller's region config
// (checkpoint_s3) and the S3 client (shard/src/s3_client.h) all use it.
#pragma once

#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>

namespace shard {

struct ObjectStoreUrl {
  std::string bucket;
  std::string prefix;  // without leading or trailing '/'; "" = the bucket's root
};

inline bool is_object_store_url(const std::string& s) { return s.rfind("s3://", 0) == 0; }

namespace detail {

// "" when `s` is a good URL, else why not; fills `out` when good.
inline std::string parse_object_store_url(const std::string& s, ObjectStoreUrl* out) {
  const std::string shape = "must be s3://bucket[/prefix], got '" + s + "'";
  if (!is_object_store_url(s) || s.size() > 600) return shape;
  std::string rest = s.substr(5);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t slash = rest.find('/');
  const std::string bucket = rest.substr(0, slash);
  const std::string prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (bucket.empty()) return shape;
  // Bucket names by S3's rules.
  static const std::regex bucket_chars("[a-z0-9.-]+"), ends("[a-z0-9](.*[a-z0-9])?"),
      ipv4("[0-9]+\\.[0-9]+\\.[0-9]+\\.[0-9]+");
  const std::string b = "bucket '" + bucket + "' ";
  if (bucket.size() < 3 || bucket.size() > 63) return b + "must be 3-63 characters";
  if (!std::regex_match(bucket, bucket_chars)) return b + "may hold only lowercase letters, digits, '.' and '-'";
  if (!std::regex_match(bucket, ends)) return b + "must begin and end with a letter or digit";
  if (bucket.find("..") != std::string::npos) return b + "must not hold '..'";
  if (std::regex_match(bucket, ipv4)) return b + "must not be an IP address";
  // The prefix of S3's "safe" key characters, so keys under it need no
  // escaping beyond what every client does.
  if (!prefix.empty()) {
    static const std::regex safe("[A-Za-z0-9!_.*'()/-]+");
    if (prefix.size() > 512) return "prefix must be at most 512 characters";
    if (!std::regex_match(prefix, safe))
      return "prefix '" + prefix + "' may hold only letters, digits, '/' and !-_.*'()";
    std::stringstream segs(prefix);
    for (std::string seg; std::getline(segs, seg, '/');)
      if (seg.empty() || seg == "." || seg == "..") return "prefix '" + prefix + "' has an empty, '.' or '..' segment";
  }
  if (out) *out = {bucket, prefix};
  return "";
}

}  // namespace detail

// "" when `url` is a good s3://bucket[/prefix] (a trailing '/' is fine),
// else why not (no field name: callers add theirs).
inline std::string object_store_url_problem(const std::string& url) {
  return detail::parse_object_store_url(url, nullptr);
}

// The bucket and prefix; std::invalid_argument("'<url>' is not a usable S3
// URL: <why>") otherwise.
inline ObjectStoreUrl parse_object_store_url(const std::string& url) {
  ObjectStoreUrl u;
  const std::string why = detail::parse_object_store_url(url, &u);
  if (!why.empty()) throw std::invalid_argument(why);
  return u;
}

// "" when `endpoint` is http(s)://host[:port] (host: a DNS name, IPv4 or
// [IPv6]; no path, query or user information; a trailing '/' is fine), else
// why not. The endpoint is not repeated when it holds '@' (it may carry
// credentials). `base` (optional) gets it without the trailing '/'.
inline std::string object_store_endpoint_problem(const std::string& endpoint, std::string* base = nullptr) {
  if (endpoint.find('@') != std::string::npos)
    return "must not hold user information (credentials belong in the secret)";
  std::string e = endpoint;
  while (!e.empty() && e.back() == '/') e.pop_back();
  if (e.size() > 300) return "must be at most 300 characters";
  static const std::regex endpoint_re(
      "https?://"
      "(([A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)(\\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*"  // name or IPv4
      "|\\[[0-9A-Fa-f:.]+\\])"                                                                // [IPv6]
      "(:([0-9]{1,5}))?");                                                                      // port: m[7]
  std::smatch m;
  if (!std::regex_match(e, m, endpoint_re))
    return "must be http(s)://host[:port] (no path or query), got '" + endpoint + "'";
  if (m[7].matched) {
    const long port = std::stol(m[7].str());
    if (port < 1 || port > 65535) return "port " + m[7].str() + " must be in [1, 65535]";
  }
  if (base) *base = e;
  return "";
}

}  // namespace shard
