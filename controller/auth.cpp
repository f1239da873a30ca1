#include "controller/auth.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

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

Auth Auth::load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("tokens file '" + path + "': cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_text(ss.str(), path);
}

Auth Auth::from_text(const std::string& text, const std::string& origin) {
  Auth a;
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
    if (!a.by_hash_.emplace(sha256_hex(parts[0]), p).second)
      throw std::runtime_error(where + "duplicate token");
  }
  return a;
}

std::optional<Principal> Auth::lookup(const std::string& token) const {
  auto it = by_hash_.find(sha256_hex(token));
  if (it == by_hash_.end()) return std::nullopt;
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

}  // namespace controller
