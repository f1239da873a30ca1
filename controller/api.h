// The REST API (cpp-httplib + nlohmann/json), versioned under /v1.
//
// Routes (the OpenAPI document at GET /v1/openapi.json lists exactly these):
//   POST   /v1/jobs[?dryRun=true]    submit (Idempotency-Key honoured;   user, admin
//                                    dryRun: validate, store nothing)
//   GET    /v1/jobs                  list: state, tenant, limit, continue user, admin
//   GET    /v1/jobs/{id}             one job with placement and progress user, admin
//                                    and `decisions`: its newest scheduling
//                                    decisions from the store's decision log
//                                    (ApiOptions::max_decisions, oldest first)
//   POST   /v1/jobs/{id}/cancel      cancel                              user, admin
//   DELETE /v1/jobs/{id}             delete a finished job               user, admin
//   GET    /v1/jobs/{id}/logs        rank, offset, follow                user, admin
//   POST   /v1/jobs/{id}/status      worker progress push                worker, the job's token
//   GET    /v1/regions               intensity, forecast, capacity, PUE  user, admin
//   GET    /v1/regions/{name}/intensity  {"region", "gco2_per_kwh"} in force now
//                                    (intensity_in_force)                any file token,
//                                                                        a live job's token
//   GET    /                         built-in status page (HTML)         no token
//   GET    /v1/openapi.json, /healthz, /readyz, /metrics                 no token
//
// Contract: handlers parse, call the registry/scheduler and render; every
// error is {"error": {"code", "message", "field"}} with 400 (malformed),
// 401 (no/unknown token), 403 (role may not use the route), 404 (absent or
// another tenant's job, or no such route), 409 (state or idempotency
// conflict), 413 (body over the limit), 422 (valid JSON the controller
// cannot honour: unknown region, more nodes than any region has), 429
// (tenant quota), 415 (a body that is not application/json). Unknown query parameters and body fields are 400 naming
// the field.
#pragma once

#include <memory>
#include <chrono>
#include <string>

#include "controller/auth.h"
#include "controller/metrics.h"
#include "controller/registry.h"
#include "controller/scheduler.h"

namespace controller {

struct ApiOptions {
  size_t max_body_bytes = kMaxBodyBytes;
  // The decision log GET /v1/jobs/{id} reads (`decisions`); nullptr: the
  // field is left out.
  Store* store = nullptr;
  size_t max_decisions = 50;
  int threads = 16;
  std::string tls_cert, tls_key;  // both set: HTTPS
  // How often the certificate and key files are checked for a change (a
  // renewed certificate is served to new connections without a restart;
  // 0 = only on reload_tls()).
  std::chrono::milliseconds tls_poll{1000};
  const IntensitySource* intensity = nullptr;  // `zone:` regions (GET /v1/regions/{name}/intensity)
};

class ApiServer {
 public:
  ApiServer(Registry& registry, Scheduler& scheduler, const Auth& auth, Metrics& metrics,
            ApiOptions options);
  ~ApiServer();
  // Binds host:port (0 = any free port); returns the bound port. Throws
  // std::runtime_error when it cannot bind (or load the TLS pair).
  int bind(const std::string& host, int port);
  // Serves until stop(); blocks.
  void serve();
  void stop();
  bool tls() const;
  // Re-reads the TLS certificate and key now (SIGHUP), on the watch thread;
  // async-signal-safe. Nothing without TLS.
  void reload_tls();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Opaque pagination tokens: encode(after_seq, filter) -> token; decode
// returns the seq or throws ApiError 400 (field "continue") when the token is
// malformed or was issued for another filter.
std::string encode_continue(int64_t after_seq, const std::string& filter_key);
int64_t decode_continue(const std::string& token, const std::string& filter_key);

}  // namespace controller
