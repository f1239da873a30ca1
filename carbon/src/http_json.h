// Internal: GET a JSON document with cpp-httplib, mapping every failure to
// ProviderError; and hourly aggregation of provider points.
#pragma once

#include "carbon/http_options.h"
#include "carbon/intensity.h"
#include "carbon/provider.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace carbon::detail {

// GET base_url + path with query `params` and `headers`. `who` prefixes
// messages ("carbon-aware-sdk GET /emissions/..."). The client is
// make_http_client's (carbon/http_client.h). Throws ProviderError: kNoData
// (no or a bad base URL), kTimeout (no answer: connect/read timeout,
// refused, TLS..., named by explain_http_failure), kHttp (non-2xx),
// kMalformed (not JSON).
nlohmann::json get_json(const HttpOptions& options, const std::string& path,
                        const std::multimap<std::string, std::string>& params,
                        const std::multimap<std::string, std::string>& headers, const std::string& who);

// Reads a required number member; null -> kGap, missing/other -> kMalformed.
double number_member(const nlohmann::json& obj, const char* key, const std::string& who);
// Reads a required timestamp member; bad -> kMalformed.
Time time_member(const nlohmann::json& obj, const char* key, const std::string& who);

// A series at `step` (5, 15, 30 or 60 minutes) from a source's points:
// the points' own step is validated (IntensitySeries::detect_step; a bad
// one -> ProviderError(kMalformed) naming the first bad timestamp); finer
// points are averaged per UTC step, coarser ones repeated over each finer
// step; a missing step between the first and last point -> kGap.
IntensitySeries regular_series(const std::string& zone, const std::vector<IntensitySample>& points,
                               const std::string& who, Seconds step);
// A forecast's series from the points of an answer, each read by
// point(element, who): those from the hour of `now` (one of them may be in
// force at the step of `now`) to the end of the horizon from that step,
// regularized at `step` (regular_series) and cut to [step of now, + horizon).
// None at or after `now` -> ProviderError(kNoData).
IntensitySeries forecast_series(const std::string& zone, const nlohmann::json& points,
                                const std::function<IntensitySample(const nlohmann::json&, const std::string&)>& point,
                                Time now, Seconds step, Hours horizon, const std::string& who);
// Hourly (regular_series at one hour).
IntensitySeries hourly_series(const std::string& zone, const std::vector<IntensitySample>& points,
                              const std::string& who);
// Throws CarbonError unless `resolution` is a supported step.
void check_resolution(const HttpOptions& options, const std::string& provider);

}  // namespace carbon::detail
