// Grid carbon intensity: samples and a regular (fixed-step) series.
//
// Units: gCO2eq per kWh of electricity drawn from the grid. Times are UTC;
// a sample at time t holds for [t, t + step) (hour-beginning convention, as in
// Electricity Maps exports).
//
// Steps: hourly is the default everywhere. Sub-hourly data (Electricity Maps,
// the Carbon Aware SDK and recorded CSV files serve 5-, 15- and 30-minute
// points) is supported at exactly 5, 15, 30 and 60 minutes, each on its UTC
// grid (a 30-minute series starts at :00 or :30). These steps nest (each
// divides the next), so a coarser series is expanded to a finer one exactly
// by repeating each value (placement does this, see placement.h).
#pragma once

#include "carbon/time.h"

#include <string>
#include <vector>

namespace carbon {

// The steps a series read from a source may have: 5, 15, 30 or 60 minutes.
bool is_supported_step(Seconds step);
// "5-minute", "15-minute", "30-minute", "hourly"; other steps "<n> s".
std::string step_name(Seconds step);
// Start of the step-long UTC interval containing t (step > 0; on the grid
// of unix time 0) / the next such boundary >= t.
Time floor_to_step(Time t, Seconds step);
Time ceil_to_step(Time t, Seconds step);

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
  // step == kDetectStep: the step is detect_step(samples) (whose rules
  // apply as well).
  static IntensitySeries from_samples(std::string zone, const std::vector<IntensitySample>& samples,
                                      Seconds step = Hours{1}, int max_gap_fill = 0);
  static constexpr Seconds kDetectStep{0};

  // The step of sorted samples, as a source serves them. Rule: the spacing
  // of the first two samples when it is at most 60 minutes, and then it must
  // be 5, 15, 30 or 60 minutes; a longer first spacing is an hourly series
  // with a gap; a single sample is hourly when on the hour, else the
  // coarsest supported step whose grid it is on. Throws CarbonError naming
  // the first bad timestamp: unsorted or duplicate timestamps, a first
  // spacing that is not a supported step, a timestamp off the step's UTC
  // grid (misaligned, or mixed with a finer step). A later spacing that is a
  // multiple of the step is a gap, for from_samples to judge.
  static Seconds detect_step(const std::string& zone, const std::vector<IntensitySample>& samples);

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
