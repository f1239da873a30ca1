#include "carbon/job.h"

#include "carbon/error.h"

#include <algorithm>
#include <cmath>

namespace carbon {

Seconds duration_from_tokens(double tokens, double tokens_per_second) {
  if (!(std::isfinite(tokens) && tokens > 0)) throw CarbonError("duration_from_tokens: tokens must be > 0");
  if (!(std::isfinite(tokens_per_second) && tokens_per_second > 0))
    throw CarbonError("duration_from_tokens: throughput must be > 0 tokens/s");
  return Seconds{static_cast<long>(std::ceil(tokens / tokens_per_second))};
}

Time deadline_from_max_delay(const Job& job, Seconds max_delay) {
  if (max_delay.count() < 0) throw CarbonError("deadline_from_max_delay: negative delay");
  return job.submit + job.duration + max_delay;
}

std::string scaling_problem(const std::vector<ScalingPoint>& curve) {
  auto c = curve;
  std::sort(c.begin(), c.end(), [](const ScalingPoint& a, const ScalingPoint& b) { return a.gpus < b.gpus; });
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i].gpus < 1) return "scaling point with " + std::to_string(c[i].gpus) + " GPUs (must be >= 1)";
    if (!(std::isfinite(c[i].speed) && c[i].speed > 0))
      return "scaling point at " + std::to_string(c[i].gpus) + " GPUs has speed " + std::to_string(c[i].speed) +
             " (must be > 0)";
    if (i > 0 && c[i].gpus == c[i - 1].gpus) return "two scaling points at " + std::to_string(c[i].gpus) + " GPUs";
    if (i > 0 && c[i].speed < c[i - 1].speed)
      return "scaling curve falls from " + std::to_string(c[i - 1].gpus) + " to " + std::to_string(c[i].gpus) + " GPUs";
  }
  return "";
}

namespace {
// Absolute speed at width w on the curve (see Job::speed).
double curve_speed(const std::vector<ScalingPoint>& c, int w) {
  if (c.empty()) return w;
  const ScalingPoint* lo = nullptr;
  const ScalingPoint* hi = nullptr;
  for (const auto& p : c) {
    if (p.gpus <= w && (!lo || p.gpus > lo->gpus)) lo = &p;
    if (p.gpus >= w && (!hi || p.gpus < hi->gpus)) hi = &p;
  }
  if (lo && hi) {
    if (lo->gpus == hi->gpus) return lo->speed;
    return lo->speed + (hi->speed - lo->speed) * (w - lo->gpus) / static_cast<double>(hi->gpus - lo->gpus);
  }
  const ScalingPoint* p = lo ? lo : hi;
  return p->speed * w / static_cast<double>(p->gpus);
}
}  // namespace

double Job::speed(int w) const {
  if (w < 1) throw CarbonError("job " + id + ": speed at width " + std::to_string(w) + " (must be >= 1)");
  if (gpus < 1) throw CarbonError("job " + id + ": gpus must be >= 1");
  if (auto p = scaling_problem(scaling); !p.empty()) throw CarbonError("job " + id + ": " + p);
  return curve_speed(scaling, w) / curve_speed(scaling, gpus);
}

}  // namespace carbon
