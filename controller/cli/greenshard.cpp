// greenshard: the command-line client of greenshard-controller.
//
//   greenshard [--server URL] [--token T] [--ca-bundle FILE] [--config FILE] [--timeout S] [--output table|json]
//              COMMAND
//   submit FILE|- [--dry-run]  list  get ID  cancel ID  delete ID  logs ID [-f] [--rank R]  watch ID  regions
//
// Server, token and CA bundle: flags, else $GREENSHARD_SERVER /
// $GREENSHARD_TOKEN / $GREENSHARD_CA_BUNDLE, else the config file (--config,
// $GREENSHARD_CONFIG, ~/.config/greenshard/config.yaml: "server: URL",
// "token: T", "ca_bundle: PATH" (or its old name "ca_file")).
//
// https:// servers: the server's certificate is always verified (chain and
// host name), against the PEM bundle --ca-bundle names or, without one, the
// system's CAs. --ca-file is the old name of --ca-bundle.
//
// The server URL is checked before anything is sent: http:// or https://,
// a host, an optional port, no path (exit 2 naming where it came from).
// Every request is bounded: --timeout S (env GREENSHARD_TIMEOUT, default
// 60) for the answer, at most 5 s of it for the connection; `logs -f`
// waits up to an hour between chunks.
//
// Exit codes (scripts rely on them):
//   0 ok · 1 other error · 2 usage (flag, file, spec syntax, an unreadable CA
//   bundle, a malformed server URL) · 3 cannot reach the server, one line
//   naming the cause (connection refused, unknown host, TLS handshake or
//   certificate, timeout, closed without an answer, or an answer that is not
//   a GreenShard controller's) · 4 unauthenticated/forbidden (401/403) · 5 not found (404) ·
//   6 conflict (409) · 7 rejected request (400/413/422) · 8 quota (429) ·
//   9 server error (5xx) · 10 the watched job ended FAILED or CANCELLED.
// Errors go to stderr as "greenshard: <message> [field: <field>]".
#include <httplib.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "carbon/http_client.h"
#include "carbon/http_failure.h"
#include "worker/spec/ca_bundle.h"
#include "controller/core/yaml_json.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

using json = nlohmann::json;
using controller::yaml_to_json;

namespace {

struct Exit {
  int code;
  std::string message;
};

[[noreturn]] void fail(int code, const std::string& msg) { throw Exit{code, msg}; }

int exit_for_status(int status) {
  switch (status) {
    case 401: case 403: return 4;
    case 404: return 5;
    case 409: return 6;
    case 400: case 413: case 422: return 7;
    case 429: return 8;
    default: return status >= 500 ? 9 : 1;
  }
}

std::string read_input(const std::string& path) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
  } else {
    std::ifstream in(path);
    if (!in) fail(2, "FILE: cannot read '" + path + "'");
    ss << in.rdbuf();
  }
  return ss.str();
}

