// libFuzzer target for the HTTP intensity providers' answer parsers
// (carbon/src/carbon_aware_sdk_provider.cpp, electricitymaps_provider.cpp and
// the helpers in http_json.cpp). Their sources are included here with
// detail::get_json -- the HTTP GET -- renamed away and replaced by one that
// answers the fuzz input parsed as JSON, as the real one would (a body that
// is not JSON is ProviderError kMalformed). The first byte picks the
// provider, the call (current / history / forecast) and the resolution.
// Every failure must be a carbon::CarbonError (ProviderError).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "carbon/src/http_json.h"
#define get_json get_json_http_unused
#include "carbon/src/http_json.cpp"
#undef get_json
#include "carbon/src/carbon_aware_sdk_provider.cpp"
#include "carbon/src/electricitymaps_provider.cpp"

namespace {
std::string g_body;
int g_calls = 0;
}  // namespace

namespace carbon::detail {
nlohmann::json get_json(const HttpOptions&, const std::string& path, const std::multimap<std::string, std::string>&,
                        const std::multimap<std::string, std::string>&, const std::string& who) {
  if (++g_calls > 64) throw ProviderError(ProviderError::Kind::kTimeout, who + ": too many requests");
  try {
    return nlohmann::json::parse(g_body);
  } catch (const nlohmann::json::exception& e) {
    throw ProviderError(ProviderError::Kind::kMalformed, who + " GET " + path + ": body is not JSON (" + e.what() + ")");
  }
}
}  // namespace carbon::detail

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t sel = data[0];
  g_body.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  g_calls = 0;
  carbon::HttpOptions o;
  o.base_url = "http://127.0.0.1:1";
  static const int kMinutes[4] = {60, 30, 15, 5};
  o.resolution = carbon::Seconds{60 * kMinutes[(sel >> 2) & 3]};
  if (sel & 16) o.max_age = carbon::Seconds{0};
  const carbon::Time now = carbon::parse_time("2023-06-01T12:00:00Z");
  try {
    std::unique_ptr<carbon::IntensityProvider> p;
    if (sel & 32)
      p = std::make_unique<carbon::ElectricityMapsProvider>(o, "token");
    else
      p = std::make_unique<carbon::CarbonAwareSdkProvider>(o);
    switch (sel & 3) {
      case 0:
        (void)p->current("DE", now);
        break;
      case 1: {
        // Within the last day, or (64) older: Electricity Maps' past-range.
        const carbon::Time from = now - carbon::Hours{(sel & 64) ? 24 * 12 : 6};
        (void)p->history("DE", from, from + carbon::Hours{3});
        break;
      }
      default: {
        auto f = p->forecast("DE", now, carbon::Hours{(sel & 64) ? 48 : 3});
        (void)f.series.size();
        break;
      }
    }
  } catch (const carbon::CarbonError&) {
  }
  return 0;
}
