// What a caller outside shard/ needs to tell a passing object-store outage
// from a permanent failure (the worker: retryable exit 1 vs config error exit 2).
#pragma once

#include <stdexcept>
#include <string>

namespace shard {

// A request to an object store (S3) that failed after the client's own
// retries. `transient`: the failure may pass by itself (no connection, a
// DNS or connect failure, a timeout, HTTP 429/500/502/503/504, S3's
// SlowDown or RequestTimeout): a later try may succeed. Otherwise retrying
// will not help (403 AccessDenied / SignatureDoesNotMatch, 404 NoSuchBucket,
// a TLS certificate that does not verify, ...).
class ObjectStoreError : public std::runtime_error {
 public:
  ObjectStoreError(const std::string& message, bool transient)
      : std::runtime_error(message), transient(transient) {}
  bool transient;
};

}  // namespace shard
