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
//   POST   /v1/jobs/{id}/status      worker progress push                the job's own worker token
//   GET    /v1/regions               intensity, forecast, capacity, PUE  user, admin
//   GET    /v1/regions/{name}/intensity  {"region", "gco2_per_kwh"} in force now
//                                    (intensity_in_force)                any file token,
//                                                                        a live job's token
//   GET    /                         built-in status page (HTML)         no token
//   GET    /v1/openapi.json, /healthz, /readyz, /metrics                 no token
//
// Contract: handlers parse, call the registry/scheduler and render; every
// error is {"error": {"code", "message", "field"}} with 400 (malformed;
// nested deeper than 64 levels), 401 (no/unknown token), 403 (role may not
// use the route), 404 (absent or another tenant's job, or no such route),
// 405 (a known path, another method; Allow lists the methods), 409 (state or
// idempotency conflict), 413 (body over the limit), 415 (a media type other
// than JSON, or YAML on submit, matched exactly), 422 (valid input the
// controller cannot honour: unknown region, a deadline already past, more
// nodes or GPUs per node than any region has), 429 (tenant quota), 503 (the
// store, or the edge's queue, is full). Unknown query parameters and body
// fields are 400 naming the field. Replies are valid UTF-8 whatever the
// input. Connections, deadlines and the worker pools are the edge's
// (http_edge.h): it answers 400/408/413/414/431/501/503 itself.
#pragma once

#include <memory>
#include <chrono>
#include <string>

#include "controller/api/auth.h"
#include "controller/api/http_edge.h"
#include "controller/scheduling/metrics.h"
#include "controller/store/registry.h"
#include "controller/scheduling/scheduler.h"

namespace controller {

struct ApiOptions {
  size_t max_body_bytes = kMaxBodyBytes;
  // The decision log GET /v1/jobs/{id} reads (`decisions`); nullptr: the
  // field is left out.
  Store* store = nullptr;
  size_t max_decisions = 50;
  int threads = 16;  // the edge's workers (edge.workers is taken from here)
  // Connections: deadlines, caps, the queue and the stream pool
  // (http_edge.h); max_body_bytes and tls are filled in from above.
  HttpEdgeOptions edge;
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
  // Runs `bytes` as everything one connection sent, through the edge's
  // checks and the routes, and returns what the server wrote back (the
  // whole-request fuzz target; tests). No socket is involved.
  std::string serve_bytes(std::string_view bytes);
  HttpEdge::Stats edge_stats() const;
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
