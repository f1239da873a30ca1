// Options shared by the HTTP providers (cpp-httplib clients).
#pragma once

#include "carbon/time.h"

#include <string>

namespace carbon {

struct HttpOptions {
  // "http://host:port" or "https://host" (https needs OpenSSL support in
  // cpp-httplib, which carbon enables). A path prefix is allowed
  // ("http://host:port/api").
  std::string base_url;
  std::chrono::milliseconds connect_timeout{3000};
  std::chrono::milliseconds read_timeout{10000};
  // current(): a point older than this (relative to `now`) is an error
  // (kStale). 0 = no check.
  Seconds max_age{Hours{3}};
  // The step of the series history() and forecast() return: 60 minutes (the
  // default), 30, 15 or 5 (anything else: CarbonError when the provider is
  // built). The source's points are validated at their own step (5, 15, 30
  // or 60 minutes on the UTC grid, never mixed: IntensitySeries::
  // detect_step); points finer than `resolution` are averaged per step,
  // coarser ones are held (repeated) over each finer step -- exact for
  // piecewise-constant data. Electricity Maps is asked for sub-hourly data
  // (temporalGranularity) only when resolution is below an hour.
  Seconds resolution{Hours{1}};
};

}  // namespace carbon