// JSON or YAML text -> JSON (exit 2 naming the file on a syntax error).
json parse_spec_file(const std::string& path) {
  std::string text = read_input(path);
  json j = json::parse(text, nullptr, false);
  if (!j.is_discarded()) return j;
  try {
    return yaml_to_json(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    fail(2, "FILE: '" + path + "' is neither JSON nor YAML: " + e.what());
  }
}

bool is_https(const std::string& url) { return url.rfind("https://", 0) == 0; }

// The member `k` of `j` when both are objects, else an empty object: a
// server's answer is outside input, and a missing member must not be read.
const json& member(const json& j, const char* k) {
  static const json empty = json::object();
  if (!j.is_object()) return empty;
  auto it = j.find(k);
  return it != j.end() && it->is_object() ? *it : empty;
}

struct Conn {
  std::string server, token, ca_bundle;
  std::string server_origin = "--server";  // where server came from, for its messages
  std::string output = "table";
  double timeout_s = 60;  // --timeout

  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(int64_t(timeout_s * 1000)); }
  std::chrono::milliseconds connect_timeout() const { return std::min(timeout(), std::chrono::milliseconds(5000)); }

  // Checks server before anything is read or sent: exit 2 naming server_origin.
  void check_server_url() const {
    try {
      carbon::parse_http_base_url(server);
    } catch (const std::invalid_argument& e) {
      fail(2, server_origin + ": " + e.what());
    }
  }

  // An https:// server's certificate is always verified (chain and host
  // name): against ca_bundle, else the system's CAs.
  carbon::HttpClientOptions options() const {
    carbon::HttpClientOptions o;
    o.base_url = server;
    o.ca_bundle = ca_bundle;
    o.connect_timeout = connect_timeout();
    o.read_timeout = timeout();
    o.write_timeout = timeout();
    o.read_timeout_origin = "--timeout";
    o.bearer_token = token;
    return o;
  }

  httplib::Client client() const {
    check_server_url();
    return carbon::make_http_client(options());
  }

  std::string check_server() const { return "check " + server_origin; }

  // A failed request, sent at `sent`: exit 3, one line naming the cause
  // (carbon::explain_http_failure) and the flag that fixes it.
  [[noreturn]] void unreachable(const httplib::Result& r, const httplib::Client& cl,
                                std::chrono::steady_clock::time_point sent) const {
    using Kind = carbon::HttpFailure::Kind;
    const carbon::HttpFailure f = carbon::explain_http_failure(r, cl, options(), sent);
    std::string hint;
    switch (f.kind) {
      case Kind::kCertificate: hint = "use --ca-bundle FILE with the CA that signed the server's certificate"; break;
      case Kind::kCaBundle: hint = "use --ca-bundle FILE"; break;
      case Kind::kTimeout: hint = "raise --timeout, or " + check_server(); break;
      case Kind::kHandshake: hint = "is it an http:// server? " + check_server(); break;
      case Kind::kClosed: hint = (is_https(server) ? "" : "is it an https:// server? ") + check_server(); break;
      case Kind::kRefused: hint = "is the controller running? " + check_server(); break;
      case Kind::kConnectTimeout: hint = "a firewall, or the wrong host? " + check_server(); break;
      case Kind::kOther: hint = check_server(); break;
    }
    fail(3, f.cause + " (" + hint + ")");
  }

  // An answer that is no GreenShard controller's: exit 3 naming what came.
  [[noreturn]] void not_greenshard(const httplib::Response& res, const std::string& path) const {
    std::string type = res.get_header_value("Content-Type");
    if (type.empty()) type = "no Content-Type";
    if (type.size() > 60) type = type.substr(0, 60) + "...";
    fail(3, server + " is not a GreenShard controller: " + path.substr(0, path.find('?')) + " answered HTTP " +
                std::to_string(res.status) + " (" + type + "), not its JSON (" + check_server() + ")");
  }

  // Checks a response to `path`, sent at `started`; returns its JSON body
  // (an object). Error answers must have the controller's shape
  // ({"error": {"message": ...}}), others are not_greenshard.
  json check(const httplib::Result& r, const httplib::Client& cl, const std::string& path,
             std::chrono::steady_clock::time_point started) const {
    if (!r) unreachable(r, cl, started);
    json body = json::parse(r->body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) not_greenshard(*r, path);
    if (r->status >= 400) {
      const json& e = member(body, "error");
      if (!e.contains("message") || !e["message"].is_string()) not_greenshard(*r, path);
      std::string msg = e["message"].get<std::string>();
      if (e.contains("field") && e["field"].is_string() && !e["field"].get<std::string>().empty())
        msg += " [field: " + e["field"].get<std::string>() + "]";
      fail(exit_for_status(r->status), msg);
    }
    return body;
  }

  json get(const std::string& path) const {
    auto c = client();
    const auto t0 = std::chrono::steady_clock::now();
    return check(c.Get(path), c, path, t0);
  }
  json post(const std::string& path, const json& body, const httplib::Headers& h = {}) const {
    auto c = client();
    const auto t0 = std::chrono::steady_clock::now();
    return check(c.Post(path, h, body.dump(), "application/json"), c, path, t0);
  }
};

std::string str(const json& j, const char* k, const std::string& def = "") {
  return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : def;
}

std::string fmt_duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  long t = long(s);
  char b[32];
  if (t >= 3600) std::snprintf(b, sizeof b, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60) std::snprintf(b, sizeof b, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(b, sizeof b, "%lds", t);
  return b;
}

