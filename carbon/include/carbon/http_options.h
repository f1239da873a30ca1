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
};

}  // namespace carbon
