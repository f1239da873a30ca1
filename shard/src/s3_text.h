// The text helpers that more than one file of the S3 client needs
// (s3_config.cpp, s3_signing.cpp, s3_xml.cpp, s3_client.cpp): ASCII
// character classes, locale-free unlike <cctype>, and trim().
#pragma once

#include <string>

namespace shard::s3::detail {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
// XML's whitespace: ' ', '\t', '\r', '\n'.
inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// s without is_space characters at either end.
inline std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

}  // namespace shard::s3::detail