void print_job(const Conn& c, const json& j) {
  if (c.output == "json") {
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("id:        %s\n", str(j, "id").c_str());
  std::printf("name:      %s\n", member(j, "spec").value("name", "").c_str());
  std::printf("tenant:    %s\n", str(j, "tenant").c_str());
  std::printf("state:     %s\n", str(j, "state").c_str());
  if (j.contains("placement") && j["placement"].is_object()) {
    const auto& p = j["placement"];
    std::printf("region:    %s (%s)\n", p.value("region", "").c_str(), p.value("policy", "").c_str());
    std::printf("why:       %s\n", p.value("explanation", "").c_str());
  }
  const auto& pr = member(j, "progress");
  if (pr.value("total_steps", 0) > 0)
    std::printf("progress:  step %lld/%lld, loss %.4g, %.0f tokens/s, ETA %s\n",
                (long long)pr.value("step", 0LL), (long long)pr.value("total_steps", 0LL),
                pr.value("loss", 0.0), pr.value("tokens_per_s", 0.0), fmt_duration(pr.value("eta_s", 0.0)).c_str());
  std::printf("emissions: %.4g gCO2e (%.4g J)\n", member(j, "energy").value("total_grams", 0.0),
              member(j, "energy").value("joules", 0.0));
  std::printf("restarts:  %d\n", j.value("recovery_count", 0));
  if (!str(j, "failure_reason").empty()) std::printf("failure:   %s\n", str(j, "failure_reason").c_str());
}

std::string url_escape(const std::string& s) { return httplib::detail::encode_query_param(s); }

void check_id(const std::string& id) {
  if (id.empty() || id.size() > 64) fail(2, "ID: expected a job id");
  for (char ch : id)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))) fail(2, "ID: '" + id + "' is not a job id");
}

