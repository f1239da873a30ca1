#include "controller/core/base64.h"

#include <cctype>

namespace controller {

namespace {

const char* table(Base64 a) {
  return a == Base64::kUrl ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                           : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

int digit(char c, Base64 a) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == (a == Base64::kUrl ? '-' : '+')) return 62;
  if (c == (a == Base64::kUrl ? '_' : '/')) return 63;
  return -1;
}

}  // namespace

std::string base64_encode(const std::string& in, Base64 a) {
  const char* t = table(a);
  std::string out;
  int val = 0, bits = -6;
  for (unsigned char c : in) {
    val = (val << 8) + c;
    bits += 8;
    while (bits >= 0) {
      out.push_back(t[(val >> bits) & 0x3F]);
      bits -= 6;
    }
  }
  if (bits > -6) out.push_back(t[((val << 8) >> (bits + 8)) & 0x3F]);
  if (a == Base64::kStandard)
    while (out.size() % 4) out.push_back('=');
  return out;
}

std::optional<std::string> base64_decode(const std::string& in, Base64 a) {
  const bool standard = a == Base64::kStandard;
  std::string out;
  int val = 0, bits = -8, pad = 0;
  size_t n = 0;
  for (char c : in) {
    if (standard && std::isspace(static_cast<unsigned char>(c))) continue;
    ++n;
    if (standard && c == '=') {
      ++pad;
      continue;
    }
    if (pad) return std::nullopt;  // data after padding
    const int d = digit(c, a);
    if (d < 0) return std::nullopt;
    val = (val << 6) + d;
    bits += 6;
    if (bits >= 0) {
      out.push_back(char((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  if (standard && (n == 0 || n % 4 != 0 || pad > 2)) return std::nullopt;
  return out;
}

}  // namespace controller
