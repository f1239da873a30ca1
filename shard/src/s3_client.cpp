// S3 client on libcurl: the transport (Client::Impl::perform: pooled easy
// handles, retries) and the operations on it. See s3_client.h for the
// contract; the other parts: s3_config.h (Config, the environment),
// s3_signing.h (what libcurl signs, and what perform() does about it),
// s3_xml.h (the responses read).
#include "s3_client.h"

#include "s3_signing.h"
#include "s3_text.h"
#include "s3_xml.h"
#include "shard/object_store_url.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

namespace shard::s3 {
namespace {

constexpr size_t kMaxErrorBody = 64 * 1024;  // of a non-2xx response body we keep
constexpr size_t kMaxPooledHandles = 32;

std::once_flag g_curl_once;

void curl_global() {
  std::call_once(g_curl_once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::runtime_error("s3: curl_global_init failed");
  });
}

// "" when the bucket name follows the S3 naming rules, else why not.
std::string check_bucket(const std::string& b) {
  if (b.empty()) return "is empty";
  return object_store_url_problem("s3://" + b);
}

void require_bucket(const std::string& bucket) {
  std::string why = check_bucket(bucket);
  if (!why.empty()) throw std::invalid_argument("s3: bad bucket name \"" + bucket + "\": " + why);
}

void require_key(const std::string& bucket, const std::string& key) {
  require_bucket(bucket);
  if (key.empty()) throw std::invalid_argument("s3: empty object key in bucket " + bucket);
  if (key.size() > 1024) throw std::invalid_argument("s3: object key longer than 1024 bytes in bucket " + bucket);
}

std::string s3_url(const std::string& bucket, const std::string& key) {
  return key.empty() ? "s3://" + bucket : "s3://" + bucket + "/" + key;
}

// Decoding for ListObjectsV2 with encoding-type=url (S3 encodes ' ' as '+').
std::string url_decode_plus(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  auto hexval = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
      out += static_cast<char>(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Printable excerpt of a non-XML error body (an HTML page from a proxy, say).
std::string excerpt(const std::string& body) {
  std::string out;
  for (char c : body.substr(0, 200)) out += (c >= 0x20 && c < 0x7F) ? c : ' ';
  return detail::trim(out);
}

std::string lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// ---------------------------------------------------------------- requests --

struct Request {
  std::string method;  // GET HEAD PUT POST DELETE
  std::string bucket, key;
  std::vector<std::pair<std::string, std::string>> query;
  std::vector<std::string> headers;  // "Name: value", each one sent (and signed)
  const char* body = nullptr;        // PUT / POST
  size_t body_len = 0;
  // get_range: a 2xx body goes to dst (exactly dst_len bytes from dst_offset).
  char* dst = nullptr;
  size_t dst_len = 0;
  int64_t dst_offset = 0;
  // CompleteMultipartUpload may answer 200 with an <Error> body, to be retried.
  bool error_in_200 = false;
};

struct Response {
  long status = 0;
  std::string body;  // the 2xx body (unless dst), or up to kMaxErrorBody of an error body
  std::vector<std::pair<std::string, std::string>> headers;  // of the last response; names lowercased
  size_t dst_written = 0;
  int64_t body_seen = 0;     // body bytes received
  int64_t body_base = -1;    // object offset of the first body byte (dst mode; -1: not known yet)
  bool dst_done = false;     // dst is full and the server sent more: we stopped the transfer
  bool dst_bad_range = false;  // a 206 without a usable Content-Range
  std::string callback_error;  // an exception in a callback (out of memory), which stopped the transfer
  int attempts = 0;
  double elapsed_s = 0;  // since the first attempt began

  std::optional<std::string> header(const std::string& name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return std::nullopt;
  }
  bool ok() const { return status >= 200 && status < 300; }
};

struct Transfer {
  const Request* req;
  Response* resp;
  size_t read_pos = 0;
};

// Exceptions must not cross libcurl's C frames: a callback that throws stops
// the transfer instead, and perform() reports it.
template <class F>
size_t guarded(Transfer* t, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    t->resp->callback_error = e.what();
  } catch (...) {
    t->resp->callback_error = "unknown exception";
  }
  return 0;
}

size_t on_header_impl(char* data, size_t size, size_t nitems, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  const size_t n = size * nitems;
  std::string line(data, n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {  // a new status line (also after "100 Continue")
    size_t sp = line.find(' ');
    t->resp->status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    t->resp->headers.clear();
    return n;
  }
  size_t colon = line.find(':');
  if (colon == std::string::npos) return n;
  std::string name = lower(detail::trim(line.substr(0, colon)));
  std::string value = detail::trim(line.substr(colon + 1));
  if (name == "content-length" && t->resp->ok() && !t->req->dst && t->req->method == "GET") {
    const long long len = std::strtoll(value.c_str(), nullptr, 10);
    if (len > 0) t->resp->body.reserve(static_cast<size_t>(len));
  }
  t->resp->headers.emplace_back(std::move(name), std::move(value));
  return n;
}

size_t on_header(char* data, size_t size, size_t nitems, void* userdata) {
  return guarded(static_cast<Transfer*>(userdata), [&] { return on_header_impl(data, size, nitems, userdata); });
}

size_t on_write_impl(char* data, size_t size, size_t nmemb, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  Response& r = *t->resp;
  const Request& q = *t->req;
  const size_t n = size * nmemb;
  if (q.dst && r.ok()) {
    if (r.body_base < 0) {
      // Where the body starts in the object: Content-Range for a 206; 0 for a
      // 200 (the server ignored Range and sends the whole object).
      r.body_base = 0;
      if (r.status == 206) {
        auto cr = r.header("content-range");
        long long first = -1, last = -1;
        if (!cr || std::sscanf(cr->c_str(), "bytes %lld-%lld", &first, &last) != 2 || first < 0 || last < first) {
          r.dst_bad_range = true;
          return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
        }
        r.body_base = first;
      }
    }
    // Keep the window [dst_offset, dst_offset + dst_len) of what comes. A
    // server may send more than asked (s3rver answers "bytes=0-0" with the
    // whole object from 0); once the window is full, stop the transfer.
    const int64_t begin = r.body_base + r.body_seen, end = begin + static_cast<int64_t>(n);
    const int64_t win_end = q.dst_offset + static_cast<int64_t>(q.dst_len);
    const int64_t wb = std::max(begin, q.dst_offset);
    const int64_t we = std::min(end, win_end);
    if (we > wb) {
      std::memcpy(q.dst + (wb - q.dst_offset), data + (wb - begin), static_cast<size_t>(we - wb));
      r.dst_written += static_cast<size_t>(we - wb);
    }
    r.body_seen += static_cast<int64_t>(n);
    if (end > win_end && r.dst_written == q.dst_len) {
      r.dst_done = true;
      return 0;  // aborts the transfer (CURLE_WRITE_ERROR); perform() takes it as done
    }
    return n;
  }
  if (!r.ok() && r.body.size() >= kMaxErrorBody) return n;  // enough of an error page
  r.body.append(data, n);
  r.body_seen += static_cast<int64_t>(n);
  return n;
}

size_t on_write(char* data, size_t size, size_t nmemb, void* userdata) {
  return guarded(static_cast<Transfer*>(userdata), [&] { return on_write_impl(data, size, nmemb, userdata); });
}

size_t on_read(char* buffer, size_t size, size_t nitems, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  const size_t want = size * nitems;
  const size_t left = t->req->body_len - t->read_pos;
  const size_t n = std::min(want, left);
  if (n) std::memcpy(buffer, t->req->body + t->read_pos, n);
  t->read_pos += n;
  return n;
}

// curl rewinds the body when it must send it again (a reused connection that
// turned out dead, say).
int on_seek(void* userdata, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(userdata);
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > t->req->body_len) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  t->read_pos = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

bool retryable_transport(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
      return true;
    default:
      return false;
  }
}

// Sleeps the backoff before the retry after failed attempt `attempt`, cut to
// what is left of the budget; false (no sleep) when nothing is left.
bool backoff(const Config& cfg, int attempt, std::chrono::steady_clock::time_point first) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const auto left = cfg.retry_budget - std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - first);
  if (left.count() <= 0) return false;
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  std::this_thread::sleep_for(std::min(left, detail::backoff_delay(attempt, cfg.retry_base, cfg.retry_cap, u)));
  return true;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

// " (5 attempts over 3.2 s)"; "" for one attempt.
std::string attempts_note(int attempts, double seconds) {
  if (attempts <= 1) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, " (%d attempts over %.1f s)", attempts, seconds);
  return buf;
}

