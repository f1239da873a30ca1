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
#pragma once

#include <optional>
#include <string>
#include <unordered_map>

#include "controller/api_types.h"

namespace controller {

enum class Role { kUser, kAdmin, kWorker };

struct Principal {
  std::string tenant;  // "*" for admins
  Role role = Role::kUser;
  std::string token_tenant;  // the tenant named in the file
};

class Auth {
 public:
  // Throws std::runtime_error naming the file and line.
  static Auth load_file(const std::string& path);
  static Auth from_text(const std::string& text, const std::string& origin = "tokens");

  // Authorization header value -> principal. Throws ApiError 401 when the
  // header is missing, not "Bearer <token>", or the token is unknown.
  Principal authenticate(const std::string& authorization_header) const;
  // nullopt when unknown (no exception).
  std::optional<Principal> lookup(const std::string& token) const;
  size_t size() const { return by_hash_.size(); }

 private:
  std::unordered_map<std::string, Principal> by_hash_;  // sha256(token) -> principal
};

// Extracts the token from "Bearer <token>"; nullopt when malformed.
std::optional<std::string> bearer_token(const std::string& header);

}  // namespace controller
