#include "controller/api/api.h"
#include "controller/api/file_watch.h"
#include "controller/api/http_edge.h"
#include "controller/api/tls_credentials.h"

#include <httplib.h>
#include <openssl/ssl.h>

#include <atomic>
#include <mutex>
#include <cmath>
#include <cstdlib>
#include <set>
#include <thread>

#include "controller/core/base64.h"
#include "controller/api/openapi.h"
#include "controller/api/status_page.h"

namespace controller {

using json = nlohmann::json;

namespace {

constexpr int64_t kMaxLogChunk = 1 << 20;

// The one place a reply's JSON is written: a reply may carry text from
// outside (a path, a parameter, a name), and bytes in it that are not UTF-8
// become U+FFFD instead of an exception (nlohmann's type_error 316).
void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status, e.to_json());
  if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
}

void only_params(const httplib::Request& req, std::initializer_list<const char*> allowed) {
  for (const auto& [k, v] : req.params) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || k == a;
    if (!ok) throw ApiError(400, "unknown_parameter", "unknown query parameter " + quote_untrusted(k), k);
  }
}

int64_t int_param(const httplib::Request& req, const char* name, int64_t def, int64_t lo, int64_t hi) {
  if (!req.has_param(name)) return def;
  const std::string v = req.get_param_value(name);
  size_t pos = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &pos);
  } catch (...) {
    pos = 0;
  }
  if (pos == 0 || pos != v.size())
    throw ApiError(400, "invalid_parameter", std::string(name) + ": expected an integer, got " + quote_untrusted(v),
                   name);
  if (x < lo || x > hi)
    throw ApiError(400, "invalid_parameter",
                   std::string(name) + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                   name);
  return x;
}

bool bool_param(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return false;
  const std::string v = req.get_param_value(name);
  if (v == "true" || v == "1" || v.empty()) return true;
  if (v == "false" || v == "0") return false;
  throw ApiError(400, "invalid_parameter", std::string(name) + ": expected true or false, got " + quote_untrusted(v),
                 name);
}

// A strict boolean query parameter: absent -> false; exactly "true" or
// "false" once, else 400 naming it (POST /v1/jobs?dryRun=, as the
// Kubernetes API spells it; nothing else, not "1" or an empty value).
bool strict_bool_param(const httplib::Request& req, const char* name) {
  const size_t n = req.get_param_value_count(name);
  if (n == 0) return false;
  if (n > 1) throw ApiError(400, "invalid_parameter", std::string(name) + ": given more than once", name);
  const std::string v = req.get_param_value(name);
  if (v == "true") return true;
  if (v == "false") return false;
  throw ApiError(400, "invalid_parameter", std::string(name) + ": expected true or false, got " + quote_untrusted(v),
                 name);
}

// A body's media type: application/json, or (where `yaml_ok`: POST
// /v1/jobs) application/yaml, the type RFC 9512 registers, and its older
// spellings application/x-yaml and text/yaml. Matched exactly, type and
// subtype case-insensitive, parameters (`; charset=utf-8`) allowed; anything
// else is 415 naming Content-Type (a form body would also be parsed into
// query parameters). No body and no Content-Type: JSON.
enum class Media { kJson, kYaml };
Media body_media(const httplib::Request& req, bool yaml_ok) {
  if (req.body.empty() && !req.has_header("Content-Type")) return Media::kJson;
  const std::string ct = req.get_header_value("Content-Type");
  std::string type = ct.substr(0, ct.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.pop_back();
  while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) type.erase(0, 1);
  for (char& c : type) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (type == "application/json") return Media::kJson;
  if (yaml_ok && (type == "application/yaml" || type == "application/x-yaml" || type == "text/yaml"))
    return Media::kYaml;
  throw ApiError(415, "unsupported_media_type",
                 std::string("Content-Type must be application/json") + (yaml_ok ? " or application/yaml" : "") +
                     ", got " + quote_untrusted(ct),
                 "Content-Type");
}

// A JSON body (the worker's status push): the media type, then the one
// reader of outside JSON (depth limit, api_types.h).
json parse_body(const httplib::Request& req) {
  body_media(req, false);
  return parse_json_input(req.body);
}

