#include "carbon/intensity.h"

#include "carbon/error.h"

#include <cmath>
#include <cstdint>

namespace carbon {

bool is_supported_step(Seconds step) {
  return step == Seconds{300} || step == Seconds{900} || step == Seconds{1800} || step == Seconds{3600};
}

std::string step_name(Seconds step) {
  if (step == Hours{1}) return "hourly";
  if (step.count() > 0 && step.count() % 60 == 0 && step < Hours{1}) return std::to_string(step.count() / 60) + "-minute";
  return std::to_string(step.count()) + " s";
}

Time floor_to_step(Time t, Seconds step) {
  const auto s = to_unix(t), n = static_cast<std::int64_t>(step.count());
  return from_unix((s >= 0 ? s / n : -((-s + n - 1) / n)) * n);
}

Time ceil_to_step(Time t, Seconds step) {
  Time f = floor_to_step(t, step);
  return f == t ? t : f + step;
}

namespace {
bool on_grid(Time t, Seconds step) { return floor_to_step(t, step) == t; }
}  // namespace

Seconds IntensitySeries::detect_step(const std::string& zone, const std::vector<IntensitySample>& samples) {
  const std::string who = "intensity series '" + zone + "': ";
  if (samples.empty()) throw CarbonError(who + "no samples");
  for (size_t i = 1; i < samples.size(); ++i) {
    auto dt = samples[i].time - samples[i - 1].time;
    if (dt.count() <= 0)
      throw CarbonError(who + (dt.count() == 0 ? "duplicate" : "unsorted") + " timestamp " + format_time(samples[i].time));
  }
  Seconds step = Hours{1};
  if (samples.size() == 1) {
    for (Seconds s : {Seconds{3600}, Seconds{1800}, Seconds{900}, Seconds{300}})
      if (on_grid(samples[0].time, s)) return s;
    throw CarbonError(who + "timestamp " + format_time(samples[0].time) + " is not on the 5-minute grid");
  }
  auto first = samples[1].time - samples[0].time;
  if (first <= Hours{1}) {
    if (!is_supported_step(first))
      throw CarbonError(who + "timestamp " + format_time(samples[1].time) + " is " + std::to_string(first.count()) +
                        " s after the previous one: the step must be 5, 15, 30 or 60 minutes");
    step = first;
  }
  for (const auto& s : samples)
    if (!on_grid(s.time, step))
      throw CarbonError(who + "timestamp " + format_time(s.time) + " is not on the " + step_name(step) +
                        " grid of the series (misaligned, or a different step mixed in)");
  return step;
}

IntensitySeries::IntensitySeries(std::string zone, Time start, Seconds step, std::vector<double> values)
    : zone_(std::move(zone)), start_(start), step_(step), values_(std::move(values)) {
  if (values_.empty()) throw CarbonError("intensity series '" + zone_ + "': empty");
  if (step_.count() <= 0) throw CarbonError("intensity series '" + zone_ + "': step must be positive");
  prefix_.resize(values_.size() + 1);
  prefix_[0] = 0;
  for (size_t i = 0; i < values_.size(); ++i) {
    double v = values_[i];
    if (!std::isfinite(v) || v < 0)
      throw CarbonError("intensity series '" + zone_ + "': invalid value " + std::to_string(v) + " at " +
                        format_time(start_ + step_ * static_cast<long>(i)));
    prefix_[i + 1] = prefix_[i] + v;
  }
}

IntensitySeries IntensitySeries::from_samples(std::string zone, const std::vector<IntensitySample>& samples,
                                              Seconds step, int max_gap_fill) {
  if (samples.empty()) throw CarbonError("intensity series '" + zone + "': no samples");
  if (step == kDetectStep) step = detect_step(zone, samples);
  if (step.count() <= 0) throw CarbonError("intensity series '" + zone + "': step must be positive");
  std::vector<double> values;
  values.reserve(samples.size());
  values.push_back(samples[0].gco2_per_kwh);
  for (size_t i = 1; i < samples.size(); ++i) {
    auto dt = samples[i].time - samples[i - 1].time;
    if (dt.count() <= 0)
      throw CarbonError("intensity series '" + zone + "': " + (dt.count() == 0 ? "duplicate" : "unsorted") +
                        " timestamp " + format_time(samples[i].time));
    if (dt % step != Seconds{0})
      throw CarbonError("intensity series '" + zone + "': timestamp " + format_time(samples[i].time) +
                        " is not on the " + std::to_string(step.count()) + " s grid");
    long missing = dt / step - 1;
    if (missing > max_gap_fill)
      throw CarbonError("intensity series '" + zone + "': gap of " + std::to_string(missing) + " steps before " +
                        format_time(samples[i].time));
    for (long k = 0; k < missing; ++k) values.push_back(values.back());
    values.push_back(samples[i].gco2_per_kwh);
  }
  return IntensitySeries(std::move(zone), samples[0].time, step, std::move(values));
}

size_t IntensitySeries::index_of(Time t) const {
  if (values_.empty() || t < start_ || t >= end())
    throw CarbonError("intensity series '" + zone_ + "': " + format_time(t) + " outside [" + format_time(start_) +
                      ", " + format_time(end()) + ")");
  return static_cast<size_t>((t - start_) / step_);
}

double IntensitySeries::at(Time t) const { return values_[index_of(t)]; }

double IntensitySeries::integral_hours(Time from, Time to) const {
  if (values_.empty() || !covers(from, to))
    throw CarbonError("intensity series '" + zone_ + "': [" + format_time(from) + ", " + format_time(to) +
                      ") not covered by [" + format_time(start_) + ", " + format_time(end()) + ")");
  // Cumulative integral (value x seconds) from start_ to t.
  auto cum = [&](Time t) {
    auto off = t - start_;
    size_t i = static_cast<size_t>(off / step_);
    double whole = prefix_[i] * static_cast<double>(step_.count());
    if (i < values_.size()) whole += values_[i] * static_cast<double>((off - step_ * static_cast<long>(i)).count());
    return whole;
  };
  return (cum(to) - cum(from)) / 3600.0;
}

double IntensitySeries::mean(Time from, Time to) const {
  if (to <= from) throw CarbonError("intensity series '" + zone_ + "': mean over an empty interval");
  return integral_hours(from, to) * 3600.0 / static_cast<double>((to - from).count());
}

double IntensitySeries::mean() const { return mean(start_, end()); }

IntensitySeries IntensitySeries::slice(Time from, Time to) const {
  if (from < start_) from = start_;
  if (to > end()) to = end();
  if (to <= from) throw CarbonError("intensity series '" + zone_ + "': empty slice");
  size_t i0 = static_cast<size_t>((from - start_) / step_);
  size_t i1 = static_cast<size_t>((to - start_ + step_ - Seconds{1}) / step_);
  return IntensitySeries(zone_, start_ + step_ * static_cast<long>(i0), step_,
                         std::vector<double>(values_.begin() + i0, values_.begin() + i1));
}

}  // namespace carbon
