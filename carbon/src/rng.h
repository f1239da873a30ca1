// Internal: a small deterministic generator (splitmix64), identical on every
// platform, for the trace generator.
#pragma once

#include <cmath>
#include <cstdint>

namespace carbon::detail {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t x = (s_ += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) / 9007199254740992.0; }  // (0, 1)
  int uniform_int(int lo, int hi) {                                                           // [lo, hi]
    return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  double normal() { return std::sqrt(-2 * std::log(uniform())) * std::cos(2 * M_PI * uniform()); }
  int poisson(double lambda) {
    if (lambda <= 0) return 0;
    if (lambda < 30) {
      double l = std::exp(-lambda), p = 1;
      int k = 0;
      do {
        ++k;
        p *= uniform();
      } while (p > l);
      return k - 1;
    }
    return std::max(0, static_cast<int>(std::lround(lambda + std::sqrt(lambda) * normal())));
  }

 private:
  std::uint64_t s_;
};

}  // namespace carbon::detail
