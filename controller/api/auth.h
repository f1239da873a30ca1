// Bearer-token authentication: token -> (tenant, role).
//
// Tokens file (also the shape of a Kubernetes Secret mounted as a file):
// one "token,tenant,role" per line; blank lines and lines starting with '#'
// are ignored; role is user | admin | worker; a token is 16..256 printable
// ASCII characters without ',' or spaces; a tenant is 1..63 of [a-z0-9-].
// A malformed line makes load fail with its line number.
//
// Roles: user — own tenant's jobs; admin — every tenant's jobs (tenant "*");
// worker — only POST /v1/jobs/{id}/status. Each job also has its own worker
// token (Job::worker_token), checked by the API, valid for that job only.
//
// Rotation without a restart: an Auth's table is an immutable snapshot
// behind a lock; replace() swaps in another whole table, so a request sees
// the old table or the new one, never a mix. AuthReloader watches the file
// (a FileWatch, controller/api/file_watch.h: an editor's or Kubernetes'
// replace-by-rename is seen) and reloads it on change and on
// request_reload() (SIGHUP in greenshard-controller). A reload that
// fails (unreadable file, bad line) keeps the last good table and logs one
// line naming the file and line.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "controller/api/file_watch.h"
#include <thread>
#include <unordered_map>

#include "controller/core/api_types.h"

namespace controller {

enum class Role { kUser, kAdmin, kWorker };

struct Principal {
  std::string tenant;  // "*" for admins
  Role role = Role::kUser;
  std::string token_tenant;  // the tenant named in the file
};

class Auth {
 public:
  Auth();
  // Copies share the (immutable) table at the time of the copy; a later
  // replace() of one does not change the other.
  Auth(const Auth& other);
  Auth& operator=(const Auth& other);

  // Throws std::runtime_error naming the file and line.
  static Auth load_file(const std::string& path);
  static Auth from_text(const std::string& text, const std::string& origin = "tokens");

  // Authorization header value -> principal. Throws ApiError 401 when the
  // header is missing, not "Bearer <token>", or the token is unknown.
  Principal authenticate(const std::string& authorization_header) const;
  // nullopt when unknown (no exception).
  std::optional<Principal> lookup(const std::string& token) const;
  size_t size() const;

  // Atomically replaces this table with `other`'s (thread-safe against
  // authenticate/lookup on other threads).
  void replace(const Auth& other);

 private:
  using Table = std::unordered_map<std::string, Principal>;  // sha256(token) -> principal
  std::shared_ptr<const Table> snapshot() const;

  mutable std::mutex mu_;
  std::shared_ptr<const Table> table_;
};

// Extracts the token from "Bearer <token>"; nullopt when malformed.
std::optional<std::string> bearer_token(const std::string& header);

// The default poll interval of AuthReloader: a changed file is in force at
// most this long (plus one parse) after the change, well inside the
// one-second revocation bound.
inline constexpr std::chrono::milliseconds kTokensPollDefault{200};

struct AuthReloadOptions {
  // How often the file is stat()ed; 0 = never (reload only on request_reload()).
  std::chrono::milliseconds poll = kTokensPollDefault;
  // One line per reload or failed reload, without a newline. Default: stderr,
  // prefixed "greenshard-controller: ".
  std::function<void(const std::string&)> log;
  // After every reload attempt: ok = the new table is in force.
  std::function<void(bool ok)> on_reload;
};

class AuthReloader {
 public:
  // `auth` must outlive the reloader. The file is read once now and, when it
  // parses, put in force; the watch (FileWatch) then starts. Throws only when
  // the thread or the wake-up pipe cannot be made.
  AuthReloader(Auth& auth, std::string path, AuthReloadOptions options = {});
  ~AuthReloader();  // stop()
  AuthReloader(const AuthReloader&) = delete;
  AuthReloader& operator=(const AuthReloader&) = delete;

  // Re-reads the file now, changed or not, on the watch thread.
  // Async-signal-safe.
  void request_reload() { watch_->request_reload(); }
  // Stops and joins the watch thread; safe to call more than once and from
  // several threads.
  void stop() { watch_->stop(); }

  uint64_t reloads() const { return reloads_.load(); }   // tables put in force (not the first read)
  uint64_t failures() const { return failures_.load(); }  // reloads refused, last table kept

 private:
  void apply(const WatchedFile& file, bool forced, bool initial);
  void log(const std::string& line) const;

  Auth& auth_;
  const std::string path_;
  const AuthReloadOptions opt_;
  std::atomic<uint64_t> reloads_{0}, failures_{0};
  std::unique_ptr<FileWatch> watch_;  // last: its first read uses the members above
};

}  // namespace controller