Error http_error(const std::string& op, const Response& r) {
  std::string code, message;
  if (detail::xml_root(r.body) == "Error") {
    code = detail::trim(detail::xml_text(r.body, "Code").value_or(""));
    message = detail::trim(detail::xml_text(r.body, "Message").value_or(""));
  }
  std::string what = "s3: " + op + ": HTTP " + std::to_string(r.status);
  if (!code.empty()) what += " " + code;
  if (!message.empty()) {
    what += ": " + message;
  } else if (code.empty() && !r.body.empty()) {
    what += ": " + excerpt(r.body);
  }
  return Error(what + attempts_note(r.attempts, r.elapsed_s), static_cast<int>(r.status), code,
               detail::transient_http(r.status, code));
}

std::string error_code(const Response& r) {
  if (detail::xml_root(r.body) != "Error") return "";
  return detail::trim(detail::xml_text(r.body, "Code").value_or(""));
}

}  // namespace

// ------------------------------------------------------------------ detail --

namespace detail {

std::chrono::milliseconds backoff_delay(int attempt, std::chrono::milliseconds base, std::chrono::milliseconds cap,
                                        double u) {
  // min(cap, base * 2^attempt) without overflow: doubling stops at the cap.
  double ceiling = static_cast<double>(std::max<int64_t>(0, base.count()));
  const double c = static_cast<double>(std::max<int64_t>(0, cap.count()));
  for (int i = 0; i < attempt && ceiling < c; ++i) ceiling *= 2;
  ceiling = std::min(ceiling, c);
  u = std::clamp(u, 0.0, 1.0);
  return std::chrono::milliseconds(static_cast<int64_t>(u * ceiling));
}

bool transient_http(long status, const std::string& code) {
  if (code == "SlowDown" || code == "RequestTimeout" || code == "InternalError") return true;
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

}  // namespace detail

// ------------------------------------------------------------------- client --

struct Client::Impl {
  Config cfg;
  std::string base;  // scheme://host[:port]
  bool https = false;
  std::string sigv4;  // "aws:amz:<region>:s3"
  std::mutex mu;
  std::vector<CURL*> pool;

