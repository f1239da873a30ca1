// Internal: GET a JSON document with cpp-httplib, mapping every failure to
// ProviderError; and hourly aggregation of provider points.
#pragma once

#include "carbon/http_options.h"
#include "carbon/intensity.h"
#include "carbon/provider.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace carbon::detail {

// GET base_url + path with query `params` and `headers`. `who` prefixes
// messages ("carbon-aware-sdk GET /emissions/..."). Throws ProviderError:
// kTimeout (connect/read timeout, refused), kHttp (non-2xx), kMalformed
// (not JSON).
nlohmann::json get_json(const HttpOptions& options, const std::string& path,
                        const std::multimap<std::string, std::string>& params,
                        const std::multimap<std::string, std::string>& headers, const std::string& who);

// Reads a required number member; null -> kGap, missing/other -> kMalformed.
double number_member(const nlohmann::json& obj, const char* key, const std::string& who);
// Reads a required timestamp member; bad -> kMalformed.
Time time_member(const nlohmann::json& obj, const char* key, const std::string& who);

// Averages points per UTC hour and returns an hourly series; a missing hour
// between the first and last point -> ProviderError(kGap).
IntensitySeries hourly_series(const std::string& zone, const std::vector<IntensitySample>& points,
                              const std::string& who);

}  // namespace carbon::detail