int run(int argc, char** argv) {
  CLI::App app{"greenshard: submit and follow carbon-aware training jobs"};
  app.require_subcommand(1);
  Conn c;
  std::string config_file;
  app.add_option("--server,-s", c.server, "controller URL (env GREENSHARD_SERVER)");
  app.add_option("--token,-t", c.token, "bearer token (env GREENSHARD_TOKEN)");
  app.add_option("--ca-bundle,--ca-file", c.ca_bundle,
                 "PEM CA bundle that verifies an https:// server (env GREENSHARD_CA_BUNDLE; default: the system's CAs)");
  app.add_option("--config", config_file, "config file (env GREENSHARD_CONFIG)");
  app.add_option("--output,-o", c.output, "table | json")->check(CLI::IsMember({"table", "json"}));
  app.add_option("--timeout", c.timeout_s,
                 "seconds to wait for each answer (at most 5 of them to connect; env GREENSHARD_TIMEOUT)")
      ->check(CLI::Range(0.1, 86400.0))->envname("GREENSHARD_TIMEOUT");

  std::string file, id, key, state;
  int limit = 100, rank = 0;
  bool follow = false, all = false, dry_run = false;
  double interval = 2;
  auto* submit = app.add_subcommand("submit", "submit a job spec (YAML or JSON; '-' = stdin)");
  submit->add_option("FILE", file)->required();
  submit->add_option("--idempotency-key", key, "resubmitting with the same key returns the same job");
  submit->add_flag("--dry-run", dry_run,
                   "validate and authorize on the server (POST /v1/jobs?dryRun=true); store and start nothing");
  auto* list = app.add_subcommand("list", "list jobs");
  list->add_option("--state", state, "only this state");
  list->add_option("--limit", limit, "page size")->check(CLI::Range(1, 1000));
  list->add_flag("--all", all, "follow every page");
  auto* get = app.add_subcommand("get", "show one job");
  get->add_option("ID", id)->required();
  auto* cancel = app.add_subcommand("cancel", "cancel a job");
  cancel->add_option("ID", id)->required();
  auto* del = app.add_subcommand("delete", "delete a finished job");
  del->add_option("ID", id)->required();
  auto* logs = app.add_subcommand("logs", "print a rank's log");
  logs->add_option("ID", id)->required();
  logs->add_option("--rank,-r", rank, "rank")->check(CLI::NonNegativeNumber);
  logs->add_flag("--follow,-f", follow, "stream until the job ends");
  auto* watch = app.add_subcommand("watch", "follow a job's progress until it ends");
  watch->add_option("ID", id)->required();
  watch->add_option("--interval", interval, "seconds between polls")->check(CLI::Range(0.05, 3600.0));
  auto* regions = app.add_subcommand("regions", "regions: intensity, forecast, capacity");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  // Server and token: flag > env > config file.
  if (config_file.empty() && std::getenv("GREENSHARD_CONFIG")) config_file = std::getenv("GREENSHARD_CONFIG");
  bool explicit_config = !config_file.empty();
  if (config_file.empty() && std::getenv("HOME"))
    config_file = std::string(std::getenv("HOME")) + "/.config/greenshard/config.yaml";
  if (!c.server.empty()) c.server_origin = "--server";
  else if (std::getenv("GREENSHARD_SERVER")) {
    c.server = std::getenv("GREENSHARD_SERVER");
    c.server_origin = "--server (from GREENSHARD_SERVER)";
  }
  if (c.token.empty() && std::getenv("GREENSHARD_TOKEN")) c.token = std::getenv("GREENSHARD_TOKEN");
  // Where the CA bundle came from, for its error message.
  std::string ca_origin = "--ca-bundle";
  if (c.ca_bundle.empty() && std::getenv("GREENSHARD_CA_BUNDLE")) {
    c.ca_bundle = std::getenv("GREENSHARD_CA_BUNDLE");
    ca_origin = "--ca-bundle (from GREENSHARD_CA_BUNDLE)";
  }
  // The config file fills in what flags and environment left open (the CA
  // bundle only matters for an https:// server).
  if (c.server.empty() || c.token.empty() || (c.ca_bundle.empty() && is_https(c.server))) {
    std::ifstream in(config_file);
    if (!in && explicit_config) fail(2, "--config: cannot read '" + config_file + "'");
    if (in) {
      try {
        YAML::Node cfg = YAML::LoadFile(config_file);
        for (const auto& kv : cfg) {
          auto k = kv.first.as<std::string>();
          if (k != "server" && k != "token" && k != "ca_bundle" && k != "ca_file")
            fail(2, "--config: " + config_file + ": unknown key '" + k + "'");
        }
        if (cfg["ca_bundle"] && cfg["ca_file"])
          fail(2, "--config: " + config_file + ": ca_bundle and ca_file (its old name) are both set");
        if (c.server.empty() && cfg["server"]) {
          c.server = cfg["server"].as<std::string>();
          c.server_origin = "--server (from " + config_file + ": server)";
        }
        if (c.token.empty() && cfg["token"]) c.token = cfg["token"].as<std::string>();
        for (const char* k : {"ca_bundle", "ca_file"})
          if (c.ca_bundle.empty() && cfg[k]) {
            c.ca_bundle = cfg[k].as<std::string>();
            ca_origin = "--ca-bundle (from " + config_file + ": " + k + ")";
          }
      } catch (const YAML::Exception& e) {
        fail(2, "--config: " + config_file + ": " + e.what());
      }
    }
  }
  if (c.server.empty()) fail(2, "--server: required (or GREENSHARD_SERVER, or server: in the config file)");
  while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
  c.check_server_url();  // exit 2 before anything is read or sent
  if (!c.ca_bundle.empty()) {
    try {
      greenshard::check_ca_bundle(c.ca_bundle, ca_origin);
    } catch (const std::runtime_error& e) {
      fail(2, e.what());
    }
  }

  if (*submit) {
    json spec = parse_spec_file(file);
    if (!spec.is_object()) fail(2, "FILE: the job spec must be a mapping");
    httplib::Headers h;
    if (!key.empty()) h.emplace("Idempotency-Key", key);
    json j = c.post(dry_run ? "/v1/jobs?dryRun=true" : "/v1/jobs", spec, h);
    if (c.output == "json") std::cout << j.dump(2) << "\n";
    else if (dry_run)
      std::printf("dry run: %s is valid for tenant %s; nothing was submitted\n",
                  j.contains("spec") && j["spec"].is_object() ? j["spec"].value("name", "").c_str() : "",
                  str(j, "tenant").c_str());
    else std::printf("%s %s\n", str(j, "id").c_str(), str(j, "state").c_str());
    return 0;
  }
  if (*list) {
    std::string q = "/v1/jobs?limit=" + std::to_string(limit);
    if (!state.empty()) q += "&state=" + url_escape(state);
    std::string cont;
    json all_items = json::array();
    bool header = false;  // printed once the first page came: a failed list prints no table
    do {
      const std::string path = q + (cont.empty() ? "" : "&continue=" + url_escape(cont));
      json page = c.get(path);
      if (page.contains("items") && !page["items"].is_array()) fail(3, c.server + " is not a GreenShard controller: "
                                                                    "GET /v1/jobs answered no items list (" +
                                                                    c.check_server() + ")");
      if (c.output == "table" && !header) {
        std::printf("%-17s %-24s %-11s %-10s %s\n", "ID", "NAME", "STATE", "REGION", "GCO2E");
        header = true;
      }
      for (const auto& j : page.value("items", json::array())) {
        all_items.push_back(j);
        if (c.output == "table")
          std::printf("%-17s %-24s %-11s %-10s %.4g\n", str(j, "id").c_str(),
                      member(j, "spec").value("name", "").c_str(), str(j, "state").c_str(),
                      j.contains("placement") && j["placement"].is_object()
                          ? j["placement"].value("region", "").c_str() : "-",
                      member(j, "energy").value("total_grams", 0.0));
      }
      cont = str(page, "continue");
    } while (all && !cont.empty());
    if (c.output == "json") std::cout << json{{"items", all_items}, {"continue", cont}}.dump(2) << "\n";
    return 0;
  }
  if (*get) {
    check_id(id);
    print_job(c, c.get("/v1/jobs/" + id));
    return 0;
  }
  if (*cancel) {
    check_id(id);
    json j = c.post("/v1/jobs/" + id + "/cancel", json::object());
    if (c.output == "json") std::cout << j.dump(2) << "\n";
    else std::printf("%s %s\n", id.c_str(), str(j, "state").c_str());
    return 0;
  }
  if (*del) {
    check_id(id);
    auto cl = c.client();
    const std::string path = "/v1/jobs/" + id;
    const auto t0 = std::chrono::steady_clock::now();
    json j = c.check(cl.Delete(path), cl, path, t0);
    if (c.output == "json") std::cout << j.dump(2) << "\n";
    else std::printf("%s deleted\n", id.c_str());
    return 0;
  }
  if (*logs) {
    check_id(id);
    std::string path = "/v1/jobs/" + id + "/logs?rank=" + std::to_string(rank) + (follow ? "&follow=true" : "");
    auto cl = c.client();
    if (follow) cl.set_read_timeout(std::chrono::hours(1));  // a quiet rank is no dead server
    const auto t0 = std::chrono::steady_clock::now();
    std::string err_body;
    int status = 0;
    auto r = cl.Get(
        path, httplib::Headers{},
        [&](const httplib::Response& res) {
          status = res.status;
          return true;
        },
        [&](const char* data, size_t n) {
          if (status >= 400) err_body.append(data, n);
          else {
            std::fwrite(data, 1, n, stdout);
            std::fflush(stdout);
          }
          return true;
        });
    // -f waits an hour between chunks, not --timeout: no failure of it reads as a timeout.
    if (!r) c.unreachable(r, cl, follow ? t0 + std::chrono::hours(1) : t0);
    if (status >= 400) {
      r->body = err_body;
      c.check(r, cl, path, t0);
    }
    return 0;
  }
  if (*watch) {
    check_id(id);
    const bool tty = isatty(1) && c.output == "table";
    for (;;) {
      json j = c.get("/v1/jobs/" + id);
      const std::string st = str(j, "state");
      if (c.output == "json") {
        std::cout << j.dump() << "\n" << std::flush;
      } else {
        const auto& p = member(j, "progress");
        long long step = p.value("step", 0LL), total = p.value("total_steps", 0LL);
        double frac = total > 0 ? double(step) / double(total) : 0;
        int w = 24, filled = int(frac * w + 0.5);
        std::string bar = "[" + std::string(size_t(filled), '#') + std::string(size_t(w - filled), '-') + "]";
        std::printf("%s%-10s %s %3.0f%% step %lld/%lld loss %.4g %.0f tok/s ETA %s %.4g gCO2e%s",
                    tty ? "\r" : "", st.c_str(), bar.c_str(), frac * 100, step, total, p.value("loss", 0.0),
                    p.value("tokens_per_s", 0.0), fmt_duration(p.value("eta_s", 0.0)).c_str(),
                    member(j, "energy").value("total_grams", 0.0), tty ? "   " : "\n");
        std::fflush(stdout);
      }
      if (st == "SUCCEEDED" || st == "FAILED" || st == "CANCELLED") {
        if (tty) std::printf("\n");
        if (st != "SUCCEEDED") {
          std::string why = str(j, "failure_reason");
          fail(10, "job " + id + " ended " + st + (why.empty() ? "" : ": " + why));
        }
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    }
  }
  if (*regions) {
    json r = c.get("/v1/regions");
    if (c.output == "json") {
      std::cout << r.dump(2) << "\n";
      return 0;
    }
    std::printf("%-12s %10s %6s %10s %5s %s\n", "REGION", "GCO2/KWH", "PUE", "FREE/CAP", "GPUS", "EXECUTOR");
    if (!r.contains("items") || !r["items"].is_array())
      fail(3, c.server + " is not a GreenShard controller: GET /v1/regions answered no items list (" +
                  c.check_server() + ")");
    for (const auto& x : r["items"])
      std::printf("%-12s %10.1f %6.2f %4d/%-5d %5d %s\n", str(x, "name").c_str(),
                  x.value("intensity_gco2_per_kwh", 0.0), x.value("pue", 1.0), x.value("free_nodes", 0),
                  x.value("capacity_nodes", 0), x.value("gpus_per_node", 0), str(x, "executor").c_str());
    return 0;
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Exit& e) {
    std::fprintf(stderr, "greenshard: %s\n", e.message.c_str());
    return e.code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "greenshard: %s\n", e.what());
    return 1;
  }
}
