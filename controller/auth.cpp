#include "controller/auth.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace controller {

namespace {
std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}
bool valid_token(const std::string& t) {
  if (t.size() < 16 || t.size() > 256) return false;
  for (char c : t)
    if (c <= ' ' || c > '~' || c == ',') return false;
  return true;
}
bool valid_tenant(const std::string& t) {
  if (t.empty() || t.size() > 63) return false;
  for (char c : t)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}
}  // namespace

std::optional<std::string> bearer_token(const std::string& h) {
  const std::string p = "Bearer ";
  if (h.size() <= p.size() || h.compare(0, p.size(), p) != 0) return std::nullopt;
  std::string t = trim(h.substr(p.size()));
  if (t.empty()) return std::nullopt;
  return t;
}

Auth::Auth() : table_(std::make_shared<const Table>()) {}
Auth::Auth(const Auth& other) : table_(other.snapshot()) {}
Auth& Auth::operator=(const Auth& other) {
  if (this != &other) replace(other);
  return *this;
}

std::shared_ptr<const Auth::Table> Auth::snapshot() const {
  std::lock_guard<std::mutex> lk(mu_);
  return table_;
}

void Auth::replace(const Auth& other) {
  auto t = other.snapshot();
  std::lock_guard<std::mutex> lk(mu_);
  table_ = std::move(t);
}

size_t Auth::size() const { return snapshot()->size(); }

Auth Auth::load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("tokens file '" + path + "': cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_text(ss.str(), path);
}

Auth Auth::from_text(const std::string& text, const std::string& origin) {
  Table table;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    auto where = origin + ":" + std::to_string(n) + ": ";
    std::vector<std::string> parts;
    std::stringstream ls(line);
    std::string part;
    while (std::getline(ls, part, ',')) parts.push_back(trim(part));
    if (parts.size() != 3) throw std::runtime_error(where + "expected 'token,tenant,role'");
    if (!valid_token(parts[0]))
      throw std::runtime_error(where + "token must be 16..256 printable characters without ',' or spaces");
    if (!valid_tenant(parts[1]))
      throw std::runtime_error(where + "tenant '" + parts[1] + "' must be 1..63 of [a-z0-9-]");
    Principal p;
    p.token_tenant = parts[1];
    p.tenant = parts[1];
    if (parts[2] == "user") p.role = Role::kUser;
    else if (parts[2] == "admin") { p.role = Role::kAdmin; p.tenant = "*"; }
    else if (parts[2] == "worker") p.role = Role::kWorker;
    else throw std::runtime_error(where + "role '" + parts[2] + "' must be user, admin or worker");
    if (!table.emplace(sha256_hex(parts[0]), p).second)
      throw std::runtime_error(where + "duplicate token");
  }
  Auth a;
  a.table_ = std::make_shared<const Table>(std::move(table));
  return a;
}

std::optional<Principal> Auth::lookup(const std::string& token) const {
  auto table = snapshot();
  auto it = table->find(sha256_hex(token));
  if (it == table->end()) return std::nullopt;
  return it->second;
}

Principal Auth::authenticate(const std::string& header) const {
  if (header.empty())
    throw ApiError(401, "unauthenticated", "missing Authorization: Bearer <token>", "Authorization");
  auto t = bearer_token(header);
  if (!t) throw ApiError(401, "unauthenticated", "Authorization must be 'Bearer <token>'", "Authorization");
  auto p = lookup(*t);
  if (!p) throw ApiError(401, "unauthenticated", "unknown token", "Authorization");
  return *p;
}

// ---- AuthReloader ----

namespace {
int64_t ns_of(const struct timespec& t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }

// The whole file, or nullopt with `err` set.
std::optional<std::string> read_whole(const std::string& path, std::string& err) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = std::generic_category().message(errno);
    return std::nullopt;
  }
  std::string text;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = std::generic_category().message(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, size_t(n));
  }
  ::close(fd);
  return text;
}
}  // namespace

