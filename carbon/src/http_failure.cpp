#include "carbon/http_failure.h"

#include <netdb.h>
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
#include <openssl/x509.h>
#endif
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace carbon {

namespace {

// What the server's certificate is checked against, as messages name it.
[[maybe_unused]] std::string trust_anchors(const HttpClientOptions& o) {
  const std::string& var = o.ca_bundle_variable;
  if (o.ca_bundle.empty()) return "the system's CAs" + (var.empty() ? "" : " (" + var + " unset)");
  return var.empty() ? "the CA bundle '" + o.ca_bundle + "'" : var + "=" + o.ca_bundle;
}

// "0.5 s".
std::string seconds(std::chrono::milliseconds d) {
  char s[32];
  std::snprintf(s, sizeof s, "%g s", double(d.count()) / 1000);
  return s;
}

// "within --timeout 0.5 s" / "within 5 s".
std::string within_read_timeout(const HttpClientOptions& o) {
  return "within " + (o.read_timeout_origin.empty() ? "" : o.read_timeout_origin + " ") + seconds(o.read_timeout);
}

// Why connecting to `e` fails, found out once more by hand (httplib says
// only "Connection"): the host does not resolve ("unknown host '...': ..."),
// or connect(2) is refused ("connection refused"), times out ("no answer to
// connect") or fails otherwise. Empty when it connects now.
std::string connect_failure(const HttpEndpoint& e, std::chrono::milliseconds timeout) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  if (int rc = ::getaddrinfo(e.host.c_str(), std::to_string(e.port).c_str(), &hints, &res); rc != 0)
    return "unknown host '" + e.host + "': " + (rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc));
  std::string why;
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int err = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        const int n = ::poll(&p, 1, int(timeout.count()));
        socklen_t len = sizeof err;
        if (n == 0) err = ETIMEDOUT;
        else if (n < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    ::close(fd);
    if (err == 0) {
      why.clear();
      break;
    }
    why = err == ECONNREFUSED ? "connection refused" : err == ETIMEDOUT ? "no answer to connect" : std::strerror(err);
  }
  ::freeaddrinfo(res);
  return why;
}

}  // namespace

HttpFailure explain_http_failure(const httplib::Result& result, const httplib::Client& client,
                                 const HttpClientOptions& options, std::chrono::steady_clock::time_point sent) {
  using Kind = HttpFailure::Kind;
  const std::string& server = options.base_url;
  // The read timeout ran out (httplib reports it as a failed read or, on
  // https://, as a failed handshake).
  const bool timed_out = std::chrono::steady_clock::now() - sent >= options.read_timeout;
  const std::string no_connect = "cannot reach " + server + ": no answer to connect within " +
                                 std::to_string(options.connect_timeout.count()) + " ms";
  switch (result.error()) {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    case httplib::Error::SSLServerVerification: {
      const long v = client.get_openssl_verify_result();
      // X509_V_OK with a verification error: the chain is trusted but the
      // certificate does not name the host of the URL.
      return {Kind::kCertificate, "TLS: certificate verify failed for " + server + ": " +
                                      (v == X509_V_OK ? "the certificate does not name the host of " + server
                                                      : std::string(X509_verify_cert_error_string(v)) +
                                                            ", checked against " + trust_anchors(options))};
    }
    case httplib::Error::SSLLoadingCerts:
      return {Kind::kCaBundle, "TLS: cannot load " + trust_anchors(options) + " to verify " + server};
    case httplib::Error::SSLConnection:
      if (timed_out)
        return {Kind::kTimeout, "timeout: " + server +
                                    " accepted the connection but did not complete the TLS handshake " +
                                    within_read_timeout(options)};
      return {Kind::kHandshake, "TLS: handshake with " + server + " failed: it does not speak TLS there"};
#endif
    case httplib::Error::Read:
      if (timed_out)
        return {Kind::kTimeout,
                "timeout: " + server + " accepted the connection but sent no answer " + within_read_timeout(options)};
      return {Kind::kClosed, server + " closed the connection without an answer"};
    case httplib::Error::Write:
      // The server closed (or reset) the connection before it took the
      // whole request, or stopped reading it for write_timeout.
      if (std::chrono::steady_clock::now() - sent >= options.write_timeout)
        return {Kind::kTimeout, "timeout: " + server + " accepted the connection but did not take the request within " +
                                    seconds(options.write_timeout)};
      return {Kind::kClosed, server + " closed the connection before it took the request"};
    case httplib::Error::ConnectionTimeout:
      return {Kind::kConnectTimeout, no_connect};
    case httplib::Error::Connection: {
      const HttpEndpoint e = parse_http_base_url(server);
      const std::string why = connect_failure(e, options.connect_timeout);
      if (why == "connection refused")
        return {Kind::kRefused, "cannot reach " + server + ": connection refused: nothing listens at " + e.host + ":" +
                                    std::to_string(e.port)};
      if (why == "no answer to connect") return {Kind::kConnectTimeout, no_connect};
      return {Kind::kOther, "cannot reach " + server + ": " + (why.empty() ? "connection failed" : why)};
    }
    default:
      return {Kind::kOther, "cannot reach " + server + ": " + httplib::to_string(result.error())};
  }
}

}  // namespace carbon
