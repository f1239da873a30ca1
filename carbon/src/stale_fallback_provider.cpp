#include "carbon/stale_fallback_provider.h"

namespace carbon {

StaleFallbackProvider::StaleFallbackProvider(std::shared_ptr<IntensityProvider> inner, Seconds max_fallback_age)
    : inner_(std::move(inner)), max_age_(max_fallback_age) {
  if (!inner_) throw CarbonError("StaleFallbackProvider: no inner provider");
}

std::string StaleFallbackProvider::name() const { return inner_->name(); }

Reading StaleFallbackProvider::current(const std::string& zone, Time now) {
  try {
    Reading r = inner_->current(zone, now);
    last_good_[zone] = r;
    return r;
  } catch (const ProviderError& e) {
    auto it = last_good_.find(zone);
    if (it == last_good_.end())
      throw ProviderError(e.kind(), std::string(e.what()) + " (no earlier reading to fall back on)");
    if (now - it->second.time > max_age_)
      throw ProviderError(e.kind(), std::string(e.what()) + " (last good reading " + format_time(it->second.time) +
                                        " is older than the fallback limit of " + std::to_string(max_age_.count()) + " s)");
    Reading r = it->second;
    r.stale = true;
    r.source = inner_->name() + " (stale: " + e.what() + ")";
    return r;
  }
}

IntensitySeries StaleFallbackProvider::history(const std::string& zone, Time from, Time to) {
  return inner_->history(zone, from, to);
}

Forecast StaleFallbackProvider::forecast(const std::string& zone, Time now, Hours horizon) {
  return inner_->forecast(zone, now, horizon);
}

}  // namespace carbon
