// Integer flags of the benchmarks ("--steps 5"): every flag must be known,
// have a value and be >= 1; anything else exits 2 naming the flag.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace gsbench {

inline void parse_int_flags(int argc, char** argv, const std::map<std::string, int*>& flags, const char* program) {
  for (int i = 1; i < argc; ++i) {
    auto it = flags.find(argv[i]);
    if (it == flags.end() || i + 1 >= argc) {
      std::fprintf(stderr, "%s: unknown flag or missing value: %s\n", program, argv[i]);
      std::exit(2);
    }
    char* end = nullptr;
    const long v = std::strtol(argv[++i], &end, 10);
    if (*end != '\0' || v < 1 || v > 1 << 30) {
      std::fprintf(stderr, "%s: %s must be an integer >= 1, got '%s'\n", program, argv[i - 1], argv[i]);
      std::exit(2);
    }
    *it->second = static_cast<int>(v);
  }
}

}  // namespace gsbench
