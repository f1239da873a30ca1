#include "controller/api.h"
#include "controller/file_watch.h"
#include "controller/tls_credentials.h"

#include <httplib.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <mutex>
#include <cmath>
#include <cstdlib>
#include <set>
#include <thread>

#include "controller/base64.h"
#include "controller/openapi.h"
#include "controller/status_page.h"

namespace controller {

using json = nlohmann::json;

namespace {

constexpr int64_t kMaxLogChunk = 1 << 20;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status, e.to_json());
  if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
}

void only_params(const httplib::Request& req, std::initializer_list<const char*> allowed) {
  for (const auto& [k, v] : req.params) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || k == a;
    if (!ok) throw ApiError(400, "unknown_parameter", "unknown query parameter '" + k + "'", k);
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
    throw ApiError(400, "invalid_parameter", std::string(name) + ": expected an integer, got '" + v + "'", name);
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
  throw ApiError(400, "invalid_parameter", std::string(name) + ": expected true or false", name);
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
  throw ApiError(400, "invalid_parameter", std::string(name) + ": expected true or false, got '" + v + "'", name);
}

// POST bodies are JSON; a form body would also be parsed into query params.
void require_json(const httplib::Request& req) {
  if (req.body.empty() && !req.has_header("Content-Type")) return;
  std::string ct = req.get_header_value("Content-Type");
  if (ct.rfind("application/json", 0) != 0)
    throw ApiError(415, "unsupported_media_type",
                   "Content-Type must be application/json, got '" + ct + "'", "Content-Type");
}

json parse_body(const httplib::Request& req) {
  require_json(req);
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) throw ApiError(400, "invalid_json", "the body is not valid JSON");
  return j;
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
  auto raw = base64_decode(token, Base64::kUrl);
  if (!raw) throw bad("not a token issued by this server");
  json j = json::parse(*raw, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("v", 0) != 1 || !j.contains("s") ||
      !j["s"].is_number_integer() || !j.contains("f") || !j["f"].is_string())
    throw bad("not a token issued by this server");
  if (j["f"].get<std::string>() != sha256_hex(filter_key).substr(0, 16))
    throw bad("the token was issued for a different filter");
  int64_t s = j["s"].get<int64_t>();
  if (s < 0) throw bad("not a token issued by this server");
  return s;
}

