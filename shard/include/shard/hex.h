// Bytes as lower-case hex and back: how checkpoints spell opaque bytes in
// text (a manifest's `extra`, the worker's generator state inside it).
// Header-only, no LibTorch.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace shard {

inline std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// The bytes of `hex` (either case). Throws std::invalid_argument on an odd
// length or a character that is not a hex digit (checkpoints are input).
inline std::string from_hex(std::string_view hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw std::invalid_argument("not a hex digit");
  };
  if (hex.size() % 2) throw std::invalid_argument("odd number of hex digits");
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) out += static_cast<char>(digit(hex[i]) * 16 + digit(hex[i + 1]));
  return out;
}

}  // namespace shard