AuthReloader::FileSig AuthReloader::stat_file(const std::string& path) {
  struct stat st {};
  FileSig s;
  if (::stat(path.c_str(), &st) != 0) return s;
  s.exists = true;
  s.dev = uint64_t(st.st_dev);
  s.ino = uint64_t(st.st_ino);
  s.size = int64_t(st.st_size);
  s.mtime_ns = ns_of(st.st_mtim);
  s.ctime_ns = ns_of(st.st_ctim);
  return s;
}

AuthReloader::AuthReloader(Auth& auth, std::string path, AuthReloadOptions options)
    : auth_(auth), path_(std::move(path)), opt_(std::move(options)) {
  if (::pipe2(pipe_, O_NONBLOCK | O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "tokens reloader: pipe");
  check(false, true);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    ::close(pipe_[0]);
    ::close(pipe_[1]);
    throw;
  }
}

AuthReloader::~AuthReloader() {
  stop();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

void AuthReloader::request_reload() {
  int saved = errno;
  requested_.store(true);
  char c = 'r';
  [[maybe_unused]] ssize_t n = ::write(pipe_[1], &c, 1);  // full pipe: a wake-up is pending anyway
  errno = saved;
}

void AuthReloader::stop() {
  std::lock_guard<std::mutex> lk(stop_mu_);
  stop_.store(true);
  char c = 's';
  [[maybe_unused]] ssize_t n = ::write(pipe_[1], &c, 1);
  if (thread_.joinable()) thread_.join();
}

void AuthReloader::log(const std::string& line) const {
  if (opt_.log) opt_.log(line);
  else std::fprintf(stderr, "greenshard-controller: %s\n", line.c_str());
}

void AuthReloader::run() {
  const int timeout = opt_.poll.count() > 0 ? int(opt_.poll.count()) : -1;
  while (!stop_.load()) {
    pollfd p{pipe_[0], POLLIN, 0};
    if (::poll(&p, 1, timeout) > 0) {
      char buf[64];
      while (::read(pipe_[0], buf, sizeof buf) > 0) {
      }
    }
    if (stop_.load()) break;
    const bool forced = requested_.exchange(false);
    if (!forced && timeout < 0) continue;
    try {
      check(forced, false);
    } catch (const std::exception& e) {  // e.g. bad_alloc: keep the table, keep watching
      log("tokens file '" + path_ + "': reload failed: " + e.what());
    }
  }
}

// forced: re-read and re-parse even when nothing changed (request_reload).
// initial: the constructor's read (not counted as a reload).
void AuthReloader::check(bool forced, bool initial) {
  const FileSig before = stat_file(path_);
  if (!forced && !initial && before == sig_ && !racy_) return;
  std::string err;
  std::optional<std::string> text = read_whole(path_, err);
  const FileSig after = stat_file(path_);
  sig_ = before;
  // An mtime this recent may be followed by another write in the same
  // timestamp tick, with the same size: until it is older, compare the
  // bytes at every poll. A file that changed while it was read is read
  // again at the next poll (its stat no longer matches sig_).
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  racy_ = before != after || (before.exists && now_ns - before.mtime_ns < 2'000'000'000);
  if (!forced && !initial && text == last_text_) return;  // touched, or re-read unchanged
  last_text_ = text;

  const size_t had = auth_.size();
  auto fail = [&](const std::string& why) {
    ++failures_;
    log("tokens file reload failed, keeping the " + std::to_string(had) + " tokens in force: " + why);
    if (opt_.on_reload) opt_.on_reload(false);
  };
  if (!text) {
    fail("tokens file '" + path_ + "': cannot read: " + err);
    return;
  }
  if (text->empty() && !initial) {
    // Most likely a write caught between its truncation and its bytes; a
    // file of comments only is how every token is revoked on purpose.
    fail("tokens file '" + path_ + "': empty (a file of comments only revokes every token)");
    return;
  }
  Auth next;
  try {
    next = Auth::from_text(*text, path_);
  } catch (const std::exception& e) {
    fail(e.what());  // "<path>:<line>: <what is wrong>"
    return;
  }
  auth_.replace(next);
  if (initial) return;
  ++reloads_;
  log("tokens file '" + path_ + "' reloaded (" + (forced ? "requested" : "changed") + "): " +
      std::to_string(next.size()) + " tokens, was " + std::to_string(had));
  if (opt_.on_reload) opt_.on_reload(true);
}

}  // namespace controller
