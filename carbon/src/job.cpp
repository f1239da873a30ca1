#include "carbon/job.h"

#include "carbon/error.h"

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

}  // namespace carbon
