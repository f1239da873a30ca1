// S3 client configuration from the environment. See s3_config.h for the contract.
#include "s3_config.h"

#include "s3_text.h"
#include "shard/object_store_url.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>

namespace shard::s3 {
namespace detail {
namespace {

bool has_control(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; });
}

}  // namespace

std::string check_endpoint(const std::string& e, std::string* base, bool* https) {
  std::string why = object_store_endpoint_problem(e, base);
  if (why.empty()) *https = e.rfind("https://", 0) == 0;
  return why;
}

std::string check_region(const std::string& r) {
  if (r.empty()) return "is empty";
  if (r.size() > 64) return "is too long";
  for (char c : r) {
    if (!(is_lower(c) || is_digit(c) || c == '-')) {
      return "may only hold lowercase letters, digits and '-'";
    }
  }
  return "";
}

void check_credential(const std::string& name, const std::string& value) {
  if (has_control(value)) {
    throw std::invalid_argument("s3: " + name + " holds a control character (a stray newline?)");
  }
}

}  // namespace detail

namespace {

// The content of dir/name, trimmed. nullopt when the file does not exist and
// !required; std::invalid_argument naming it on any other failure.
std::optional<std::string> read_secret_file(const std::string& dir, const std::string& name, bool required) {
  const std::string path = dir + "/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT && !required) return std::nullopt;
    throw std::invalid_argument("s3: GREENSHARD_S3_SECRET_DIR=" + dir + ": cannot read " + name + " (" + path +
                                "): " + std::strerror(err));
  }
  std::string content;
  char buf[4096];
  while (true) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      throw std::invalid_argument("s3: GREENSHARD_S3_SECRET_DIR=" + dir + ": cannot read " + name + " (" + path +
                                  "): " + std::strerror(err));
    }
    if (r == 0) break;
    content.append(buf, static_cast<size_t>(r));
    if (content.size() > (1 << 20)) {
      ::close(fd);
      throw std::invalid_argument("s3: GREENSHARD_S3_SECRET_DIR=" + dir + ": " + name + " is larger than 1 MiB");
    }
  }
  ::close(fd);
  content = detail::trim(content);
  if (content.empty() && required) {
    throw std::invalid_argument("s3: GREENSHARD_S3_SECRET_DIR=" + dir + ": " + name + " (" + path + ") is empty");
  }
  if (content.empty()) return std::nullopt;
  return content;
}

// The decimal number s ("30", "2.5") when it lies in [lo, hi]; NaN otherwise.
double parse_number(const std::string& s, double lo, double hi) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (s.empty() || s.size() > 32) return nan;
  bool dot = false, digit = false;
  for (char ch : s) {
    if (ch == '.' && !dot) dot = true;
    else if (detail::is_digit(ch)) digit = true;
    else return nan;
  }
  if (!digit) return nan;
  const double v = std::strtod(s.c_str(), nullptr);
  return v >= lo && v <= hi ? v : nan;
}

}  // namespace

Config config_from_env(const std::function<const char*(const char*)>& getenv_fn) {
  auto get = [&](const char* name) -> std::optional<std::string> {
    const char* v = getenv_fn ? getenv_fn(name) : std::getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
  };
  Config c;

  std::string ep_var = "AWS_ENDPOINT_URL_S3";
  auto ep = get("AWS_ENDPOINT_URL_S3");
  if (!ep) {
    ep_var = "AWS_ENDPOINT_URL";
    ep = get("AWS_ENDPOINT_URL");
  }
  if (!ep) {
    throw std::invalid_argument(
        "s3: AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL) is not set; it names the S3 endpoint, e.g. "
        "http://minio:9000 or https://s3.us-east-1.amazonaws.com");
  }
  bool https = false;
  std::string why = detail::check_endpoint(*ep, &c.endpoint, &https);
  if (!why.empty()) {
    throw std::invalid_argument("s3: " + ep_var + "=" + *ep + " " + why + " (want http(s)://host[:port])");
  }

  if (auto r = get("AWS_REGION")) {
    why = detail::check_region(*r);
    if (!why.empty()) throw std::invalid_argument("s3: AWS_REGION=" + *r + " " + why);
    c.region = *r;
  } else if (auto dr = get("AWS_DEFAULT_REGION")) {
    why = detail::check_region(*dr);
    if (!why.empty()) throw std::invalid_argument("s3: AWS_DEFAULT_REGION=" + *dr + " " + why);
    c.region = *dr;
  }

  if (auto dir = get("GREENSHARD_S3_SECRET_DIR")) {
    struct stat st {};
    if (::stat(dir->c_str(), &st) != 0) {
      throw std::invalid_argument("s3: GREENSHARD_S3_SECRET_DIR=" + *dir + ": " + std::strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
      throw std::invalid_argument("s3: GREENSHARD_S3_SECRET_DIR=" + *dir + " is not a directory");
    }
    c.access_key = *read_secret_file(*dir, "AWS_ACCESS_KEY_ID", true);
    c.secret_key = *read_secret_file(*dir, "AWS_SECRET_ACCESS_KEY", true);
    c.session_token = read_secret_file(*dir, "AWS_SESSION_TOKEN", false).value_or("");
  } else {
    auto ak = get("AWS_ACCESS_KEY_ID");
    if (!ak) throw std::invalid_argument("s3: AWS_ACCESS_KEY_ID is not set (or set GREENSHARD_S3_SECRET_DIR)");
    auto sk = get("AWS_SECRET_ACCESS_KEY");
    if (!sk) throw std::invalid_argument("s3: AWS_SECRET_ACCESS_KEY is not set (or set GREENSHARD_S3_SECRET_DIR)");
    c.access_key = *ak;
    c.secret_key = *sk;
    c.session_token = get("AWS_SESSION_TOKEN").value_or("");
  }
  detail::check_credential("AWS_ACCESS_KEY_ID", c.access_key);
  detail::check_credential("AWS_SECRET_ACCESS_KEY", c.secret_key);
  detail::check_credential("AWS_SESSION_TOKEN", c.session_token);

  if (auto v = get("GREENSHARD_S3_RETRY_SECONDS")) {
    const double s = parse_number(*v, 0, 86400);
    if (!(s >= 0)) {  // (NaN: not a number)
      throw std::invalid_argument("s3: GREENSHARD_S3_RETRY_SECONDS=" + *v +
                                  " is not a number of seconds in [0, 86400] (the retry budget of each request)");
    }
    c.retry_budget = std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0 + 0.5));
  }
  if (auto v = get("GREENSHARD_S3_PART_MIB")) {
    const double mib = parse_number(*v, 5, 5120);
    if (!(mib >= 0) || mib != static_cast<double>(static_cast<int64_t>(mib))) {
      throw std::invalid_argument("s3: GREENSHARD_S3_PART_MIB=" + *v +
                                  " is not a whole number of MiB in [5, 5120] (S3's part size limits)");
    }
    c.part_bytes = static_cast<size_t>(mib) << 20;
  }
  return c;
}

}  // namespace shard::s3