// GET /v1/jobs/{id}/logs?...follow...: the requests that stream for as long
// as the job runs, served by the edge's stream pool.
bool is_log_stream(std::string_view method, std::string_view target) {
  if (method != "GET") return false;
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return false;
  const std::string_view path = target.substr(0, q), query = target.substr(q + 1);
  return path.size() > 5 && path.substr(path.size() - 5) == "/logs" && query.find("follow") != std::string_view::npos;
}

}  // namespace

std::string encode_continue(int64_t after_seq, const std::string& filter_key) {
  json j{{"v", 1}, {"s", after_seq}, {"f", sha256_hex(filter_key).substr(0, 16)}};
  return base64_encode(j.dump(), Base64::kUrl);
}

int64_t decode_continue(const std::string& token, const std::string& filter_key) {
  auto bad = [](const std::string& why) {
    return ApiError(400, "invalid_parameter", "continue: " + why, "continue");
  };
  // Anything a client sends here is untrusted: every shape that is not
  // exactly {"v": 1, "s": <int >= 0>, "f": "<16 hex>"} is the same 400.
  int64_t s = -1;
  std::string f;
  try {
    auto raw = base64_decode(token, Base64::kUrl);
    if (!raw) throw bad("not a token issued by this server");
    const json j = parse_json_input(*raw);
    if (!j.is_object() || j.size() != 3 || !j.contains("v") || !j["v"].is_number_integer() || j["v"] != 1 ||
        !j.contains("s") || !j["s"].is_number_integer() || !j.contains("f") || !j["f"].is_string())
      throw bad("not a token issued by this server");
    if (j["s"].is_number_unsigned() && j["s"].get<uint64_t>() > uint64_t(INT64_MAX))
      throw bad("not a token issued by this server");
    s = j["s"].get<int64_t>();
    f = j["f"].get<std::string>();
  } catch (const std::exception&) {
    throw bad("not a token issued by this server");
  }
  if (s < 0) throw bad("not a token issued by this server");
  if (f != sha256_hex(filter_key).substr(0, 16)) throw bad("the token was issued for a different filter");
  return s;
}

struct ApiServer::Impl {
  Registry& reg;
  Scheduler& sched;
  const Auth& auth;
  Metrics& metrics;
  ApiOptions opt;
  std::unique_ptr<TlsCredentials> creds;  // HTTPS: the pair each handshake takes (outlives edge)
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ssl_ctx{nullptr, SSL_CTX_free};
  std::unique_ptr<HttpRouter> svr;        // the routes (never listens)
  std::unique_ptr<HttpEdge> edge;         // connections, deadlines, the pools (http_edge.h)
  std::unique_ptr<FileWatch> tls_watch;   // HTTPS: replaces `creds` when the files change

