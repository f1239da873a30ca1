// Why a request on a client of make_http_client (carbon/http_client.h) got
// no answer, in one line: the one explainer of TLS and connection failures.
// Callers frame it (the CLI's exit 3 and its "(use --ca-bundle FILE)" hint,
// the worker's "status push to URL failed (...)", a provider's error kind).
#pragma once

#include "carbon/http_client.h"

#include <chrono>
#include <string>

namespace carbon {

struct HttpFailure {
  enum class Kind {
    kCertificate,     // TLS: the chain is not trusted, or the certificate does not name the host
    kCaBundle,        // TLS: the CA bundle (or the system's CAs) could not be loaded
    kHandshake,       // TLS: the handshake failed at once (the server does not speak TLS)
    kTimeout,         // connected, but no handshake or no answer within read_timeout (or the
                      // request not taken within write_timeout)
    kClosed,          // connected, and the server closed without an answer, or before it took the request
    kRefused,         // nothing listens at the host and port
    kConnectTimeout,  // no answer to connect within connect_timeout
    kOther,           // anything else (an unknown host, ...): the cause names it
  };
  Kind kind = Kind::kOther;
  // One line naming the server and the cause, e.g. "TLS: certificate verify
  // failed for https://h:8443: unable to get local issuer certificate,
  // checked against the CA bundle 'ca.pem'", "TLS: certificate verify failed
  // for https://h:8443: the certificate does not name the host of
  // https://h:8443", "TLS: cannot load the CA bundle 'ca.pem' to verify
  // https://h:8443", "cannot reach http://h:8080: connection refused: nothing
  // listens at h:8080", "timeout: http://h:8080 accepted the connection but
  // sent no answer within 5 s".
  std::string cause;
};

// Explains `result`, a failed request (no response) sent at `sent` on
// `client`, made from `options`. A failure read_timeout or more after `sent`
// is a timeout. A failed connect (not a timed-out one) is looked into once
// more by hand, to tell an unknown host from a refused or otherwise failed
// connect: the host's lookup and a connect(2) bounded by connect_timeout.
HttpFailure explain_http_failure(const httplib::Result& result, const httplib::Client& client,
                                 const HttpClientOptions& options, std::chrono::steady_clock::time_point sent);

}  // namespace carbon
