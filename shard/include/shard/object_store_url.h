// Checkpoint roots in S3-compatible object storage: "s3://bucket[/prefix]".
// Header-only and LibTorch-free: the job-spec schema (linked by the
// controller) checks checkpoint.dir with it at submit; the S3 client
// (shard/src/s3_client.h) parses with it.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>

namespace shard {

struct ObjectStoreUrl {
  std::string bucket;
  std::string prefix;  // without leading or trailing '/'; "" = the bucket's root
};

inline bool is_object_store_url(const std::string& s) { return s.rfind("s3://", 0) == 0; }

// "s3://bucket" or "s3://bucket/some/prefix/". std::invalid_argument saying
// what is wrong when it is not an s3:// URL or the bucket breaks the S3
// naming rules (3-63 characters: lowercase letters, digits, '.', '-'; starts
// and ends with a letter or digit; no ".."; not an IPv4 address), or the
// prefix has an empty segment ("a//b") or a "." / ".." segment.
inline ObjectStoreUrl parse_object_store_url(const std::string& s) {
  auto bad = [&](const std::string& why) -> ObjectStoreUrl {
    throw std::invalid_argument("'" + s + "' is not an S3 URL (s3://bucket[/prefix]): " + why);
  };
  if (!is_object_store_url(s)) return bad("it does not start with s3://");
  std::string rest = s.substr(5);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const auto slash = rest.find('/');
  ObjectStoreUrl u{rest.substr(0, slash), slash == std::string::npos ? "" : rest.substr(slash + 1)};
  const std::string& b = u.bucket;
  if (b.size() < 3 || b.size() > 63) return bad("the bucket name must have 3 to 63 characters");
  int dots = 0;
  bool all_digits_and_dots = true;
  for (char c : b) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'))
      return bad("the bucket name may hold only lowercase letters, digits, '.' and '-'");
    if (c == '.') ++dots;
    if (!((c >= '0' && c <= '9') || c == '.')) all_digits_and_dots = false;
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(b.front()) || !alnum(b.back())) return bad("the bucket name must start and end with a letter or digit");
  if (b.find("..") != std::string::npos) return bad("the bucket name must not hold '..'");
  if (all_digits_and_dots && dots == 3) return bad("the bucket name must not be an IP address");
  for (size_t at = 0; !u.prefix.empty() && at <= u.prefix.size();) {
    const auto end = std::min(u.prefix.find('/', at), u.prefix.size());
    const std::string seg = u.prefix.substr(at, end - at);
    if (seg.empty() || seg == "." || seg == "..") return bad("the prefix has an empty, '.' or '..' segment");
    at = end + 1;
  }
  if (u.prefix.size() > 900) return bad("the prefix is longer than 900 characters");
  return u;
}

}  // namespace shard