  Impl(Registry& r, Scheduler& s, const Auth& a, Metrics& m, ApiOptions o)
      : reg(r), sched(s), auth(a), metrics(m), opt(std::move(o)) {
    if (!opt.tls_cert.empty() || !opt.tls_key.empty()) {
      if (opt.tls_cert.empty() || opt.tls_key.empty())
        throw std::runtime_error("TLS needs both --tls-cert and --tls-key");
      // The watch's first read makes `creds` (or throws naming the file).
      tls_watch = std::make_unique<FileWatch>(
          std::vector<std::string>{opt.tls_cert, opt.tls_key}, FileWatchOptions{opt.tls_poll},
          [this](const std::vector<WatchedFile>& f, bool forced, bool initial) { reload_tls(f, forced, initial); },
          [this](const std::string& what) { tls_log(false, "TLS certificate reload failed: " + what); });
      ssl_ctx.reset(SSL_CTX_new(TLS_server_method()));
      if (!ssl_ctx || !SSL_CTX_set_min_proto_version(ssl_ctx.get(), TLS1_2_VERSION))
        throw std::runtime_error("TLS: cannot make a server context");
      SSL_CTX_set_options(ssl_ctx.get(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
      creds->install(ssl_ctx.get());
    }
    svr = std::make_unique<HttpRouter>();
    svr->set_payload_max_length(opt.max_body_bytes);
    routes();
    opt.edge.workers = opt.threads;  // (serve_bytes reads opt.edge too)
    opt.edge.max_body_bytes = opt.max_body_bytes;
    HttpEdgeOptions eo = opt.edge;
    eo.tls = ssl_ctx.get();
    eo.is_stream = &is_log_stream;
    eo.on_edge_response = [this](int status) { metrics.request("", status); };
    edge = std::make_unique<HttpEdge>(*svr, std::move(eo));
  }

  void tls_log(bool ok, const std::string& line) {
    std::fprintf(stderr, "greenshard-controller: %s\n", line.c_str());
    metrics.tls_reloaded(ok);
  }

  // The certificate or key file changed (or SIGHUP): new handshakes take the
  // new pair once both parse and match; until then the old one stays.
  // The first read (initial) makes the pair, and a bad one is an error at
  // start.
  void reload_tls(const std::vector<WatchedFile>& files, bool forced, bool initial) {
    for (const WatchedFile& f : files)
      if (!f.text) {
        if (initial) throw std::runtime_error("TLS: cannot read '" + f.path + "': " + f.error);
        tls_log(false, "TLS certificate reload failed, keeping the one in force: '" + f.path + "': " + f.error);
        return;
      }
    if (initial) {
      creds = std::make_unique<TlsCredentials>(opt.tls_cert, opt.tls_key, *files[0].text, *files[1].text);
      return;
    }
    const std::string why = creds->replace(*files[0].text, *files[1].text);
    if (!why.empty()) {
      tls_log(false, "TLS certificate reload failed, keeping the one in force: " + why);
      return;
    }
    tls_log(true, std::string("TLS certificate '") + opt.tls_cert + "' reloaded (" +
                      (forced ? "requested" : "changed") + "): new connections use it");
  }

  // Wraps a handler: ApiError -> JSON error; anything else -> 500.
  template <class F>
  httplib::Server::Handler wrap(F f) {
    return [this, f](const httplib::Request& req, httplib::Response& res) {
      try {
        f(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const StoreError& e) {
        send_error(res, ApiError(503, "store_unavailable", e.what()));
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, "internal", e.what()));
      }
    };
  }

  Principal user(const httplib::Request& req) const {
    Principal p = auth.authenticate(req.get_header_value("Authorization"));
    if (p.role == Role::kWorker)
      throw ApiError(403, "forbidden", "a worker token may only push job status", "Authorization");
    return p;
  }

  Job find(const httplib::Request& req, const Principal& p) const {
    auto id = req.matches[1].str();
    auto j = reg.get(id, p.tenant);
    if (!j) throw ApiError(404, "not_found", "no job '" + id + "'", "id");
    return *j;
  }

  void check_against_config(const JobSpec& s) const {
    // A deadline already past (by the registry's clock) cannot be honoured.
    if (s.deadline_ms > 0 && s.deadline_ms <= reg.clock().now_ms())
      throw ApiError(422, "deadline_passed",
                     "deadline: " + format_rfc3339(s.deadline_ms) + " is not after now (" +
                         format_rfc3339(reg.clock().now_ms()) + ")",
                     "deadline");
    const auto& regions = sched.region_configs();
    int max_nodes = 0, max_gpus = 0;
    for (size_t i = 0; i < s.regions.size(); ++i) {
      auto it = std::find_if(regions.begin(), regions.end(),
                             [&](const RegionConfig& r) { return r.name == s.regions[i]; });
      if (it == regions.end())
        throw ApiError(422, "unknown_region", "regions[" + std::to_string(i) + "]: no region '" +
                                                  s.regions[i] + "' is configured",
                       "regions[" + std::to_string(i) + "]");
      max_gpus = std::max(max_gpus, it->gpus_per_node);
      if (it->gpus_per_node >= s.gpus_per_node) max_nodes = std::max(max_nodes, it->nodes);
    }
    // The GPUs per node first: with none that has enough, no node count fits,
    // and the cause is gpus_per_node, not nodes.
    if (max_gpus < s.gpus_per_node)
      throw ApiError(422, "unschedulable",
                     "gpus_per_node: no allowed region has nodes with " + std::to_string(s.gpus_per_node) +
                         " GPUs (the most is " + std::to_string(max_gpus) + ")",
                     "gpus_per_node");
    if (max_nodes < s.nodes)
      throw ApiError(422, "unschedulable",
                     "nodes: no allowed region has " + std::to_string(s.nodes) + " nodes with " +
                         std::to_string(s.gpus_per_node) + " GPUs each",
                     "nodes");
    // A move resumes from the checkpoint the gang left in its old region:
    // every allowed region must resolve to the same location.
    if (s.migratable) {
      std::string first_region, first_loc;
      for (const auto& name : s.regions) {
        const RegionConfig& r = *std::find_if(regions.begin(), regions.end(),
                                              [&](const RegionConfig& c) { return c.name == name; });
        const std::string loc = shared_checkpoint_location(r);
        if (loc.empty())
          throw ApiError(422, "checkpoint_not_shared",
                         "migratable: region " + name + " (" + r.executor +
                             ") keeps checkpoints in a place of its own (a volume claim or the pod's disk); "
                             "a job can move only between regions sharing one checkpoint location "
                             "(local regions, or kubernetes regions with the same checkpoint_s3)",
                         "migratable");
        if (first_region.empty()) first_region = name, first_loc = loc;
        else if (loc != first_loc)
          throw ApiError(422, "checkpoint_not_shared",
                         "migratable: regions " + first_region + " and " + name +
                             " keep checkpoints in different places; a job can move only between regions "
                             "sharing one checkpoint location (local regions, or kubernetes regions with the "
                             "same checkpoint_s3)",
                         "migratable");
      }
    }
  }

  void routes() {
    // Every route is registered through `s`, which also records its path
    // pattern and method: a known path asked with another method is 405 with
    // an Allow header, an unknown path 404.
    using Known = std::vector<std::pair<std::regex, std::string>>;
    auto known = std::make_shared<Known>();
    struct Router {
      httplib::Server& svr;
      Known& known;
      void Get(const std::string& p, httplib::Server::Handler h) { add("GET", p), svr.Get(p, std::move(h)); }
      void Post(const std::string& p, httplib::Server::Handler h) { add("POST", p), svr.Post(p, std::move(h)); }
      void Delete(const std::string& p, httplib::Server::Handler h) { add("DELETE", p), svr.Delete(p, std::move(h)); }
      void add(const char* method, const std::string& p) { known.emplace_back(std::regex(p), method); }
    } s{*svr, *known};
    svr->set_error_handler([known](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      ApiError e(res.status, "error", "error");
      std::string allow;
      if (res.status == 404) {
        bool get = false, post = false, del = false;
        for (const auto& [re, m] : *known)
          if (std::regex_match(req.path, re)) get |= m == "GET", post |= m == "POST", del |= m == "DELETE";
        for (const char* m : {get ? "GET, HEAD" : "", post ? "POST" : "", del ? "DELETE" : ""})
          if (*m) allow += (allow.empty() ? "" : ", ") + std::string(m);
      }
      if (!allow.empty())
        e = ApiError(405, "method_not_allowed",
                     req.method + " is not allowed on " + quote_untrusted(req.path, 200) + " (allowed: " + allow + ")");
      else if (res.status == 404)
        e = ApiError(404, "route_not_found", "no route " + req.method + " " + quote_untrusted(req.path, 200));
      else if (res.status == 413) e = ApiError(413, "payload_too_large", "the request body is too large");
      else if (res.status == 400) e = ApiError(400, "bad_request", "malformed HTTP request");
      else e = ApiError(res.status, "http_" + std::to_string(res.status), "HTTP error " + std::to_string(res.status));
      send_json(res, e.status, e.to_json());
      if (!allow.empty()) res.set_header("Allow", allow);
    });
    svr->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      metrics.request(req.method, res.status);
    });