  ~Impl() {
    for (CURL* h : pool) curl_easy_cleanup(h);
  }

  CURL* acquire() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!pool.empty()) {
        CURL* h = pool.back();
        pool.pop_back();
        return h;
      }
    }
    CURL* h = curl_easy_init();
    if (!h) throw std::runtime_error("s3: curl_easy_init failed");
    return h;
  }

  void release(CURL* h, bool healthy) {
    if (healthy) {
      std::lock_guard<std::mutex> lock(mu);
      if (pool.size() < kMaxPooledHandles) {
        pool.push_back(h);
        return;
      }
    }
    curl_easy_cleanup(h);
  }

  // One request, retried on transient failures (Config: full-jitter
  // backoff within retry_budget). Returns the last
  // response, whatever its status; throws Error when no response came.
  Response perform(const Request& req, const std::string& op) {
    const std::string url = detail::request_url(base, req.bucket, req.key, req.query);

    Slist headers;
    auto add_header = [&](const std::string& h) {
      curl_slist* l = curl_slist_append(headers.get(), h.c_str());
      if (!l) throw std::bad_alloc();
      if (!headers) headers.reset(l);  // later appends keep the same head
    };
    add_header("x-amz-content-sha256: " + detail::payload_hash(req.body, req.body_len, https));
    if (!cfg.session_token.empty()) add_header("x-amz-security-token: " + cfg.session_token);
    for (const auto& h : req.headers) add_header(h);

    const auto first = std::chrono::steady_clock::now();
    for (int attempt = 0;; ++attempt) {
      Response resp;
      resp.attempts = attempt + 1;
      Transfer t{&req, &resp};
      char errbuf[CURL_ERROR_SIZE] = {0};
      CURL* h = acquire();
      curl_easy_reset(h);
      curl_easy_setopt(h, CURLOPT_URL, url.c_str());
      curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
      curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
      curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(cfg.timeout.count()));
      curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(cfg.timeout.count()));
      curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
      curl_easy_setopt(h, CURLOPT_USERAGENT, "greenshard-s3/1");
      curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
      curl_easy_setopt(h, CURLOPT_USERNAME, cfg.access_key.c_str());
      curl_easy_setopt(h, CURLOPT_PASSWORD, cfg.secret_key.c_str());
      curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
      curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
      curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
      curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
      curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
      if (req.method == "HEAD") {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
      } else if (req.method == "PUT") {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, &t);
        curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(h, CURLOPT_SEEKDATA, &t);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(req.body_len));
        curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 512L * 1024L);
      } else if (req.method == "POST") {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body ? req.body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body_len));
      } else if (req.method == "DELETE") {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
      } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
      }

      const CURLcode rc = curl_easy_perform(h);
      if (rc == CURLE_OK) {
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        resp.status = status;
      }
      // Clear what points into this frame before the handle goes back to the pool.
      curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
      curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
      release(h, rc == CURLE_OK);
      resp.elapsed_s = seconds_since(first);

      if (rc == CURLE_WRITE_ERROR && resp.dst_done) return resp;  // got all we asked for
      if (!resp.callback_error.empty()) {
        throw Error("s3: " + op + ": " + resp.callback_error, static_cast<int>(resp.status));
      }
      if (rc == CURLE_WRITE_ERROR && resp.dst_bad_range) {
        throw Error("s3: " + op + ": HTTP " + std::to_string(resp.status) + " without a valid Content-Range",
                    static_cast<int>(resp.status));
      }
      if (rc == CURLE_OK) {
        const bool error_200 = req.error_in_200 && resp.status == 200 && detail::xml_root(resp.body) == "Error";
        const bool retry = resp.ok() && !error_200 ? false : detail::transient_http(error_200 ? 0 : resp.status,
                                                                                     error_code(resp));
        if (!retry || !backoff(cfg, attempt, first)) return resp;
        continue;
      }
      std::string what = curl_easy_strerror(rc);
      if (errbuf[0]) what += std::string(" (") + errbuf + ")";
      const bool transient = retryable_transport(rc);
      if (!transient || !backoff(cfg, attempt, first)) {
        throw Error("s3: " + op + ": " + what + attempts_note(attempt + 1, resp.elapsed_s), 0, "", transient);
      }
    }
  }
};

