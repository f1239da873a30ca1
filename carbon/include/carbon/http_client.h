// The one way GreenShard sets up an HTTP(S) client (cpp-httplib, with
// OpenSSL): the intensity providers (carbon/src/http_json.cpp), the
// Kubernetes executor, the greenshard CLI and the worker's status push and
// intensity poll all build theirs with make_http_client. Why a request on
// such a client got no answer: carbon/http_failure.h.
#pragma once

#include <httplib.h>

#include <chrono>
#include <string>

namespace carbon {

// How a client reaches one server.
struct HttpClientOptions {
  // "http://HOST[:PORT]" or "https://HOST[:PORT]", nothing after
  // (parse_http_base_url).
  std::string base_url;
  // https:// only: verify the server's certificate, chain and host name.
  bool verify = true;
  // The PEM bundle the chain is verified against; "" = the system's CAs.
  std::string ca_bundle;
  // The environment variable ca_bundle came from, when messages name it:
  // "GREENSHARD_CA_BUNDLE=/path" and "the system's CAs (GREENSHARD_CA_BUNDLE
  // unset)" then, instead of "the CA bundle '/path'" and "the system's CAs".
  std::string ca_bundle_variable;
  // Bounds on the connect, on each read (the wait for the answer included)
  // and on each write.
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds read_timeout{5000};
  std::chrono::milliseconds write_timeout{5000};
  // The flag read_timeout came from, when messages name it: "within
  // --timeout 0.5 s" rather than "within 0.5 s".
  std::string read_timeout_origin;
  // Sent as "Authorization: Bearer <token>" with every request; "" = none.
  std::string bearer_token;
};

// The host (an IPv6 literal without its brackets) and port of a base URL.
struct HttpEndpoint {
  std::string host;
  int port = 0;
};

// Checks a base URL: "http://" or "https://", a host name or IP literal
// ("[...]" for IPv6), an optional port in [1, 65535] (else 80 or 443),
// nothing after. Throws std::invalid_argument "'<url>' <what is wrong>
// (expected http[s]://HOST[:PORT], ...)"; callers prefix the field or flag
// the URL came from.
HttpEndpoint parse_http_base_url(const std::string& url);

// A URL with a path, "http[s]://HOST[:PORT][/PATH]", in two: its base (up to
// the first '/' after the scheme, checked as parse_http_base_url) and its
// path (from that '/', "" when there is none). The one splitter of such URLs
// (the worker's status and intensity URLs, the providers' base URLs, the
// controller's carbon source). Throws std::invalid_argument as
// parse_http_base_url.
struct HttpUrl {
  std::string base;
  std::string path;
};
HttpUrl split_http_url(const std::string& url);

// A client of options.base_url with the options' TLS settings, timeouts and
// bearer token. Throws std::invalid_argument as parse_http_base_url.
httplib::Client make_http_client(const HttpClientOptions& options);

}  // namespace carbon