    s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, {{"status", "ok"}});
    });
    s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
      if (sched.cycles() > 0) send_json(res, 200, {{"status", "ready"}, {"cycles", sched.cycles()}});
      else send_error(res, ApiError(503, "not_ready", "the scheduler has not completed a cycle yet"));
    });
    s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.render(), "text/plain; version=0.0.4");
    });
    // The built-in status page (status_page.h): static, no token to load it;
    // its script calls the API below with the user's bearer token.
    s.Get("/", [](const httplib::Request&, httplib::Response& res) {
      for (const auto& [k, v] : status_page_headers()) res.set_header(k, v);
      res.set_content(status_page_html(), "text/html; charset=utf-8");
    });
    // The document is the same for the process's life and public: rendered
    // once (an unauthenticated client cannot make the server build it again
    // and again).
    s.Get("/v1/openapi.json", [](const httplib::Request&, httplib::Response& res) {
      static const std::string document = openapi_document().dump();
      res.status = 200;
      res.set_content(document, "application/json");
    });

    // Submit, and its dry run (?dryRun=true, as the Kubernetes API's
    // dryRun=All): one path through authentication, the role check, every
    // parameter, header and body check and the check against this
    // controller's regions, with the same errors; a dry run then stores
    // nothing, starts nothing and answers 200 with the job as it would be
    // created ("dryRun": true, no id: none is reserved). It neither looks up
    // nor records the Idempotency-Key (only its syntax is checked) and takes
    // no slot of the tenant's quota.
    s.Post("/v1/jobs", wrap([this](const httplib::Request& req, httplib::Response& res) {
      Principal p = user(req);
      const bool yaml = body_media(req, /*yaml_ok=*/true) == Media::kYaml;
      only_params(req, {"dryRun"});
      const bool dry_run = strict_bool_param(req, "dryRun");
      std::string key = req.get_header_value("Idempotency-Key");
      if (key.size() > 128)
        throw ApiError(400, "invalid_header", "Idempotency-Key: at most 128 characters", "Idempotency-Key");
      for (char c : key)
        if (c < 0x21 || c > 0x7e)
          throw ApiError(400, "invalid_header", "Idempotency-Key: printable ASCII only", "Idempotency-Key");
      JobSpec spec = parse_job_spec_text(req.body, yaml);
      check_worker_spec(spec.worker);  // the worker's own schema: 400 naming worker.<field>
      check_against_config(spec);
      if (dry_run) {
        const Job would_be("", p.token_tenant, std::move(spec), reg.clock().now_ms());
        json body = job_view(would_be);
        body["dryRun"] = true;
        body["conditions"][0]["message"] = "dry run: validated and authorized, not stored";
        send_json(res, 200, body);
        return;
      }
      auto r = reg.submit(p.token_tenant, std::move(spec), key);
      if (r.created) {
        metrics.submitted();
        sched.wake();
      }
      res.set_header("Location", "/v1/jobs/" + r.job.id());
      send_json(res, r.created ? 201 : 200, job_view(r.job));
    }));

    s.Get("/v1/jobs", wrap([this](const httplib::Request& req, httplib::Response& res) {
      Principal p = user(req);
      only_params(req, {"state", "tenant", "limit", "continue"});
      ListFilter f;
      f.tenant = p.tenant;
      if (req.has_param("tenant")) {
        std::string t = req.get_param_value("tenant");
        if (p.role != Role::kAdmin && t != p.token_tenant)
          throw ApiError(403, "forbidden", "tenant: only admins may list other tenants' jobs", "tenant");
        f.tenant = t;
      }
      if (req.has_param("state")) {
        auto st = parse_state(req.get_param_value("state"));
        if (!st)
          throw ApiError(400, "invalid_parameter",
                         "state: unknown state " + quote_untrusted(req.get_param_value("state")), "state");
        f.state = st;
      }
      f.limit = int(int_param(req, "limit", 100, 1, 1000));
      const std::string fkey = f.tenant + "|" + (f.state ? std::string(to_string(*f.state)) : "");
      if (req.has_param("continue")) f.after_seq = decode_continue(req.get_param_value("continue"), fkey);
      ListPage page = reg.list(f);
      json items = json::array();
      for (const auto& j : page.jobs) items.push_back(job_view(j));
      json body{{"items", items}};
      body["continue"] = page.next_after_seq ? encode_continue(page.next_after_seq, fkey) : "";
      send_json(res, 200, body);
    }));

    s.Get(R"(/v1/jobs/([a-z0-9]{1,64}))", wrap([this](const httplib::Request& req, httplib::Response& res) {
      Principal p = user(req);
      only_params(req, {});
      Job j = find(req, p);
      json body = job_view(j);
      if (opt.store) {
        json ds = json::array();
        for (const auto& d : opt.store->decisions(j.id(), opt.max_decisions))
          ds.push_back({{"cycle", d.cycle}, {"time", format_rfc3339(d.time_ms)}, {"outcome", std::string(to_string(d.outcome))},
                        {"region", d.region}, {"policy", d.policy}, {"explanation", d.explanation}});
        body["decisions"] = ds;
      }
      // Throughput the job's gangs reported at each width (what placement
      // uses when the spec declares no scaling curve).
      json ms = json::array();
      for (const auto& m : reg.store().measured_scaling(j.id()))
        ms.push_back({{"nodes", m.nodes}, {"tokens_per_second", m.tokens_per_second}, {"samples", m.samples},
                      {"updated", format_rfc3339(m.updated_ms)}});
      body["measured_scaling"] = ms;
      send_json(res, 200, body);
    }));

    s.Post(R"(/v1/jobs/([a-z0-9]{1,64})/cancel)", wrap([this](const httplib::Request& req, httplib::Response& res) {
      Principal p = user(req);
      only_params(req, {});
      Job j = find(req, p);
      JobState before = j.state();
      auto after = reg.update(j.id(), p.tenant, [&](Job& job) {
        if (is_terminal(job.state()))
          throw ApiError(409, "already_finished",
                         "job " + job.id() + " is already " + std::string(to_string(job.state())), "id");
        before = job.state();
        return job.transition(JobState::kCancelled, "Cancelled", "cancelled by " + p.token_tenant,
                              reg.clock().now_ms());
      });
      if (!after) throw ApiError(404, "not_found", "no job '" + j.id() + "'", "id");
      if (before != JobState::kPending) sched.on_cancelled(*after);
      sched.wake();
      send_json(res, 200, job_view(*after));
    }));

    s.Delete(R"(/v1/jobs/([a-z0-9]{1,64}))", wrap([this](const httplib::Request& req, httplib::Response& res) {
      Principal p = user(req);
      only_params(req, {});
      Job j = find(req, p);
      if (!reg.remove(j.id(), p.tenant)) throw ApiError(404, "not_found", "no job '" + j.id() + "'", "id");
      send_json(res, 200, {{"deleted", j.id()}});
    }));

    s.Get(R"(/v1/jobs/([a-z0-9]{1,64})/logs)", wrap([this](const httplib::Request& req, httplib::Response& res) {
      Principal p = user(req);
      only_params(req, {"rank", "offset", "follow"});
      Job j = find(req, p);
      const int world = j.spec().nodes * j.spec().procs_per_node;
      const int rank = int(int_param(req, "rank", 0, 0, world - 1));
      int64_t offset = int_param(req, "offset", 0, 0, INT64_MAX);
      const bool follow = bool_param(req, "follow");
      Executor* ex = j.placement ? sched.executor_for(j.placement->region) : nullptr;
      if (!ex) throw ApiError(404, "no_logs", "job " + j.id() + " has not started; no logs yet", "id");
      if (!follow) {
        auto text = ex->logs(j.id(), rank, offset, kMaxLogChunk);
        if (!text) throw ApiError(404, "no_logs", "no log for rank " + std::to_string(rank) + " yet", "rank");
        res.set_content(*text, "text/plain");
        return;
      }
      const std::string id = j.id();
      res.set_chunked_content_provider(
          "text/plain", [this, ex, id, rank, offset](size_t, httplib::DataSink& sink) mutable {
            for (int idle = 0; idle < 36000; ++idle) {  // bounded: an hour of 100 ms polls
              if (!sink.is_writable()) return false;
              auto chunk = ex->logs(id, rank, offset, 64 * 1024);
              if (chunk && !chunk->empty()) {
                offset += int64_t(chunk->size());
                if (!sink.write(chunk->data(), chunk->size())) return false;
                idle = 0;
                continue;
              }
              auto job = reg.get(id);
              if (!job || is_terminal(job->state())) break;
              std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
            sink.done();
            return true;
          });
    }));

    s.Post(R"(/v1/jobs/([a-z0-9]{1,64})/status)", wrap([this](const httplib::Request& req, httplib::Response& res) {
      // Only the job's own worker token (GREENSHARD_STATUS_TOKEN, what the
      // executors hand its gang): no tokens-file token, whatever its role or
      // tenant, and no other job's token. Deployed workers never hold a
      // tokens-file token for this route (scheduler.cpp: status_token =
      // the job's worker_token).
      const std::string id = req.matches[1].str();
      const std::string header = req.get_header_value("Authorization");
      auto token = bearer_token(header);
      if (!token) auth.authenticate(header);  // throws the right 401
      if (auth.lookup(*token))
        throw ApiError(403, "forbidden", "only the job's own worker token may push its status", "Authorization");
      auto j = reg.get(id);
      if (!j || j->worker_token.empty() || j->worker_token != *token)
        throw ApiError(401, "unauthenticated", "unknown token", "Authorization");
      only_params(req, {});
      Progress pr = parse_worker_status(parse_body(req));
      pr.updated_ms = reg.clock().now_ms();
      auto after = reg.update(id, kAllTenants, [&](Job& job) {
        if (is_terminal(job.state()))
          throw ApiError(409, "already_finished",
                         "job " + id + " is " + std::string(to_string(job.state())), "id");
        job.progress = pr;
        return true;
      });
      if (!after) throw ApiError(404, "not_found", "no job '" + id + "'", "id");
      // The measured scaling curve: a running gang's throughput at its width.
      if (pr.state == greenshard::RunPhase::kRunning && pr.tokens_per_s > 0 && after->state() == JobState::kRunning)
        reg.store().record_throughput(id, gang_nodes(*after), pr.tokens_per_s, pr.updated_ms);
      send_json(res, 200, {{"accepted", true}});
    }));

    s.Get("/v1/regions", wrap([this](const httplib::Request& req, httplib::Response& res) {
      user(req);
      only_params(req, {});
      json items = json::array();
      for (const auto& r : sched.regions_now()) {
        json fc = json::array();
        for (const auto& f : r.forecast)
          fc.push_back({{"time", format_rfc3339(f.time_ms)}, {"gco2_per_kwh", f.gco2_per_kwh}});
        items.push_back({{"name", r.name},
                         {"intensity_gco2_per_kwh", r.intensity_now},
                         {"forecast", fc},
                         {"capacity_nodes", r.capacity_nodes},
                         {"free_nodes", r.free_nodes},
                         {"gpus_per_node", r.gpus_per_node},
                         {"pue", r.pue},
                         {"executor", r.executor}});
      }
      send_json(res, 200, {{"items", items}, {"policy", sched.policy_name()}});
    }));

    // The intensity in force now (what workers integrate their energy with):
    // any token of the tokens file, or the worker token of a job not finished.
    s.Get(R"(/v1/regions/([^/]{1,128})/intensity)", wrap([this](const httplib::Request& req, httplib::Response& res) {
      const std::string header = req.get_header_value("Authorization");
      auto token = bearer_token(header);
      if (!token) auth.authenticate(header);  // throws the right 401
      if (!auth.lookup(*token)) {
        bool job_token = false;
        for (const auto& j : reg.live_jobs())
          if (!j.worker_token.empty() && j.worker_token == *token) job_token = true;
        if (!job_token) throw ApiError(401, "unauthenticated", "unknown token", "Authorization");
      }
      only_params(req, {});
      const std::string name = req.matches[1].str();
      const auto& regions = sched.region_configs();
      auto it = std::find_if(regions.begin(), regions.end(), [&](const RegionConfig& r) { return r.name == name; });
      if (it == regions.end()) throw ApiError(404, "not_found", "no region " + quote_untrusted(name), "name");
      double v = 0;
      try {
        v = intensity_in_force(*it, reg.clock().now_ms(), opt.intensity);
      } catch (const std::exception& e) {
        throw ApiError(503, "intensity_unavailable", "region " + name + ": " + e.what());
      }
      send_json(res, 200, {{"region", name}, {"gco2_per_kwh", v}});
    }));
  }

};

ApiServer::ApiServer(Registry& registry, Scheduler& scheduler, const Auth& auth, Metrics& metrics,
                     ApiOptions options)
    : impl_(std::make_unique<Impl>(registry, scheduler, auth, metrics, std::move(options))) {}
ApiServer::~ApiServer() { stop(); }

int ApiServer::bind(const std::string& host, int port) { return impl_->edge->bind(host, port); }

void ApiServer::serve() { impl_->edge->serve(); }

void ApiServer::stop() { impl_->edge->stop(); }

std::string ApiServer::serve_bytes(std::string_view bytes) {
  return controller::serve_bytes(*impl_->svr, bytes, impl_->opt.edge);
}

HttpEdge::Stats ApiServer::edge_stats() const { return impl_->edge->stats(); }

bool ApiServer::tls() const { return !impl_->opt.tls_cert.empty(); }

void ApiServer::reload_tls() {
  if (impl_->tls_watch) impl_->tls_watch->request_reload();
}

}  // namespace controller
