// StaleFallbackProvider: the one explicit way to keep going on old data.
//
// Wraps a provider. current() passes through; when the inner provider throws
// ProviderError, it returns the last good reading for that zone marked
// stale = true with source "<inner> (stale: <error>)" -- as long as that
// reading is not older than max_fallback_age relative to `now`; otherwise the
// error propagates. history() and forecast() pass through unchanged (a stale
// forecast is never substituted).
#pragma once

#include "carbon/provider.h"

#include <map>
#include <memory>

namespace carbon {

class StaleFallbackProvider : public IntensityProvider {
 public:
  StaleFallbackProvider(std::shared_ptr<IntensityProvider> inner, Seconds max_fallback_age);
  std::string name() const override;
  Reading current(const std::string& zone, Time now) override;
  IntensitySeries history(const std::string& zone, Time from, Time to) override;
  Forecast forecast(const std::string& zone, Time now, Hours horizon) override;

 private:
  std::shared_ptr<IntensityProvider> inner_;
  Seconds max_age_;
  std::map<std::string, Reading> last_good_;
};

}  // namespace carbon
