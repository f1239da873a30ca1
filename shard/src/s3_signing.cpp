// SigV4 helpers of the S3 client. See s3_signing.h for the contract.
#include "s3_signing.h"

#include "s3_text.h"

#include <openssl/evp.h>

#include <algorithm>
#include <stdexcept>

namespace shard::s3::detail {
namespace {

constexpr const char* kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

bool is_alnum(char c) { return is_digit(c) || is_lower(c) || (c >= 'A' && c <= 'Z'); }

}  // namespace

std::string sigv4_param(const std::string& region) { return "aws:amz:" + region + ":s3"; }

std::string request_url(const std::string& base, const std::string& bucket, const std::string& key,
                        const std::vector<std::pair<std::string, std::string>>& query) {
  std::string url = base + "/" + bucket;
  if (!key.empty()) url += "/" + uri_encode(key, true);
  const std::string q = canonical_query(query);
  if (!q.empty()) url += "?" + q;
  return url;
}

std::string payload_hash(const char* body, size_t n, bool https) {
  if (n == 0) return kEmptySha256;
  return https ? "UNSIGNED-PAYLOAD" : sha256_hex(body, n);
}

std::string uri_encode(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (is_alnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~' || (keep_slash && ch == '/')) {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string canonical_query(std::vector<std::pair<std::string, std::string>> params) {
  for (auto& [k, v] : params) {
    k = uri_encode(k, false);
    v = uri_encode(v, false);
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) out += '&';
    out += k + "=" + v;
  }
  return out;
}

std::string sha256_hex(const void* data, size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr) != 1 || len != 32) {
    throw std::runtime_error("s3: SHA-256 failed (OpenSSL EVP_Digest)");
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

}  // namespace shard::s3::detail
