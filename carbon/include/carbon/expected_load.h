// ExpectedLoad: how busy all capacity is expected to be in each hour of the
// week, learned online from the load already realized -- the input of
// capacity pricing (PlacementOptions::expected_load_by_hour_of_week).
//
// Contract:
//   - observe(hour, busy_fraction) takes the realized busy fraction (busy /
//     total capacity, in [0, 1]) of the hour starting at floor_hour(hour);
//     hours are observed in increasing order, each once (an hour at or before
//     the last one observed is ignored, so replaying a history twice is safe);
//   - the first observation of an hour of the week sets it; later ones move
//     it by `learning_rate` (an exponential average, newest week weighted
//     learning_rate);
//   - ready() once every one of the 168 hours of the week has been seen;
//     until then by_hour_of_week() is empty (no pricing);
//   - never looks at the future: only what observe() was given.
// The simulator (simulator.h) and the controller's scheduler both learn
// through this class: the same learning, one implementation.
#pragma once

#include "carbon/time.h"

#include <vector>

namespace carbon {

class ExpectedLoad {
 public:
  explicit ExpectedLoad(double learning_rate = 0.3);

  void observe(Time hour, double busy_fraction);
  bool ready() const { return buckets_seen_ == 168; }
  // 168 values (Monday 00:00 UTC = 0) once ready(), else empty.
  std::vector<double> by_hour_of_week() const;
  // The last hour observed (Time::min() before any).
  Time last_observed() const { return last_; }
  double learning_rate() const { return rate_; }

  // 0..167, hours since Monday 00:00 UTC.
  static int hour_of_week(Time t);

 private:
  double rate_;
  std::vector<double> load_;
  std::vector<int> seen_;
  int buckets_seen_ = 0;
  Time last_ = Time::min();
};

}  // namespace carbon