Client::Client(Config config) : impl_(std::make_unique<Impl>()) {
  curl_global();
  std::string why = detail::check_endpoint(config.endpoint, &impl_->base, &impl_->https);
  if (!why.empty()) {
    throw std::invalid_argument("s3: endpoint \"" + config.endpoint + "\" " + why + " (want http(s)://host[:port])");
  }
  why = detail::check_region(config.region);
  if (!why.empty()) throw std::invalid_argument("s3: region \"" + config.region + "\" " + why);
  detail::check_credential("access key", config.access_key);
  detail::check_credential("secret key", config.secret_key);
  detail::check_credential("session token", config.session_token);
  if (config.retry_budget.count() < 0 || config.retry_base.count() < 0 || config.retry_cap.count() < 0) {
    throw std::invalid_argument("s3: negative retry budget, base or cap");
  }
  if (config.part_bytes < (size_t{5} << 20) || config.part_bytes > (size_t{5} << 30)) {
    throw std::invalid_argument("s3: part size " + std::to_string(config.part_bytes) +
                                " bytes is not within S3's 5 MiB .. 5 GiB");
  }
  impl_->sigv4 = detail::sigv4_param(config.region);
  impl_->cfg = std::move(config);
}

Client::~Client() = default;

const Config& Client::config() const { return impl_->cfg; }

