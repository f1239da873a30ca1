#include "carbon/expected_load.h"

#include "carbon/error.h"
#include "carbon/time_ms.h"

#include <cmath>
#include <string>

namespace carbon {

ExpectedLoad::ExpectedLoad(double learning_rate) : rate_(learning_rate), load_(168, 0.0), seen_(168, 0) {
  if (!(learning_rate > 0 && learning_rate <= 1))
    throw CarbonError("expected load: learning rate must be in (0, 1], got " + std::to_string(learning_rate));
}

int ExpectedLoad::hour_of_week(Time t) {
  const long long h = std::chrono::floor<Hours>(t).time_since_epoch().count();  // hours since the epoch
  const long long day = floor_mod(floor_div(h, kHoursPerDay), 7);  // 1970-01-01 was a Thursday: day 0 = Thursday
  const long long hod = floor_mod(h, kHoursPerDay);
  return static_cast<int>(((day + 3) % 7) * 24 + hod);   // Monday 00:00 = 0
}

void ExpectedLoad::observe(Time hour, double busy_fraction) {
  const Time h = floor_hour(hour);
  if (last_ != Time::min() && h <= last_) return;
  last_ = h;
  if (!std::isfinite(busy_fraction)) busy_fraction = 0;
  const auto how = static_cast<size_t>(hour_of_week(h));
  if (seen_[how]++ == 0) {
    load_[how] = busy_fraction;
    ++buckets_seen_;
  } else {
    load_[how] += rate_ * (busy_fraction - load_[how]);
  }
}

std::vector<double> ExpectedLoad::by_hour_of_week() const {
  if (!ready()) return {};
  return load_;
}

}  // namespace carbon
