// A small, blocking S3 client for checkpoints (libcurl; path-style addressing).
//
// Requests are signed by libcurl itself (CURLOPT_AWS_SIGV4, "aws:amz:<region>:s3");
// nothing here hand-writes SigV4. See s3_signing.h for what libcurl 7.88 signs
// and how the payload hash (x-amz-content-sha256) is chosen.
//
// Thread-safe: every call may run on any thread at the same time (each call
// borrows its own CURL easy handle from a pool; pooled handles keep their
// connections open for reuse).
//
// Config, and config_from_env (the environment the checkpoint store reads):
// s3_config.h.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "s3_config.h"
#include "shard/object_store_error.h"

namespace shard::s3 {

// s3://bucket[/prefix] URLs and endpoint rules: shard/object_store_url.h.

// A failed request. what(): "s3: PUT s3://b/k: HTTP 403 SignatureDoesNotMatch: <Message>"
// or "s3: GET s3://b/k: Couldn't connect to server (<curl detail>) (14 attempts over 60.2 s)".
// `transient` (shard::ObjectStoreError): a failure that was retried until
// the budget ran out, and that may pass (see Config).
class Error : public shard::ObjectStoreError {
 public:
  Error(const std::string& message, int http_status, std::string code = "", bool transient = false)
      : shard::ObjectStoreError(message, transient), http_status(http_status), code(std::move(code)) {}
  int http_status;   // 0 when no HTTP response came (connection error, timeout)
  std::string code;  // the S3 error code ("NoSuchKey", ...); empty when none came
};

// One incomplete multipart upload (ListMultipartUploads).
struct Upload {
  std::string key, upload_id;
  std::string initiated;  // as the server wrote it (ISO 8601)
};

struct ListResult {
  std::vector<std::pair<std::string, int64_t>> objects;  // key, size (in key order)
  std::vector<std::string> prefixes;                     // common prefixes (with a delimiter)
};

class Client {
 public:
  // std::invalid_argument on a bad endpoint or an empty region.
  explicit Client(Config config);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Config& config() const;

  // OK when the bucket exists already (BucketAlreadyOwnedByYou / BucketAlreadyExists).
  void create_bucket(const std::string& bucket);
  void put(const std::string& bucket, const std::string& key, const void* data, size_t n);
  // The object's size; nullopt on 404.
  std::optional<int64_t> head(const std::string& bucket, const std::string& key);
  // The object's bytes; nullopt when the key does not exist (404 NoSuchKey).
  // A missing bucket (404 NoSuchBucket) is an Error, not nullopt.
  std::optional<std::string> get(const std::string& bucket, const std::string& key);
  // Exactly n bytes from offset into dst (Range: bytes=offset-(offset+n-1)).
  // Error on 404, on an unsatisfiable range (416), and when fewer bytes come.
  // Bytes a server sends beyond the range (s3rver answers bytes=0-0 with the
  // whole object) are placed by their Content-Range and dropped.
  void get_range(const std::string& bucket, const std::string& key, int64_t offset, size_t n,
                 void* dst);
  // ListObjectsV2 (follows continuation tokens). max_keys > 0 sets the page size
  // (S3 caps it at 1000, its default).
  ListResult list(const std::string& bucket, const std::string& prefix,
                  const std::string& delimiter = "", int max_keys = 0);
  // OK when the key does not exist.
  void remove(const std::string& bucket, const std::string& key);

  // Multipart upload: parts of at least 5 MiB except the last, numbered 1..10000.
  std::string create_multipart(const std::string& bucket, const std::string& key);  // UploadId
  std::string upload_part(const std::string& bucket, const std::string& key,
                          const std::string& upload_id, int part_number, const void* data,
                          size_t n);  // the part's ETag (with its quotes, as S3 sends it)
  // etags[i] is the ETag of part i + 1. A 200 whose body is an <Error> is an Error.
  void complete_multipart(const std::string& bucket, const std::string& key,
                          const std::string& upload_id, const std::vector<std::string>& etags);
  // OK when the upload is gone already (404 NoSuchUpload).
  void abort_multipart(const std::string& bucket, const std::string& key,
                       const std::string& upload_id);
  // ListMultipartUploads under prefix (follows key/upload-id markers): the
  // uploads begun and neither completed nor aborted, in key order.
  std::vector<Upload> list_multipart(const std::string& bucket, const std::string& prefix);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Exposed for tests.
namespace detail {
// The sleep before the retry that follows failed attempt `attempt` (0-based):
// u * min(cap, base * 2^attempt), u uniform in [0, 1) ("full jitter").
// The one backoff rule of the client; `u` is injectable for tests.
std::chrono::milliseconds backoff_delay(int attempt, std::chrono::milliseconds base,
                                        std::chrono::milliseconds cap, double u);
// Whether an HTTP answer is a transient failure worth retrying: 429, 500,
// 502, 503, 504, or the S3 error codes SlowDown, RequestTimeout,
// InternalError (whatever the status).
bool transient_http(long status, const std::string& code);
}  // namespace detail

}  // namespace shard::s3
