#include "carbon/http_client.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace carbon {

HttpEndpoint parse_http_base_url(const std::string& url) {
  const auto bad = [&](const std::string& why) -> HttpEndpoint {
    throw std::invalid_argument("'" + url + "' " + why +
                                " (expected http[s]://HOST[:PORT], e.g. http://127.0.0.1:8080)");
  };
  const bool https = url.rfind("https://", 0) == 0;
  if (!https && url.rfind("http://", 0) != 0) return bad("is not an http:// or https:// URL");
  const std::string rest = url.substr(https ? 8 : 7);
  HttpEndpoint e;
  e.port = https ? 443 : 80;
  size_t end;  // just past the host
  if (!rest.empty() && rest[0] == '[') {
    end = rest.find(']');
    if (end == std::string::npos) return bad("has an unclosed '[' (IPv6 literal)");
    e.host = rest.substr(1, end - 1);
    for (char ch : e.host)
      if (!std::isxdigit(static_cast<unsigned char>(ch)) && ch != ':' && ch != '.')
        return bad("has a bad IPv6 literal");
    ++end;
  } else {
    end = std::min(rest.find_first_of(":/?#"), rest.size());
    e.host = rest.substr(0, end);
    for (char ch : e.host)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-' && ch != '_')
        return bad("has a bad character in its host name");
  }
  if (e.host.empty()) return bad("has no host");
  if (end < rest.size() && rest[end] == ':') {
    const size_t port_end = std::min(rest.find_first_of("/?#", end), rest.size());
    const std::string port = rest.substr(end + 1, port_end - end - 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
      return bad("has a bad port (1-65535)");
    e.port = std::stoi(port);
    end = port_end;
  }
  if (end < rest.size()) return bad("has a path, query or fragment; give only the scheme, host and port");
  return e;
}

HttpUrl split_http_url(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t slash = scheme == std::string::npos ? std::string::npos : url.find('/', scheme + 3);
  HttpUrl u;
  u.base = url.substr(0, slash);
  if (slash != std::string::npos) u.path = url.substr(slash);
  parse_http_base_url(u.base);
  return u;
}

httplib::Client make_http_client(const HttpClientOptions& options) {
  parse_http_base_url(options.base_url);
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
  // A portable build on a machine without OpenSSL (cmake/Dependencies.cmake).
  if (options.base_url.rfind("https://", 0) == 0)
    throw std::invalid_argument("'" + options.base_url +
                                "': https:// needs TLS, and this build has none (no OpenSSL when it was built)");
#endif
  httplib::Client client(options.base_url);
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  // Both only matter to an https:// client.
  client.enable_server_certificate_verification(options.verify);
  if (!options.ca_bundle.empty()) client.set_ca_cert_path(options.ca_bundle);
#endif
  client.set_connection_timeout(options.connect_timeout);
  client.set_read_timeout(options.read_timeout);
  client.set_write_timeout(options.write_timeout);
  if (!options.bearer_token.empty()) client.set_bearer_token_auth(options.bearer_token);
  return client;
}

}  // namespace carbon
