// SigV4 for the S3 client: libcurl signs every request (s3_client.cpp sets
// CURLOPT_AWS_SIGV4 to sigv4_param(region), the credentials through
// CURLOPT_USERNAME / CURLOPT_PASSWORD, which is USERPWD without the
// "user:password" split, so an access key can hold any byte); nothing here
// hand-writes SigV4. This file builds what libcurl signs the way SigV4 wants
// it: the request URL (request_url), the payload hash (payload_hash), and
// their parts, which s3_client_test checks.
//
// What libcurl 7.88 (Debian 12) does, from lib/http_aws_sigv4.c of that
// release, and what the client does about each point:
//   * It signs "host", "x-amz-date" and every header we pass in
//     CURLOPT_HTTPHEADER (names lowercased, values trimmed), and nothing curl
//     adds by itself (Content-Length, Expect, Accept). So every header we pass
//     is really sent: never a "Name:" entry (curl would drop the header but
//     still sign it).
//   * It does not add x-amz-content-sha256 (S3 requires it), but since 7.87 it
//     takes the payload hash of the canonical request from that header when we
//     send one (it only hashes CURLOPT_POSTFIELDS otherwise; an upload body
//     read through a callback would be signed as the empty string). So we
//     always send x-amz-content-sha256, and its value is what gets signed:
//       - bodiless requests: the SHA-256 of the empty string;
//       - a body over https://: "UNSIGNED-PAYLOAD", which S3 accepts for any
//         request (TLS already protects the body; the AWS SDKs do the same
//         for S3 over HTTPS, and it saves hashing gigabytes of checkpoint);
//       - a body over plain http:// (an in-cluster MinIO, say): the real
//         SHA-256 of the body (OpenSSL libcrypto), so the signature covers
//         the bytes too and S3 rejects a body changed on the way.
//   * The canonical URI and query string are the URL's path and query exactly
//     as given (7.88 neither re-encodes nor sorts them). So we build them
//     canonical ourselves: the key RFC 3986-encoded once with '/' kept (S3's
//     rule; CURLOPT_PATH_AS_IS stops curl from collapsing "." and ".."), and
//     the query sorted by name with every "name=value" encoded
//     (canonical_query; "?uploads" is sent as "?uploads=").
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace shard::s3::detail {

// CURLOPT_AWS_SIGV4 for S3 in region: "aws:amz:<region>:s3".
std::string sigv4_param(const std::string& region);

// The URL of a request, as libcurl sends and signs it:
// base/bucket[/uri_encode(key, true)][?canonical_query(query)]; base is the
// endpoint's scheme://host[:port].
std::string request_url(const std::string& base, const std::string& bucket, const std::string& key,
                        const std::vector<std::pair<std::string, std::string>>& query);

// The x-amz-content-sha256 of a request with a body of n bytes (see above):
// the SHA-256 of the empty string when n == 0, "UNSIGNED-PAYLOAD" over
// https, else sha256_hex of the body.
std::string payload_hash(const char* body, size_t n, bool https);

// RFC 3986 percent-encoding (uppercase hex); unreserved characters stay, and
// '/' stays too when keep_slash (object keys in the path).
std::string uri_encode(const std::string& s, bool keep_slash);
// The canonical query string SigV4 expects (sorted by name, "name=value",
// both uri_encoded); the client sends exactly this string.
std::string canonical_query(std::vector<std::pair<std::string, std::string>> params);
// Lowercase hex SHA-256 (OpenSSL libcrypto); std::runtime_error when OpenSSL fails.
std::string sha256_hex(const void* data, size_t n);

}  // namespace shard::s3::detail
