// The text a config-file fuzz target parses: the input after its first byte
// (which picks the parser), or nullopt when it names /dev, /proc or /sys.
// The parsers read the files a config names (kubeconfig, token_file,
// api_key_file), and a FIFO or /dev/zero would hang the fuzzer, not find a
// parser bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace fuzzing {

inline std::optional<std::string> config_text(const uint8_t* data, size_t size) {
  if (size == 0) return std::nullopt;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  for (const char* special : {"/dev", "/proc", "/sys"})
    if (text.find(special) != std::string::npos) return std::nullopt;
  return text;
}

}  // namespace fuzzing
