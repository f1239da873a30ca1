#include "controller/api/auth.h"

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

AuthReloader::AuthReloader(Auth& auth, std::string path, AuthReloadOptions options)
    : auth_(auth), path_(std::move(path)), opt_(std::move(options)) {
  watch_ = std::make_unique<FileWatch>(
      std::vector<std::string>{path_}, FileWatchOptions{opt_.poll},
      [this](const std::vector<WatchedFile>& files, bool forced, bool initial) { apply(files.at(0), forced, initial); },
      [this](const std::string& what) { log("tokens file '" + path_ + "': reload failed: " + what); });
}

AuthReloader::~AuthReloader() { watch_->stop(); }

void AuthReloader::log(const std::string& line) const {
  if (opt_.log) opt_.log(line);
  else std::fprintf(stderr, "greenshard-controller: %s\n", line.c_str());
}

// forced: re-read and re-parse even when nothing changed (request_reload).
// initial: the constructor's read (not counted as a reload).
void AuthReloader::apply(const WatchedFile& file, bool forced, bool initial) {
  const size_t had = auth_.size();
  auto fail = [&](const std::string& why) {
    ++failures_;
    log("tokens file reload failed, keeping the " + std::to_string(had) + " tokens in force: " + why);
    if (opt_.on_reload) opt_.on_reload(false);
  };
  if (!file.text) {
    fail("tokens file '" + path_ + "': cannot read: " + file.error);
    return;
  }
  if (file.text->empty() && !initial) {
    // Most likely a write caught between its truncation and its bytes; a
    // file of comments only is how every token is revoked on purpose.
    fail("tokens file '" + path_ + "': empty (a file of comments only revokes every token)");
    return;
  }
  Auth next;
  try {
    next = Auth::from_text(*file.text, path_);
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