struct ApiServer::Impl {
  Registry& reg;
  Scheduler& sched;
  const Auth& auth;
  Metrics& metrics;
  ApiOptions opt;
  std::unique_ptr<TlsCredentials> creds;  // HTTPS: the pair each handshake takes (outlives svr)
  std::unique_ptr<httplib::Server> svr;
  std::unique_ptr<FileWatch> tls_watch;   // HTTPS: replaces `creds` when the files change
  std::atomic<bool> serving{false};
  std::mutex run_mu;
  bool stop_requested = false;

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
      auto s = std::make_unique<httplib::SSLServer>(opt.tls_cert.c_str(), opt.tls_key.c_str());
      if (!s->is_valid())
        throw std::runtime_error("TLS: cannot load certificate '" + opt.tls_cert + "' and key '" +
                                 opt.tls_key + "'");
      creds->install(s->ssl_context());
      svr = std::move(s);
    } else {
      svr = std::make_unique<httplib::Server>();
    }
    int n = opt.threads;
    svr->new_task_queue = [n] { return new httplib::ThreadPool(size_t(n)); };
    svr->set_payload_max_length(opt.max_body_bytes);
    svr->set_keep_alive_max_count(100000);
    svr->set_keep_alive_timeout(30);
    svr->set_tcp_nodelay(true);
    routes();
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
    const auto& regions = sched.region_configs();
    int max_nodes = 0;
    for (size_t i = 0; i < s.regions.size(); ++i) {
      auto it = std::find_if(regions.begin(), regions.end(),
                             [&](const RegionConfig& r) { return r.name == s.regions[i]; });
      if (it == regions.end())
        throw ApiError(422, "unknown_region", "regions[" + std::to_string(i) + "]: no region '" +
                                                  s.regions[i] + "' is configured",
                       "regions[" + std::to_string(i) + "]");
      if (it->gpus_per_node >= s.gpus_per_node) max_nodes = std::max(max_nodes, it->nodes);
    }
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
    auto& s = *svr;
    s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      ApiError e(res.status, "error", "error");
      if (res.status == 404) e = ApiError(404, "route_not_found", "no route " + req.method + " " + req.path);
      else if (res.status == 413) e = ApiError(413, "payload_too_large", "the request body is too large");
      else if (res.status == 400) e = ApiError(400, "bad_request", "malformed HTTP request");
      else e = ApiError(res.status, "http_" + std::to_string(res.status), "HTTP error " + std::to_string(res.status));
      send_json(res, e.status, e.to_json());
    });
    s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
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
    s.Get("/v1/openapi.json", [](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, openapi_document());
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
      require_json(req);
      only_params(req, {"dryRun"});
      const bool dry_run = strict_bool_param(req, "dryRun");
      std::string key = req.get_header_value("Idempotency-Key");
      if (key.size() > 128)
        throw ApiError(400, "invalid_header", "Idempotency-Key: at most 128 characters", "Idempotency-Key");
      for (char c : key)
        if (c < 0x21 || c > 0x7e)
          throw ApiError(400, "invalid_header", "Idempotency-Key: printable ASCII only", "Idempotency-Key");
      JobSpec spec = parse_job_spec_text(req.body);
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
                         "state: unknown state '" + req.get_param_value("state") + "'", "state");
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
          ds.push_back({{"cycle", d.cycle}, {"time", format_rfc3339(d.time_ms)}, {"outcome", d.outcome},
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
      const std::string id = req.matches[1].str();
      const std::string header = req.get_header_value("Authorization");
      auto token = bearer_token(header);
      if (!token) auth.authenticate(header);  // throws the right 401
      auto file_principal = auth.lookup(*token);
      if (file_principal && file_principal->role == Role::kUser)
        throw ApiError(403, "forbidden", "only worker tokens may push job status", "Authorization");
      auto j = reg.get(id);
      if (!file_principal) {
        if (!j || j->worker_token != *token)
          throw ApiError(401, "unauthenticated", "unknown token", "Authorization");
      } else if (!j) {
        throw ApiError(404, "not_found", "no job '" + id + "'", "id");
      }
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
      if (pr.state == "running" && pr.tokens_per_s > 0 && after->state() == JobState::kRunning)
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
      if (it == regions.end()) throw ApiError(404, "not_found", "no region '" + name + "'", "name");
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

namespace {

// Debian's cpp-httplib is a compiled library that listens with a backlog of
// 5 (CPPHTTPLIB_LISTEN_BACKLOG is baked into the .so): clients connecting at
// once beyond that overflow the accept queue, their handshake is dropped and
// retried after ~1 s, and some first requests fail. listen() on a socket
// that already listens only changes its backlog, so find the server's
// listening socket (this process's, bound to `port`) and raise it.
void raise_listen_backlog(int port, int backlog) {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == ::dirfd(d)) continue;
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (::getsockopt(int(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    socklen_t alen = sizeof(addr);
    if (::getsockname(int(fd), reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    int p = addr.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
            : addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                         : -1;
    if (p == port) ::listen(int(fd), backlog);
  }
  ::closedir(d);
}

}  // namespace

int ApiServer::bind(const std::string& host, int port) {
  int bound = port == 0 ? impl_->svr->bind_to_any_port(host) : (impl_->svr->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port));
  raise_listen_backlog(bound, 1024);
  return bound;
}

void ApiServer::serve() {
  {
    std::lock_guard<std::mutex> l(impl_->run_mu);
    if (impl_->stop_requested) return;
    impl_->serving = true;
  }
  impl_->svr->listen_after_bind();
  impl_->serving = false;
}

void ApiServer::stop() {
  {
    std::lock_guard<std::mutex> l(impl_->run_mu);
    impl_->stop_requested = true;
    if (!impl_->serving) return;  // serve() will not start, or has returned
  }
  // serve() is in (or about to enter) listen_after_bind: wait until the
  // server runs, then stop it.
  while (impl_->serving.load() && !impl_->svr->is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->svr->stop();
}

bool ApiServer::tls() const { return !impl_->opt.tls_cert.empty(); }

void ApiServer::reload_tls() {
  if (impl_->tls_watch) impl_->tls_watch->request_reload();
}

}  // namespace controller
