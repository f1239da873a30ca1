// The command line of the benchmarks: integer flags ("--steps 5": every
// flag must be known, have a value and be >= 1; anything else exits 2
// naming the flag), the usage error, and the rank mode of those that re-run
// themselves as each rank.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <string>

namespace gsbench {

// "<program>: <msg>" and "usage: <program> <flags>" on stderr; exit 2.
[[noreturn]] inline void usage_exit(const char* program, const std::string& msg, const char* flags) {
  std::fprintf(stderr, "%s: %s\nusage: %s %s\n", program, msg.c_str(), program, flags);
  std::exit(2);
}

// body()'s exit code; an exception ends the program with
// "<program>: error: <what>" on stderr and exit 1 instead of std::terminate.
template <class F>
int run_guarded(const char* program, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return 1;
  }
}

// A benchmark that re-runs itself as each rank marks the rank processes
// with the environment variable `var`. Set: runs rank(its value) and returns
// its exit code (1, with "rank error: ..." on stderr, when it throws).
// Unset: nullopt (this is the driver).
template <class F>
std::optional<int> run_as_rank_if(const char* var, F&& rank) {
  const char* v = std::getenv(var);
  if (!v) return std::nullopt;
  try {
    return rank(std::string(v));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank error: %s\n", e.what());
    return 1;
  }
}

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