void Client::create_bucket(const std::string& bucket) {
  require_bucket(bucket);
  Request r;
  r.method = "PUT";
  r.bucket = bucket;
  std::string body;
  if (impl_->cfg.region != "us-east-1") {  // us-east-1 takes no LocationConstraint
    body = "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><LocationConstraint>" +
           impl_->cfg.region + "</LocationConstraint></CreateBucketConfiguration>";
    r.body = body.data();
    r.body_len = body.size();
  }
  const std::string op = "PUT " + s3_url(bucket, "") + " (create bucket)";
  Response resp = impl_->perform(r, op);
  if (resp.ok()) return;
  // AWS answers BucketAlreadyOwnedByYou for our own bucket; s3rver (and S3
  // for a name taken by anyone) BucketAlreadyExists. Either way it exists; a
  // bucket of someone else's fails on first use with AccessDenied.
  const std::string code = error_code(resp);
  if (resp.status == 409 && (code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists")) return;
  throw http_error(op, resp);
}

void Client::put(const std::string& bucket, const std::string& key, const void* data, size_t n) {
  require_key(bucket, key);
  Request r;
  r.method = "PUT";
  r.bucket = bucket;
  r.key = key;
  r.headers = {"Content-Type: application/octet-stream"};
  r.body = static_cast<const char*>(data);
  r.body_len = n;
  const std::string op = "PUT " + s3_url(bucket, key);
  Response resp = impl_->perform(r, op);
  if (!resp.ok()) throw http_error(op, resp);
}

std::optional<int64_t> Client::head(const std::string& bucket, const std::string& key) {
  require_key(bucket, key);
  Request r;
  r.method = "HEAD";
  r.bucket = bucket;
  r.key = key;
  const std::string op = "HEAD " + s3_url(bucket, key);
  Response resp = impl_->perform(r, op);
  if (resp.status == 404) return std::nullopt;  // a HEAD error has no body to tell key from bucket
  if (!resp.ok()) throw http_error(op, resp);
  auto len = resp.header("content-length");
  if (!len || len->empty() || !std::all_of(len->begin(), len->end(), detail::is_digit)) {
    throw Error("s3: " + op + ": HTTP " + std::to_string(resp.status) + " without a valid Content-Length",
                static_cast<int>(resp.status));
  }
  return static_cast<int64_t>(std::stoll(*len));
}

std::optional<std::string> Client::get(const std::string& bucket, const std::string& key) {
  require_key(bucket, key);
  Request r;
  r.method = "GET";
  r.bucket = bucket;
  r.key = key;
  const std::string op = "GET " + s3_url(bucket, key);
  Response resp = impl_->perform(r, op);
  if (resp.status == 404) {
    const std::string code = error_code(resp);
    if (code.empty() || code == "NoSuchKey") return std::nullopt;
  }
  if (!resp.ok()) throw http_error(op, resp);
  if (auto len = resp.header("content-length")) {
    if (!len->empty() && std::all_of(len->begin(), len->end(), detail::is_digit) &&
        std::stoull(*len) != resp.body.size()) {
      throw Error("s3: " + op + ": got " + std::to_string(resp.body.size()) + " bytes, Content-Length said " + *len,
                  static_cast<int>(resp.status));
    }
  }
  return std::move(resp.body);
}

void Client::get_range(const std::string& bucket, const std::string& key, int64_t offset, size_t n, void* dst) {
  require_key(bucket, key);
  if (offset < 0) throw std::invalid_argument("s3: get_range of " + s3_url(bucket, key) + " with a negative offset");
  if (n == 0) return;
  const int64_t last = offset + static_cast<int64_t>(n) - 1;
  Request r;
  r.method = "GET";
  r.bucket = bucket;
  r.key = key;
  r.headers = {"Range: bytes=" + std::to_string(offset) + "-" + std::to_string(last)};
  r.dst = static_cast<char*>(dst);
  r.dst_len = n;
  r.dst_offset = offset;
  const std::string op =
      "GET " + s3_url(bucket, key) + " (bytes " + std::to_string(offset) + "-" + std::to_string(last) + ")";
  Response resp = impl_->perform(r, op);
  if (!resp.ok()) throw http_error(op, resp);
  if (resp.dst_written != n) {
    throw Error("s3: " + op + ": short read, got " + std::to_string(resp.dst_written) + " of " + std::to_string(n) +
                    " bytes",
                static_cast<int>(resp.status));
  }
}

ListResult Client::list(const std::string& bucket, const std::string& prefix, const std::string& delimiter,
                        int max_keys) {
  require_bucket(bucket);
  ListResult out;
  std::string token;
  const std::string op = "LIST " + s3_url(bucket, prefix);
  while (true) {
    Request r;
    r.method = "GET";
    r.bucket = bucket;
    r.query = {{"list-type", "2"}, {"encoding-type", "url"}};
    if (!prefix.empty()) r.query.emplace_back("prefix", prefix);
    if (!delimiter.empty()) r.query.emplace_back("delimiter", delimiter);
    if (max_keys > 0) r.query.emplace_back("max-keys", std::to_string(max_keys));
    if (!token.empty()) r.query.emplace_back("continuation-token", token);
    Response resp = impl_->perform(r, op);
    if (!resp.ok()) throw http_error(op, resp);
    if (detail::xml_root(resp.body) != "ListBucketResult") {
      throw Error("s3: " + op + ": HTTP " + std::to_string(resp.status) + " but no ListBucketResult in the response",
                  static_cast<int>(resp.status));
    }
    // With encoding-type=url S3 URL-encodes keys and prefixes (keys may hold
    // characters XML 1.0 cannot carry) and says so in <EncodingType>; a server
    // that ignores the parameter (s3rver) sends them plain.
    const bool url_encoded = detail::trim(detail::xml_text(resp.body, "EncodingType").value_or("")) == "url";
    auto decode = [&](const std::string& raw) {
      const std::string s = detail::xml_unescape(raw);
      return url_encoded ? url_decode_plus(s) : s;
    };
    for (const std::string& block : detail::xml_blocks(resp.body, "Contents")) {
      size_t b = 0, e = 0, after = 0;
      if (!detail::xml_find(block, "Key", 0, &b, &e, &after)) {
        throw Error("s3: " + op + ": a <Contents> without <Key>", static_cast<int>(resp.status));
      }
      std::string key = decode(block.substr(b, e - b));
      auto size = detail::xml_text(block, "Size");
      const std::string sz = detail::trim(size.value_or(""));
      if (sz.empty() || !std::all_of(sz.begin(), sz.end(), detail::is_digit)) {
        throw Error("s3: " + op + ": no valid <Size> for key " + key, static_cast<int>(resp.status));
      }
      out.objects.emplace_back(std::move(key), static_cast<int64_t>(std::stoll(sz)));
    }
    for (const std::string& block : detail::xml_blocks(resp.body, "CommonPrefixes")) {
      size_t b = 0, e = 0, after = 0;
      if (detail::xml_find(block, "Prefix", 0, &b, &e, &after)) out.prefixes.push_back(decode(block.substr(b, e - b)));
    }
    const bool truncated = detail::trim(detail::xml_text(resp.body, "IsTruncated").value_or("false")) == "true";
    if (!truncated) break;
    std::string next = detail::trim(detail::xml_text(resp.body, "NextContinuationToken").value_or(""));
    if (next.empty() || next == token) {
      throw Error("s3: " + op + ": IsTruncated without a new NextContinuationToken", static_cast<int>(resp.status));
    }
    token = std::move(next);
  }
  return out;
}

void Client::remove(const std::string& bucket, const std::string& key) {
  require_key(bucket, key);
  Request r;
  r.method = "DELETE";
  r.bucket = bucket;
  r.key = key;
  const std::string op = "DELETE " + s3_url(bucket, key);
  Response resp = impl_->perform(r, op);
  if (resp.ok()) return;
  if (resp.status == 404 && error_code(resp) == "NoSuchKey") return;
  throw http_error(op, resp);
}

std::string Client::create_multipart(const std::string& bucket, const std::string& key) {
  require_key(bucket, key);
  Request r;
  r.method = "POST";
  r.bucket = bucket;
  r.key = key;
  r.query = {{"uploads", ""}};
  r.headers = {"Content-Type: application/octet-stream"};  // the completed object's type
  const std::string op = "POST " + s3_url(bucket, key) + " (create multipart upload)";
  Response resp = impl_->perform(r, op);
  if (!resp.ok()) throw http_error(op, resp);
  std::string id = detail::trim(detail::xml_text(resp.body, "UploadId").value_or(""));
  if (detail::xml_root(resp.body) != "InitiateMultipartUploadResult" || id.empty()) {
    throw Error("s3: " + op + ": HTTP " + std::to_string(resp.status) + " without an UploadId",
                static_cast<int>(resp.status));
  }
  return id;
}

std::string Client::upload_part(const std::string& bucket, const std::string& key, const std::string& upload_id,
                                int part_number, const void* data, size_t n) {
  require_key(bucket, key);
  if (upload_id.empty()) throw std::invalid_argument("s3: upload_part of " + s3_url(bucket, key) + ": empty upload id");
  if (part_number < 1 || part_number > 10000) {
    throw std::invalid_argument("s3: upload_part of " + s3_url(bucket, key) + ": part number " +
                                std::to_string(part_number) + " is not in 1..10000");
  }
  Request r;
  r.method = "PUT";
  r.bucket = bucket;
  r.key = key;
  r.query = {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}};
  r.body = static_cast<const char*>(data);
  r.body_len = n;
  const std::string op = "PUT " + s3_url(bucket, key) + " (part " + std::to_string(part_number) + ")";
  Response resp = impl_->perform(r, op);
  if (!resp.ok()) throw http_error(op, resp);
  auto etag = resp.header("etag");
  if (!etag || etag->empty()) {
    throw Error("s3: " + op + ": HTTP " + std::to_string(resp.status) + " without an ETag",
                static_cast<int>(resp.status));
  }
  return *etag;
}

void Client::complete_multipart(const std::string& bucket, const std::string& key, const std::string& upload_id,
                                const std::vector<std::string>& etags) {
  require_key(bucket, key);
  if (upload_id.empty()) {
    throw std::invalid_argument("s3: complete_multipart of " + s3_url(bucket, key) + ": empty upload id");
  }
  if (etags.empty() || etags.size() > 10000) {
    throw std::invalid_argument("s3: complete_multipart of " + s3_url(bucket, key) + ": " +
                                std::to_string(etags.size()) + " parts (want 1..10000)");
  }
  std::string body = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
  for (size_t i = 0; i < etags.size(); ++i) {
    if (etags[i].empty()) {
      throw std::invalid_argument("s3: complete_multipart of " + s3_url(bucket, key) + ": empty ETag for part " +
                                  std::to_string(i + 1));
    }
    body += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + detail::xml_escape(etags[i]) +
            "</ETag></Part>";
  }
  body += "</CompleteMultipartUpload>";
  Request r;
  r.method = "POST";
  r.bucket = bucket;
  r.key = key;
  r.query = {{"uploadId", upload_id}};
  r.headers = {"Content-Type: application/xml"};
  r.body = body.data();
  r.body_len = body.size();
  r.error_in_200 = true;
  const std::string op =
      "POST " + s3_url(bucket, key) + " (complete multipart upload, " + std::to_string(etags.size()) + " parts)";
  Response resp = impl_->perform(r, op);
  // S3 may answer 200 and still fail: the error then is the body.
  if (!resp.ok() || detail::xml_root(resp.body) == "Error") throw http_error(op, resp);
  if (detail::xml_root(resp.body) != "CompleteMultipartUploadResult") {
    throw Error("s3: " + op + ": HTTP " + std::to_string(resp.status) + " without a CompleteMultipartUploadResult",
                static_cast<int>(resp.status));
  }
}

void Client::abort_multipart(const std::string& bucket, const std::string& key, const std::string& upload_id) {
  require_key(bucket, key);
  if (upload_id.empty()) {
    throw std::invalid_argument("s3: abort_multipart of " + s3_url(bucket, key) + ": empty upload id");
  }
  Request r;
  r.method = "DELETE";
  r.bucket = bucket;
  r.key = key;
  r.query = {{"uploadId", upload_id}};
  const std::string op = "DELETE " + s3_url(bucket, key) + " (abort multipart upload)";
  Response resp = impl_->perform(r, op);
  if (resp.ok()) return;
  if (resp.status == 404 && error_code(resp) == "NoSuchUpload") return;
  throw http_error(op, resp);
}

std::vector<Upload> Client::list_multipart(const std::string& bucket, const std::string& prefix) {
  require_bucket(bucket);
  std::vector<Upload> out;
  std::string key_marker, id_marker;
  const std::string op = "GET " + s3_url(bucket, prefix) + " (list multipart uploads)";
  while (true) {
    Request r;
    r.method = "GET";
    r.bucket = bucket;
    r.query = {{"uploads", ""}};
    if (!prefix.empty()) r.query.emplace_back("prefix", prefix);
    if (!key_marker.empty()) r.query.emplace_back("key-marker", key_marker);
    if (!id_marker.empty()) r.query.emplace_back("upload-id-marker", id_marker);
    Response resp = impl_->perform(r, op);
    if (!resp.ok()) throw http_error(op, resp);
    if (detail::xml_root(resp.body) != "ListMultipartUploadsResult") {
      throw Error("s3: " + op + ": HTTP " + std::to_string(resp.status) +
                      " but no ListMultipartUploadsResult in the response",
                  static_cast<int>(resp.status));
    }
    const bool url_encoded = detail::trim(detail::xml_text(resp.body, "EncodingType").value_or("")) == "url";
    for (const std::string& block : detail::xml_blocks(resp.body, "Upload")) {
      Upload u;
      u.key = detail::xml_text(block, "Key").value_or("");
      if (url_encoded) u.key = url_decode_plus(u.key);
      u.upload_id = detail::trim(detail::xml_text(block, "UploadId").value_or(""));
      u.initiated = detail::trim(detail::xml_text(block, "Initiated").value_or(""));
      if (u.key.empty() || u.upload_id.empty()) {
        throw Error("s3: " + op + ": an <Upload> without <Key> or <UploadId>", static_cast<int>(resp.status));
      }
      out.push_back(std::move(u));
    }
    const bool truncated = detail::trim(detail::xml_text(resp.body, "IsTruncated").value_or("false")) == "true";
    if (!truncated) break;
    std::string nk = detail::trim(detail::xml_text(resp.body, "NextKeyMarker").value_or(""));
    std::string ni = detail::trim(detail::xml_text(resp.body, "NextUploadIdMarker").value_or(""));
    if (nk.empty() || (nk == key_marker && ni == id_marker)) {
      throw Error("s3: " + op + ": IsTruncated without new NextKeyMarker/NextUploadIdMarker",
                  static_cast<int>(resp.status));
    }
    key_marker = std::move(nk);
    id_marker = std::move(ni);
  }
  return out;
}

}  // namespace shard::s3
