// Clock: the one source of "now" for the registry and the scheduler, so
// tests can drive time by hand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace controller {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t now_ms() const = 0;  // unix ms
};

class SystemClock final : public Clock {
 public:
  int64_t now_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// Tests: time moves only when told.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms) : t_(start_ms) {}
  int64_t now_ms() const override { return t_.load(); }
  void advance_ms(int64_t d) { t_ += d; }
  void set_ms(int64_t t) { t_ = t; }

 private:
  std::atomic<int64_t> t_;
};

}  // namespace controller
