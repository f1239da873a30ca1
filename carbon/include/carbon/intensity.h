// Grid carbon intensity: samples and a regular (fixed-step) series.
//
// Units: gCO2eq per kWh of electricity drawn from the grid. Times are UTC;
// a sample at time t holds for [t, t + step) (hour-beginning convention, as in
// Electricity Maps exports).
#pragma once

#include "carbon/time.h"

#include <string>
#include <vector>

namespace carbon {

struct IntensitySample {
  Time time;
  double gco2_per_kwh = 0;
  bool estimated = false;   // the source flagged this value as modelled
};

// A regular series: value i holds for [start + i*step, start + (i+1)*step).
// Values are >= 0 and finite (checked at construction). Prefix sums make
// integrals O(1).
class IntensitySeries {
 public:
  IntensitySeries() = default;
  // Throws CarbonError on an empty series, a non-positive step, or a negative
  // or non-finite value.
  IntensitySeries(std::string zone, Time start, Seconds step, std::vector<double> values);

  // Builds a regular series from sorted samples spaced exactly `step` apart.
  // Unsorted or duplicate timestamps, misaligned spacing and gaps longer than
  // `max_gap_fill` steps throw CarbonError naming the first bad timestamp.
  // Gaps of up to max_gap_fill missing steps are filled by holding the last
  // value (0 = no gap is tolerated).
  static IntensitySeries from_samples(std::string zone, const std::vector<IntensitySample>& samples,
                                      Seconds step = Hours{1}, int max_gap_fill = 0);

  const std::string& zone() const { return zone_; }
  Time start() const { return start_; }
  Time end() const { return start_ + step_ * static_cast<long>(values_.size()); }  // exclusive
  Seconds step() const { return step_; }
  size_t size() const { return values_.size(); }
  bool empty() const { return values_.empty(); }
  const std::vector<double>& values() const { return values_; }
  double operator[](size_t i) const { return values_[i]; }

  bool covers(Time from, Time to) const { return from >= start_ && to <= end() && from <= to; }
  // Index of the step containing t; throws CarbonError when t is outside.
  size_t index_of(Time t) const;
  // Value in force at t; throws CarbonError when t is outside [start, end).
  double at(Time t) const;

  // Integral of intensity over [from, to] in (gCO2/kWh) x hours, exact for the
  // piecewise-constant series (partial steps pro rata). Throws CarbonError
  // when the interval is not covered.
  double integral_hours(Time from, Time to) const;
  // Time-weighted mean intensity over [from, to) (to > from).
  double mean(Time from, Time to) const;
  double mean() const;

  // The sub-series [from, to) (both snapped outward to step boundaries).
  IntensitySeries slice(Time from, Time to) const;

 private:
  std::string zone_;
  Time start_{};
  Seconds step_{3600};
  std::vector<double> values_;
  std::vector<double> prefix_;   // prefix_[i] = sum of values_[0..i)
};

}  // namespace carbon
