// The REST API on a real server on loopback: every route, every error code,
// pagination, idempotency, the auth matrix, the OpenAPI document, TLS and
// the metrics text (checked by promtool).
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <sstream>

#include "controller/core/base64.h"
#include "controller/api/openapi.h"
#include "fixture.h"

using namespace controller;
using namespace ctltest;
using json = nlohmann::json;

namespace {

struct Reply {
  int status = 0;
  json body;
  std::string text;
};

Reply call(const Controller& c, const std::string& method, const std::string& path,
           const std::string& token, const std::string& body = "", const httplib::Headers& extra = {},
           const std::string& content_type = "application/json") {
  auto cli = c.client(token);
  httplib::Result r = method == "GET"      ? cli.Get(path, extra)
                      : method == "DELETE" ? cli.Delete(path, extra)
                      : method == "PUT"    ? cli.Put(path, extra, body, content_type.c_str())
                                           : cli.Post(path, extra, body, content_type.c_str());
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.text = r->body;
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

std::string submit(const Controller& c, const std::string& token = kUserA, json s = spec()) {
  Reply r = call(c, "POST", "/v1/jobs", token, s.dump());
  EXPECT_EQ(r.status, 201) << r.text;
  return r.body.value("id", "");
}

void finish(Controller& c, const std::string& id) {
  c.registry->update(id, kAllTenants, [&](Job& j) {
    return j.transition(JobState::kCancelled, "Test", "", c.clock.now_ms());
  });
}

void expect_error(const Reply& r, int status, const std::string& code, const std::string& field) {
  EXPECT_EQ(r.status, status) << r.text;
  ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.text;
  EXPECT_EQ(r.body["error"]["code"], code) << r.text;
  EXPECT_EQ(r.body["error"]["field"], field) << r.text;
  EXPECT_TRUE(r.body["error"]["message"].is_string());
}

}  // namespace

TEST(ControllerApi, SubmitReturnsTheJobWithItsPlacementAfterACycle) {
  Controller c;
  Reply r = call(c, "POST", "/v1/jobs", kUserA, spec().dump());
  ASSERT_EQ(r.status, 201) << r.text;
  EXPECT_EQ(r.body["state"], "PENDING");
  EXPECT_EQ(r.body["tenant"], "team-a");
  const std::string id = r.body["id"];
  c.sched->cycle();
  Reply g = call(c, "GET", "/v1/jobs/" + id, kUserA);
  ASSERT_EQ(g.status, 200);
  ASSERT_TRUE(g.body["placement"].is_object()) << g.text;
  // FR is cleaner (50 vs 300 g/kWh) and allowed.
  EXPECT_EQ(g.body["placement"]["region"], "FR");
  EXPECT_GT(g.body["placement"]["grams_avoided"].get<double>(), 0);
  // It names the job by its id (not the scheduler's internal sequence number).
  EXPECT_EQ(g.body["placement"]["explanation"].get<std::string>().rfind("Job " + id + " ", 0), 0u)
      << g.body["placement"]["explanation"];
  EXPECT_EQ(c.store->decisions(id).size(), 1u);
  EXPECT_EQ(c.store->decisions(id)[0].explanation.rfind("Job " + id + " ", 0), 0u);
}

TEST(ControllerApi, IdempotencyKeyReplaysAndConflicts) {
  Controller c;
  httplib::Headers k{{"Idempotency-Key", "abc-1"}};
  Reply a = call(c, "POST", "/v1/jobs", kUserA, spec().dump(), k);
  Reply b = call(c, "POST", "/v1/jobs", kUserA, spec().dump(2), k);  // same JSON, other spacing
  ASSERT_EQ(a.status, 201);
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(a.body["id"], b.body["id"]);
  expect_error(call(c, "POST", "/v1/jobs", kUserA, spec("other").dump(), k), 409, "idempotency_conflict",
               "Idempotency-Key");
  // Another tenant may use the same key.
  EXPECT_EQ(call(c, "POST", "/v1/jobs", kUserB, spec().dump(), k).status, 201);
}

TEST(ControllerApi, PaginationVisitsEveryJobOnceInOrder) {
  Controller c;
  std::vector<std::string> ids;
  for (int i = 0; i < 23; ++i) ids.push_back(submit(c));
  submit(c, kUserB);  // not visible to team-a
  std::vector<std::string> seen;
  std::string cont;
  int pages = 0;
  do {
    Reply r = call(c, "GET", "/v1/jobs?limit=10" + (cont.empty() ? "" : "&continue=" + cont), kUserA);
    ASSERT_EQ(r.status, 200) << r.text;
    for (auto& j : r.body["items"]) seen.push_back(j["id"]);
    cont = r.body["continue"];
    ++pages;
  } while (!cont.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, ids);
  // A token is bound to its filter, and a made-up token is refused.
  Reply first = call(c, "GET", "/v1/jobs?limit=10", kUserA);
  std::string tok = first.body["continue"];
  expect_error(call(c, "GET", "/v1/jobs?state=RUNNING&continue=" + tok, kUserA), 400, "invalid_parameter", "continue");
  expect_error(call(c, "GET", "/v1/jobs?continue=bm9wZQ", kUserA), 400, "invalid_parameter", "continue");
  // The admin sees both tenants, and may filter by one.
  EXPECT_EQ(call(c, "GET", "/v1/jobs?limit=1000", kAdmin).body["items"].size(), 24u);
  EXPECT_EQ(call(c, "GET", "/v1/jobs?tenant=team-b", kAdmin).body["items"].size(), 1u);
  EXPECT_EQ(call(c, "GET", "/v1/jobs?state=PENDING&limit=1000", kUserA).body["items"].size(), 23u);
  EXPECT_EQ(call(c, "GET", "/v1/jobs?state=RUNNING", kUserA).body["items"].size(), 0u);
}

struct ErrorCase {
  const char* sentence;
  std::function<Reply(Controller&)> run;
  int status;
  const char* code;
  const char* field;
};

const ErrorCase kErrorCases[] = {
    {"a body that is not JSON is 400 invalid_json",
     [](Controller& c) { return call(c, "POST", "/v1/jobs", kUserA, "{nope"); }, 400, "invalid_json", ""},
    {"an unknown spec field is 400 naming it",
     [](Controller& c) { auto s = spec(); s["gpus"] = 1; return call(c, "POST", "/v1/jobs", kUserA, s.dump()); },
     400, "unknown_field", "gpus"},
    {"an unknown query parameter is 400 naming it",
     [](Controller& c) { return call(c, "GET", "/v1/jobs?colour=red", kUserA); }, 400, "unknown_parameter", "colour"},
    {"a limit of zero is 400", [](Controller& c) { return call(c, "GET", "/v1/jobs?limit=0", kUserA); }, 400,
     "invalid_parameter", "limit"},
    {"an unknown state filter is 400", [](Controller& c) { return call(c, "GET", "/v1/jobs?state=DONE", kUserA); },
     400, "invalid_parameter", "state"},
    {"a form body is 415",
     [](Controller& c) {
       return call(c, "POST", "/v1/jobs", kUserA, "a=b", {}, "application/x-www-form-urlencoded");
     },
     415, "unsupported_media_type", "Content-Type"},
    {"no token is 401", [](Controller& c) { return call(c, "GET", "/v1/jobs", ""); }, 401, "unauthenticated",
     "Authorization"},
    {"a user listing another tenant is 403",
     [](Controller& c) { return call(c, "GET", "/v1/jobs?tenant=team-b", kUserA); }, 403, "forbidden", "tenant"},
    {"an unknown job is 404", [](Controller& c) { return call(c, "GET", "/v1/jobs/jnothere", kUserA); }, 404,
     "not_found", "id"},
    {"an unknown route is 404 route_not_found", [](Controller& c) { return call(c, "GET", "/v1/nothing", kUserA); },
     404, "route_not_found", ""},
    {"cancelling a finished job is 409",
     [](Controller& c) {
       auto id = submit(c);
       finish(c, id);
       return call(c, "POST", "/v1/jobs/" + id + "/cancel", kUserA);
     },
     409, "already_finished", "id"},
    {"deleting an unfinished job is 409",
     [](Controller& c) { return call(c, "DELETE", "/v1/jobs/" + submit(c), kUserA); }, 409, "not_finished", ""},
    {"a body over the limit is 413",
     [](Controller& c) {
       auto s = spec();
       s["worker"]["pad"] = std::string(300 * 1024, 'x');
       return call(c, "POST", "/v1/jobs", kUserA, s.dump());
     },
     413, "payload_too_large", ""},
    {"an unknown region is 422 naming its index",
     [](Controller& c) { auto s = spec(); s["regions"] = {"DE", "XX"}; return call(c, "POST", "/v1/jobs", kUserA, s.dump()); },
     422, "unknown_region", "regions[1]"},
    {"more nodes than any region has is 422",
     [](Controller& c) { auto s = spec(); s["nodes"] = 3; return call(c, "POST", "/v1/jobs", kUserA, s.dump()); }, 422,
     "unschedulable", "nodes"},
    {"more GPUs per node than any region has is 422 naming gpus_per_node",
     [](Controller& c) { auto s = spec(); s["gpus_per_node"] = 2; return call(c, "POST", "/v1/jobs", kUserA, s.dump()); },
     422, "unschedulable", "gpus_per_node"},
    {"one GPU per node where no region has GPUs is 422 naming gpus_per_node",
     [](Controller& c) {
       auto s = spec();
       s["gpus_per_node"] = 1;
       s["procs_per_node"] = 1;
       return call(c, "POST", "/v1/jobs", kUserA, s.dump());
     },
     422, "unschedulable", "gpus_per_node"},
    {"a deadline in the past is 422 naming deadline",
     [](Controller& c) {
       auto s = spec();
       s["deadline"] = format_rfc3339(c.clock.now_ms() - 1000);
       return call(c, "POST", "/v1/jobs", kUserA, s.dump());
     },
     422, "deadline_passed", "deadline"},
    {"a deadline in the past is 422 in a dry run too",
     [](Controller& c) {
       auto s = spec();
       s["deadline"] = format_rfc3339(c.clock.now_ms());
       return call(c, "POST", "/v1/jobs?dryRun=true", kUserA, s.dump());
     },
     422, "deadline_passed", "deadline"},
    {"a tenant over its quota is 429",
     [](Controller& c) {
       for (int i = 0; i < c.opt.max_live; ++i) submit(c, kUserB);
       return call(c, "POST", "/v1/jobs", kUserB, spec().dump());
     },
     429, "quota_exceeded", ""},
    {"a log rank outside the gang is 400",
     [](Controller& c) { return call(c, "GET", "/v1/jobs/" + submit(c) + "/logs?rank=2", kUserA); }, 400,
     "invalid_parameter", "rank"},
    {"logs of a job that never started are 404",
     [](Controller& c) { return call(c, "GET", "/v1/jobs/" + submit(c) + "/logs", kUserA); }, 404, "no_logs", "id"},
    {"a status push with an unknown field is 400",
     [](Controller& c) {
       auto id = submit(c);
       return call(c, "POST", "/v1/jobs/" + id + "/status", c.registry->get(id)->worker_token,
                   R"({"state":"running","lost":1})");
     },
     400, "unknown_field", "lost"},
    {"a status push with a bad state is 400",
     [](Controller& c) {
       auto id = submit(c);
       return call(c, "POST", "/v1/jobs/" + id + "/status", c.registry->get(id)->worker_token, R"({"state":"ok"})");
     },
     400, "invalid_field", "state"},
    {"a status push for a finished job is 409",
     [](Controller& c) {
       auto id = submit(c);
       finish(c, id);
       return call(c, "POST", "/v1/jobs/" + id + "/status", c.registry->get(id)->worker_token,
                   R"({"state":"running"})");
     },
     409, "already_finished", "id"},
};

class ErrorTable : public ::testing::TestWithParam<ErrorCase> {};
TEST_P(ErrorTable, Answers) {
  Controller c;
  const auto& e = GetParam();
  expect_error(e.run(c), e.status, e.code, e.field);
}
INSTANTIATE_TEST_SUITE_P(ControllerApiErrors, ErrorTable, ::testing::ValuesIn(kErrorCases),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

// --- auth matrix ------------------------------------------------------------

struct Route {
  std::string method, path;  // {id}: a job of team-a
  bool worker_route;
};

const std::vector<Route> kRoutes = {
    {"POST", "/v1/jobs", false},        {"GET", "/v1/jobs", false},
    {"GET", "/v1/jobs/{id}", false},    {"POST", "/v1/jobs/{id}/cancel", false},
    {"DELETE", "/v1/jobs/{id}", false}, {"GET", "/v1/jobs/{id}/logs", false},
    {"GET", "/v1/regions", false},      {"POST", "/v1/jobs/{id}/status", true},
};

TEST(ControllerAuthMatrix, EveryRouteRefusesTheWrongCaller) {
  Controller c;
  const std::string id = submit(c);
  for (const auto& r : kRoutes) {
    std::string path = r.path;
    if (auto p = path.find("{id}"); p != std::string::npos) path.replace(p, 4, id);
    const bool has_id = r.path.find("{id}") != std::string::npos;
    std::string body = r.worker_route ? R"({"state":"running"})" : spec().dump();
    SCOPED_TRACE(r.method + " " + r.path);
    EXPECT_EQ(call(c, r.method, path, "", body).status, 401);
    EXPECT_EQ(call(c, r.method, path, "not-a-known-token-at-all", body).status, 401);
    if (r.worker_route) {
      EXPECT_EQ(call(c, r.method, path, kUserA, body).status, 403);
      EXPECT_EQ(call(c, r.method, path, kUserB, body).status, 403);
    } else {
      EXPECT_EQ(call(c, r.method, path, kWorker, body).status, 403);
      // The job's own status token is not a user credential either.
      EXPECT_EQ(call(c, r.method, path, c.registry->get(id)->worker_token, body).status, 401);
      if (has_id) EXPECT_EQ(call(c, r.method, path, kUserB, body).status, 404);
    }
  }
  // Nothing above changed the job.
  EXPECT_EQ(c.state(id), JobState::kPending);
}

TEST(ControllerAuthMatrix, StatusPushAcceptsTheJobsOwnTokenOnlyForThatJob) {
  Controller c;
  const std::string a = submit(c), b = submit(c);
  const std::string tok_a = c.registry->get(a)->worker_token;
  const std::string push =
      R"({"state":"running","step":10,"total_steps":100,"loss":2.5,"val_loss":null,"tokens_per_s":100.5,"eta_s":90,"energy_joules":360000,"operational_grams":12.5,"embodied_grams":0.5})";
  EXPECT_EQ(call(c, "POST", "/v1/jobs/" + a + "/status", tok_a, push).status, 200);
  EXPECT_EQ(call(c, "POST", "/v1/jobs/" + b + "/status", tok_a, push).status, 401);
  EXPECT_EQ(call(c, "POST", "/v1/jobs/" + b + "/status", kWorker, push).status, 403);
  Reply g = call(c, "GET", "/v1/jobs/" + a, kUserA);
  EXPECT_EQ(g.body["progress"]["step"], 10);
  EXPECT_DOUBLE_EQ(g.body["energy"]["total_grams"].get<double>(), 13.0);
}

TEST(ControllerApi, CancelAndDeleteAJob) {
  Controller c;
  const std::string id = submit(c);
  Reply r = call(c, "POST", "/v1/jobs/" + id + "/cancel", kUserA);
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["state"], "CANCELLED");
  EXPECT_EQ(call(c, "DELETE", "/v1/jobs/" + id, kUserA).status, 200);
  EXPECT_EQ(call(c, "GET", "/v1/jobs/" + id, kUserA).status, 404);
  // Deleted from the store too.
  for (const auto& j : c.store->load_all()) EXPECT_NE(j.id(), id);
}

TEST(ControllerApi, LogsOfARankAndFollowUntilTheJobEnds) {
  Controller c;
  const std::string id = submit(c);
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kSucceeded; }));
  Reply r1 = call(c, "GET", "/v1/jobs/" + id + "/logs?rank=1", kUserA);
  ASSERT_EQ(r1.status, 200);
  EXPECT_NE(r1.text.find("hello from rank 1 of 2"), std::string::npos) << r1.text;
  Reply off = call(c, "GET", "/v1/jobs/" + id + "/logs?rank=1&offset=5", kUserA);
  EXPECT_EQ(off.text, r1.text.substr(5));
  Reply f = call(c, "GET", "/v1/jobs/" + id + "/logs?rank=0&follow=true", kUserA);
  EXPECT_EQ(f.status, 200);
  EXPECT_NE(f.text.find("hello from rank 0 of 2"), std::string::npos) << f.text;
}

TEST(ControllerApi, RegionsShowIntensityForecastCapacityAndPue) {
  Controller c;
  c.sched->cycle();
  Reply r = call(c, "GET", "/v1/regions", kUserA);
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(r.body["items"].size(), 2u);
  auto de = r.body["items"][0];
  EXPECT_EQ(de["name"], "DE");
  EXPECT_DOUBLE_EQ(de["intensity_gco2_per_kwh"].get<double>(), 300);
  EXPECT_DOUBLE_EQ(de["pue"].get<double>(), 1.2);
  EXPECT_EQ(de["capacity_nodes"], 2);
  EXPECT_GE(de["forecast"].size(), 24u);
}

TEST(ControllerApi, HealthReadyAndMetrics) {
  Controller c;
  EXPECT_EQ(call(c, "GET", "/healthz", "").status, 200);
  expect_error(call(c, "GET", "/readyz", ""), 503, "not_ready", "");
  c.sched->cycle();
  EXPECT_EQ(call(c, "GET", "/readyz", "").status, 200);
  Reply m = call(c, "GET", "/metrics", "");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.text.find("greenshard_scheduler_cycle_duration_seconds_bucket"), std::string::npos);
}

TEST(ControllerMetrics, PromtoolFindsNoProblems) {
  Controller c;
  const std::string id = submit(c);
  ASSERT_TRUE(c.cycle_until([&] { return c.state(id) == JobState::kSucceeded; }));
  Reply m = call(c, "GET", "/metrics", "");
  for (const char* name :
       {"greenshard_jobs{state=\"SUCCEEDED\"} 1", "greenshard_job_queue_wait_seconds_count 1",
        "greenshard_scheduler_decisions_total{", "greenshard_carbon_avoided_grams_total",
        "greenshard_region_intensity_gco2_per_kwh{region=\"FR\"} 50", "greenshard_api_requests_total{"})
    EXPECT_NE(m.text.find(name), std::string::npos) << name << "\n" << m.text;
  write_file(c.dir.file("metrics.txt"), m.text);
  auto r = gstest::run_process({"/bin/sh", "-c", "promtool check metrics < " + c.dir.file("metrics.txt")}, {},
                               std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(ControllerOpenApi, TheDocumentListsExactlyTheServedRoutes) {
  Controller c;
  const std::string id = submit(c);
  Reply r = call(c, "GET", "/v1/openapi.json", "");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["openapi"].get<std::string>().substr(0, 2), "3.");
  std::set<std::string> documented;
  for (auto& [path, ops] : r.body["paths"].items())
    for (auto& [method, op] : ops.items()) {
      documented.insert(method + " " + path);
      EXPECT_TRUE(op.contains("responses")) << path;
      // Every $ref resolves.
      std::string s = op.dump();
      for (size_t p = s.find("#/components/schemas/"); p != std::string::npos; p = s.find("#/components/schemas/", p + 1)) {
        std::string name = s.substr(p + 21, s.find('"', p) - p - 21);
        EXPECT_TRUE(r.body["components"]["schemas"].contains(name)) << name;
      }
    }
  const std::set<std::string> expected = {
      "post /v1/jobs", "get /v1/jobs", "get /v1/jobs/{id}", "delete /v1/jobs/{id}",
      "post /v1/jobs/{id}/cancel", "get /v1/jobs/{id}/logs", "post /v1/jobs/{id}/status",
      "get /v1/regions", "get /v1/regions/{name}/intensity", "get /v1/openapi.json", "get /healthz", "get /readyz",
      "get /metrics", "get /"};
  EXPECT_EQ(documented, expected);
  // Every documented operation is served (whatever its answer, it is not
  // "no such route").
  for (const auto& op : documented) {
    std::string method = op.substr(0, op.find(' ')), path = op.substr(op.find(' ') + 1);
    for (auto& ch : method) ch = char(std::toupper(ch));
    if (auto p = path.find("{id}"); p != std::string::npos) path.replace(p, 4, id);
    Reply x = call(c, method, path, kAdmin, "{}");
    EXPECT_NE(x.status, 0) << op;
    if (x.body.is_object() && x.body.contains("error")) {
      EXPECT_NE(x.body["error"]["code"], "route_not_found") << op;
    }
  }
  // And a route that is not documented is not served: another method on a
  // documented path is 405, an undocumented path 404.
  expect_error(call(c, "PUT", "/v1/jobs", kAdmin, "{}"), 405, "method_not_allowed", "");
  expect_error(call(c, "PUT", "/v1/jobz", kAdmin, "{}"), 404, "route_not_found", "");
}

TEST(ControllerApi, ServesHttpsWhenGivenACertificate) {
  gstest::TempDir d;
  auto gen = gstest::run_process(
      {"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", d.file("key.pem"), "-out",
       d.file("cert.pem"), "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"},
      {}, std::chrono::seconds(60));
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  Controller c;  // only for its registry/scheduler
  ApiOptions o;
  o.tls_cert = d.file("cert.pem");
  o.tls_key = d.file("key.pem");
  ApiServer tls(*c.registry, *c.sched, c.auth, c.metrics, o);
  int port = tls.bind("127.0.0.1", 0);
  std::thread t([&] { tls.serve(); });
  httplib::SSLClient cli("127.0.0.1", port);
  cli.set_ca_cert_path(d.file("cert.pem").c_str());
  cli.enable_server_certificate_verification(true);
  cli.set_bearer_token_auth(kUserA);
  auto r = cli.Get("/v1/jobs");
  tls.stop();
  t.join();
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  // A bad key pair is refused at start, not at the first request.
  ApiOptions bad = o;
  bad.tls_key = d.file("cert.pem");
  EXPECT_THROW(ApiServer(*c.registry, *c.sched, c.auth, c.metrics, bad), std::runtime_error);
}

TEST(ControllerApi, GetJobShowsItsDecisionHistoryBoundedAndAsDocumented) {
  Controller c;  // its registry, scheduler and store; a second server reads the decision log
  auto serve = [&](size_t max_decisions, auto body) {
    ApiOptions o;
    o.store = c.store.get();
    o.max_decisions = max_decisions;
    ApiServer api(*c.registry, *c.sched, c.auth, c.metrics, o);
    const int port = api.bind("127.0.0.1", 0);
    std::thread t([&] { api.serve(); });
    httplib::Client cli("127.0.0.1", port);
    cli.set_bearer_token_auth(kUserA);
    body(cli);
    api.stop();
    t.join();
  };
  // DE has two nodes: the second two-node job waits for the first.
  json s = spec("first");
  s["nodes"] = 2;
  s["regions"] = {"DE"};
  const std::string a = submit(c, kUserA, s);
  s["name"] = "second";
  const std::string b = submit(c, kUserA, s);
  c.sched->cycle();
  ASSERT_EQ(c.state(b), JobState::kPending);
  ASSERT_TRUE(c.cycle_until([&] { return c.state(b) == JobState::kSucceeded; }));
  const json openapi = openapi_document();
  const json& job_schema = openapi["components"]["schemas"]["Job"];
  const json& decision_schema = openapi["components"]["schemas"]["Decision"];
  serve(50, [&](httplib::Client& cli) {
    auto r = cli.Get("/v1/jobs/" + b);
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : httplib::to_string(r.error()));
    json j = json::parse(r->body);
    // Every field is documented.
    for (auto& [k, v] : j.items()) EXPECT_TRUE(job_schema["properties"].contains(k)) << k;
    ASSERT_TRUE(j["decisions"].is_array()) << j.dump(1);
    std::vector<std::string> outcomes;
    for (const auto& d : j["decisions"]) {
      for (const auto& f : decision_schema["required"]) EXPECT_TRUE(d.contains(f.get<std::string>())) << f << d;
      for (auto& [k, v] : d.items()) EXPECT_TRUE(decision_schema["properties"].contains(k)) << k;
      EXPECT_FALSE(d["explanation"].get<std::string>().empty()) << d;
      EXPECT_TRUE(parse_rfc3339(d["time"].get<std::string>())) << d;
      outcomes.push_back(d["outcome"]);
    }
    // Deferred while the first job held DE (recorded once), then admitted there.
    EXPECT_EQ(outcomes, (std::vector<std::string>{"deferred", "admitted"})) << j["decisions"].dump(1);
    EXPECT_EQ(j["decisions"][1]["region"], "DE");
    EXPECT_LT(j["decisions"][0]["cycle"].get<int64_t>(), j["decisions"][1]["cycle"].get<int64_t>());
    // The stored log is what is shown.
    auto log = c.store->decisions(b);
    ASSERT_EQ(log.size(), 2u);
    EXPECT_EQ(j["decisions"][0]["explanation"], log[0].explanation);
    EXPECT_EQ(j["decisions"][1]["policy"], log[1].policy);
    // The first job was admitted at once.
    json ja = json::parse(cli.Get("/v1/jobs/" + a)->body);
    ASSERT_EQ(ja["decisions"].size(), 1u) << ja.dump(1);
    EXPECT_EQ(ja["decisions"][0]["outcome"], "admitted");
    // Another tenant's job stays invisible, decisions and all.
    cli.set_bearer_token_auth(kUserB);
    EXPECT_EQ(cli.Get("/v1/jobs/" + b)->status, 404);
  });
  // Bounded: only the newest decisions are shown.
  serve(1, [&](httplib::Client& cli) {
    json j = json::parse(cli.Get("/v1/jobs/" + b)->body);
    ASSERT_EQ(j["decisions"].size(), 1u) << j.dump(1);
    EXPECT_EQ(j["decisions"][0]["outcome"], "admitted");
  });
}

TEST(ControllerApi, ManyClientsConnectingAtOnceAreAllServed) {
  // 64 clients open their connections at the same moment (Debian's
  // cpp-httplib listens with a backlog of 5; the controller raises it):
  // every first request gets its answer, none sees the connection dropped.
  Controller c;
  constexpr int kClients = 64;
  std::atomic<int> ready{0}, ok{0};
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> ts;
  for (int i = 0; i < kClients; ++i)
    ts.emplace_back([&] {
      httplib::Client cli("127.0.0.1", c.port);  // cpp-httplib's default timeouts
      cli.set_keep_alive(true);
      ++ready;
      while (ready.load() < kClients) std::this_thread::yield();
      for (int k = 0; k < 2; ++k) {
        auto r = cli.Get("/healthz");
        if (r && r->status == 200) {
          ++ok;
        } else {
          std::lock_guard<std::mutex> l(mu);
          errors.push_back(r ? "HTTP " + std::to_string(r->status) : httplib::to_string(r.error()));
        }
      }
    });
  for (auto& t : ts) t.join();
  // The kernel's view of the listening socket (ss, iproute2): for a LISTEN
  // socket Send-Q is its backlog.
  auto ss = gstest::run_process({"/bin/ss", "-Hltn", "sport = :" + std::to_string(c.port)}, {},
                                std::chrono::seconds(30));
  ASSERT_EQ(ss.exit_code, 0) << ss.output;
  std::istringstream line(ss.output);
  std::string state, recv_q;
  long backlog = -1;
  line >> state >> recv_q >> backlog;
  EXPECT_EQ(state, "LISTEN") << ss.output;
  EXPECT_GE(backlog, kClients) << ss.output;
  EXPECT_EQ(ok.load(), 2 * kClients) << errors.size() << " failed; first error: " << (errors.empty() ? "" : errors.front());
}

// --- dry run (POST /v1/jobs?dryRun=true) -------------------------------------

namespace {

Reply dry_run(const Controller& c, const std::string& token, const std::string& body,
              const httplib::Headers& extra = {}, const std::string& content_type = "application/json") {
  return call(c, "POST", "/v1/jobs?dryRun=true", token, body, extra, content_type);
}

// Nothing of the tenant's is in memory, in the list or in the SQLite file.
void expect_no_jobs(const Controller& c, int64_t before = 0) {
  EXPECT_EQ(c.registry->size(), before);
  EXPECT_EQ(int64_t(c.store->load_all().size()), before);
  Reply l = call(c, "GET", "/v1/jobs?limit=1000", kAdmin);
  ASSERT_EQ(l.status, 200) << l.text;
  EXPECT_EQ(int64_t(l.body["items"].size()), before) << l.text;
}

}  // namespace

TEST(ControllerDryRun, AValidSpecIs200WithTheJobAsItWouldBeCreatedAndNothingIsStored) {
  Controller c;
  auto cli = c.client(kUserA);
  auto r = cli.Post("/v1/jobs?dryRun=true", spec().dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_FALSE(r->has_header("Location"));
  json j = json::parse(r->body);
  EXPECT_EQ(j["dryRun"], true);
  EXPECT_EQ(j["id"], "");
  EXPECT_EQ(j["tenant"], "team-a");
  EXPECT_EQ(j["state"], "PENDING");
  EXPECT_EQ(j["spec"]["name"], "demo");
  EXPECT_EQ(j["spec"]["regions"], json({"DE", "FR"}));
  EXPECT_TRUE(j["placement"].is_null());
  // The same document a submit answers with, but for the id, the dry-run
  // flag and the condition's message.
  Reply real = call(c, "POST", "/v1/jobs", kUserB, spec().dump());
  ASSERT_EQ(real.status, 201) << real.text;
  std::set<std::string> keys_dry, keys_real;
  for (auto& [k, v] : j.items()) keys_dry.insert(k);
  for (auto& [k, v] : real.body.items()) keys_real.insert(k);
  keys_real.insert("dryRun");
  EXPECT_EQ(keys_dry, keys_real);
  EXPECT_EQ(j["spec"], real.body["spec"]);
  // dryRun=false is an ordinary submit.
  ASSERT_EQ(call(c, "POST", "/v1/jobs?dryRun=false", kUserB, spec("second").dump()).status, 201);
  expect_no_jobs(c, 2);
  // More dry runs (user and admin), then a scheduler cycle: still only the
  // two real jobs, nothing placed but them, no dry run counted as submitted.
  for (int i = 0; i < 5; ++i) ASSERT_EQ(dry_run(c, kUserA, spec("d" + std::to_string(i)).dump()).status, 200);
  ASSERT_EQ(dry_run(c, kAdmin, spec().dump()).status, 200);
  c.sched->cycle();
  expect_no_jobs(c, 2);
  EXPECT_EQ(call(c, "GET", "/v1/jobs", kUserA).body["items"].size(), 0u);
  EXPECT_EQ(c.store->decisions(real.body["id"]).size(), 1u);
  Reply m = call(c, "GET", "/metrics", "");
  EXPECT_NE(m.text.find("greenshard_job_submissions_total 2"), std::string::npos) << m.text;
}

TEST(ControllerDryRun, AnInvalidSpecGetsTheSameErrorAsASubmit) {
  struct Bad {
    const char* what;
    std::string body;
    httplib::Headers headers;
    std::string content_type = "application/json";
  };
  auto with = [](std::function<void(json&)> f) {
    json s = spec();
    f(s);
    return s.dump();
  };
  const std::vector<Bad> cases = {
      {"not JSON", "{nope", {}},
      {"an unknown field", with([](json& s) { s["gpus"] = 1; }), {}},
      {"a name that is not a DNS label", with([](json& s) { s["name"] = "Not_A_Label"; }), {}},
      {"zero nodes", with([](json& s) { s["nodes"] = 0; }), {}},
      {"a word where a number belongs", with([](json& s) { s["priority"] = "high"; }), {}},
      {"no regions", with([](json& s) { s.erase("regions"); }), {}},
      {"an unknown worker field", with([](json& s) { s["worker"]["schedule"]["stepz"] = 5; }), {}},
      {"an unknown region", with([](json& s) { s["regions"] = {"DE", "XX"}; }), {}},
      {"more nodes than any region has", with([](json& s) { s["nodes"] = 3; }), {}},
      {"more GPUs than any region has", with([](json& s) { s["gpus_per_node"] = 2; }), {}},
      {"a bad Idempotency-Key", spec().dump(), {{"Idempotency-Key", std::string(129, 'k')}}},
      {"a form body", "a=b", {}, "application/x-www-form-urlencoded"},
      {"a body over the limit", with([](json& s) { s["worker"]["pad"] = std::string(300 * 1024, 'x'); }), {}},
  };
  Controller c;
  for (const auto& b : cases) {
    SCOPED_TRACE(b.what);
    Reply normal = call(c, "POST", "/v1/jobs", kUserA, b.body, b.headers, b.content_type);
    Reply dry = dry_run(c, kUserA, b.body, b.headers, b.content_type);
    EXPECT_GE(normal.status, 400) << normal.text;
    EXPECT_LT(normal.status, 500) << normal.text;
    EXPECT_EQ(dry.status, normal.status) << dry.text;
    ASSERT_TRUE(dry.body.is_object() && dry.body.contains("error")) << dry.text;
    EXPECT_EQ(dry.body["error"]["code"], normal.body["error"]["code"]);
    EXPECT_EQ(dry.body["error"]["field"], normal.body["error"]["field"]);
    EXPECT_EQ(dry.body["error"]["message"], normal.body["error"]["message"]);
  }
  // A few pinned, so that "the same" is not "the same nothing".
  expect_error(dry_run(c, kUserA, with([](json& s) { s["gpus"] = 1; })), 400, "unknown_field", "gpus");
  expect_error(dry_run(c, kUserA, with([](json& s) { s["regions"] = {"DE", "XX"}; })), 422, "unknown_region",
               "regions[1]");
  expect_error(dry_run(c, kUserA, with([](json& s) { s["worker"]["schedule"]["stepz"] = 5; })), 400,
               "unknown_field", "worker.schedule.stepz");
  expect_no_jobs(c);
}

TEST(ControllerDryRun, IsAuthorizedLikeASubmit) {
  Controller c;
  const std::string id = submit(c);
  const std::string body = spec().dump();
  expect_error(dry_run(c, "", body), 401, "unauthenticated", "Authorization");
  expect_error(dry_run(c, "not-a-known-token-at-all", body), 401, "unauthenticated", "Authorization");
  // A job's own status token is no user credential; a worker token may only push status.
  EXPECT_EQ(dry_run(c, c.registry->get(id)->worker_token, body).status, 401);
  expect_error(dry_run(c, kWorker, body), 403, "forbidden", "Authorization");
  // Authentication comes first: a bad dryRun value without a token is 401.
  EXPECT_EQ(call(c, "POST", "/v1/jobs?dryRun=maybe", "", body).status, 401);
  expect_no_jobs(c, 1);
}

TEST(ControllerDryRun, AValueOtherThanTrueOrFalseIs400NamingDryRun) {
  Controller c;
  for (const char* q : {"dryRun=1", "dryRun=0", "dryRun=", "dryRun", "dryRun=yes", "dryRun=TRUE", "dryRun=All",
                        "dryRun=true&dryRun=false"}) {
    SCOPED_TRACE(q);
    expect_error(call(c, "POST", std::string("/v1/jobs?") + q, kUserA, spec().dump()), 400, "invalid_parameter",
                 "dryRun");
  }
  // (cpp-httplib folds a repeated identical pair, so dryRun=true&dryRun=true
  // is one dryRun=true; two different values are refused above.)
  // Other parameters stay unknown, with or without dryRun.
  expect_error(call(c, "POST", "/v1/jobs?dryRun=true&colour=red", kUserA, spec().dump()), 400, "unknown_parameter",
               "colour");
  expect_error(call(c, "POST", "/v1/jobs?dry_run=true", kUserA, spec().dump()), 400, "unknown_parameter", "dry_run");
  expect_no_jobs(c);
}

TEST(ControllerDryRun, UsesNeitherTheIdempotencyKeyNorTheQuota) {
  Options o;
  o.max_live = 3;
  Controller c(o);
  // The key: a dry run with it does not record it ...
  httplib::Headers k{{"Idempotency-Key", "key-1"}};
  Reply d1 = dry_run(c, kUserA, spec("first").dump(), k);
  ASSERT_EQ(d1.status, 200) << d1.text;
  Reply s1 = call(c, "POST", "/v1/jobs", kUserA, spec("second").dump(), k);
  ASSERT_EQ(s1.status, 201) << s1.text;  // not 409: the dry run's body was not bound to the key
  // ... nor replays the job the key names.
  Reply d2 = dry_run(c, kUserA, spec("second").dump(), k);
  ASSERT_EQ(d2.status, 200) << d2.text;
  EXPECT_EQ(d2.body["id"], "");
  EXPECT_EQ(d2.body["dryRun"], true);
  Reply s2 = call(c, "POST", "/v1/jobs", kUserA, spec("second").dump(), k);
  EXPECT_EQ(s2.status, 200);  // the real replay
  EXPECT_EQ(s2.body["id"], s1.body["id"]);
  EXPECT_FALSE(s2.body.contains("dryRun"));
  // The quota (3 unfinished jobs; one used above): many dry runs take no slot.
  for (int i = 0; i < 10; ++i) ASSERT_EQ(dry_run(c, kUserA, spec().dump()).status, 200);
  EXPECT_EQ(call(c, "POST", "/v1/jobs", kUserA, spec().dump()).status, 201);
  EXPECT_EQ(call(c, "POST", "/v1/jobs", kUserA, spec().dump()).status, 201);
  expect_error(call(c, "POST", "/v1/jobs", kUserA, spec().dump()), 429, "quota_exceeded", "");
  expect_no_jobs(c, 3);
}

// --- issue 33: hostile input -------------------------------------------------

namespace {

// A reply to hostile input: a 4xx with the JSON error body, never a 500 or a
// dropped connection.
void expect_client_error(const Reply& r, int status, const std::string& field, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(r.status, status) << r.text;
  ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.text;
  EXPECT_EQ(r.body["error"]["field"], field) << r.text;
  EXPECT_TRUE(r.body["error"]["message"].is_string()) << r.text;
}

Reply patch(const Controller& c, const std::string& path, const std::string& token, const std::string& body) {
  auto cli = c.client(token);
  httplib::Result r = cli.Patch(path, body, "application/json");
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.text = r->body;
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

std::string allow_header(const Controller& c, const std::string& method, const std::string& path) {
  auto cli = c.client(kUserA);
  httplib::Result r = method == "PUT"       ? cli.Put(path, "{}", "application/json")
                      : method == "PATCH"   ? cli.Patch(path, "{}", "application/json")
                      : method == "OPTIONS" ? cli.Options(path)
                      : method == "DELETE"  ? cli.Delete(path)
                      : method == "POST"    ? cli.Post(path, "{}", "application/json")
                                            : cli.Get(path);
  if (!r) return "(no reply)";
  json b = json::parse(r->body, nullptr, false);
  if (r->status != 405 || !b.is_object() || b["error"]["code"] != "method_not_allowed") return "(" + r->body + ")";
  return r->get_header_value("Allow");
}

std::string nested_arrays(int levels) { return std::string(size_t(levels), '[') + std::string(size_t(levels), ']'); }

}  // namespace

TEST(ControllerHostileInput, InvalidUtf8AnywhereIsA4xxWithAJsonBodyAndTheServerLivesOn) {
  Controller c;
  const std::string id = submit(c);
  const std::string bad_ct = "application/\xff\xfejson";
  expect_client_error(call(c, "GET", "/v1/jobs/%ff", kUserA), 404, "", "a job id");
  expect_client_error(call(c, "GET", "/v1/%ff", kUserA), 404, "", "a route");
  expect_client_error(call(c, "GET", "/v1/%ff", ""), 404, "", "a route without a token");
  expect_client_error(call(c, "GET", "/v1/jobs?%ff=1", kUserA), 400, "\xef\xbf\xbd", "a query key");
  expect_client_error(call(c, "GET", "/v1/jobs?state=%ff%c0", kUserA), 400, "state", "a query value");
  expect_client_error(call(c, "GET", "/v1/jobs?limit=%ff", kUserA), 400, "limit", "an integer value");
  expect_client_error(call(c, "POST", "/v1/jobs?dryRun=%ff", kUserA, spec().dump()), 400, "dryRun", "dryRun");
  expect_client_error(call(c, "GET", "/v1/jobs/" + id + "/logs?rank=%ff", kUserA), 400, "rank", "rank");
  expect_client_error(call(c, "GET", "/v1/jobs/" + id + "/logs?follow=%ff", kUserA), 400, "follow", "follow");
  expect_client_error(call(c, "GET", "/v1/regions/%ff/intensity", kUserA), 404, "name", "a region name");
  expect_client_error(call(c, "POST", "/v1/jobs", kUserA, spec().dump(), {}, bad_ct), 415, "Content-Type",
                      "a Content-Type");
  expect_client_error(call(c, "GET", "/v1/jobs?continue=%ff", kUserA), 400, "continue", "a continue token");
  // A spec whose strings hold a \u escape of a lone surrogate or invalid bytes.
  expect_client_error(call(c, "POST", "/v1/jobs", kUserA, "{\"name\":\"\xff\"}"), 400, "", "a body");
  EXPECT_EQ(call(c, "GET", "/healthz", "").status, 200);
  EXPECT_EQ(call(c, "GET", "/v1/jobs/" + id, kUserA).status, 200);
}

TEST(ControllerHostileInput, NestingDeeperThan64LevelsIs400NamingTheFieldNeverACrash) {
  Controller c;
  // `worker.model` holding n arrays: the document is n + 2 levels deep.
  for (int arrays : {70000, 50000, 30000, 63}) {
    const std::string body =
        R"({"name":"x","regions":["DE"],"worker":{"model":)" + nested_arrays(arrays) + "}}";
    Reply r = call(c, "POST", "/v1/jobs?dryRun=true", kUserA, body);
    expect_client_error(r, 400, "worker.model", std::to_string(arrays) + " arrays");
    EXPECT_EQ(r.body["error"]["code"], "too_deep");
    EXPECT_EQ(r.body["error"]["message"], "worker.model: nested deeper than 64 levels");
  }
  // 64 levels: read, then refused as the type error it is.
  Reply ok = call(c, "POST", "/v1/jobs?dryRun=true", kUserA,
                  R"({"name":"x","regions":["DE"],"worker":{"model":)" + nested_arrays(62) + "}}");
  expect_error(ok, 400, "invalid_field", "worker.model");
  EXPECT_EQ(ok.body["error"]["message"], "worker.model: expected an object, got an array");
  // The top level, and the status push (the other reader of outside JSON).
  expect_client_error(call(c, "POST", "/v1/jobs", kUserA, nested_arrays(70000)), 400, "", "the top level");
  const std::string id = submit(c);
  Reply st = call(c, "POST", "/v1/jobs/" + id + "/status", c.registry->get(id)->worker_token,
                  R"({"state":"running","message":)" + nested_arrays(70000) + "}");
  expect_client_error(st, 400, "message", "a status push");
  EXPECT_EQ(st.body["error"]["code"], "too_deep");
  // YAML bodies have the same limit, and never say "yaml-cpp".
  for (int arrays : {63, 5000, 70000}) {
    Reply y = call(c, "POST", "/v1/jobs?dryRun=true", kUserA,
                   "name: x\nregions: [DE]\nworker:\n  model: " + nested_arrays(arrays) + "\n", {}, "application/yaml");
    expect_client_error(y, 400, arrays == 63 ? "worker.model" : "", "YAML " + std::to_string(arrays));
    EXPECT_EQ(y.body["error"]["code"], "too_deep");
    EXPECT_EQ(y.text.find("yaml-cpp"), std::string::npos);
  }
  EXPECT_EQ(call(c, "GET", "/healthz", "").status, 200);
}

TEST(ControllerAuthMatrix, StatusPushTakesOnlyTheJobsOwnWorkerToken) {
  Controller c;
  // A tokens-file worker of another tenant, next to the fixture's team-a one.
  c.auth.replace(Auth::from_text(tokens_text() + "worker-token-team-b-001,team-b,worker\n"));
  const std::string a = submit(c), b = submit(c, kUserB);
  const std::string push = R"({"state":"running","step":1})";
  struct Row {
    const char* who;
    std::string token;
    int status;
  };
  const Row rows[] = {
      {"no token", "", 401},
      {"an unknown token", "not-a-known-token-at-all", 401},
      {"a user of the job's tenant", kUserA, 403},
      {"a user of another tenant", kUserB, 403},
      {"an admin", kAdmin, 403},
      {"a tokens-file worker of the job's tenant", kWorker, 403},
      {"a tokens-file worker of another tenant", "worker-token-team-b-001", 403},
      {"another job's worker token", c.registry->get(b)->worker_token, 401},
      {"the job's own worker token", c.registry->get(a)->worker_token, 200},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.who);
    Reply got = call(c, "POST", "/v1/jobs/" + a + "/status", r.token, push);
    EXPECT_EQ(got.status, r.status) << got.text;
    if (r.status != 200) {
      ASSERT_TRUE(got.body.is_object()) << got.text;
      EXPECT_EQ(got.body["error"]["field"], "Authorization");
    }
  }
  EXPECT_EQ(c.registry->get(a)->progress.step, 1);
  EXPECT_EQ(c.registry->get(b)->progress.step, 0) << "nothing reached the other job";
}

TEST(ControllerHostileInput, OnlyJsonAndYamlMediaTypesAreAccepted) {
  Controller c;
  struct Row {
    std::string content_type;
    int status;
  };
  const std::string yaml = "name: from-yaml\nregions: [DE, FR]\nprocs_per_node: 2\nworker:\n  data: {train: t.bin}\n";
  const Row json_rows[] = {{"application/json", 200},
                           {"application/json; charset=utf-8", 200},
                           {"Application/JSON;charset=UTF-8", 200},
                           {"application/jsonx", 415},
                           {"application/json-patch+json", 415},
                           {"multipart/form-data; boundary=x", 415},
                           {"text/plain", 415},
                           {"application/x-www-form-urlencoded", 415}};
  for (const auto& r : json_rows) {
    SCOPED_TRACE(r.content_type);
    // (a multipart body that is not multipart is the HTTP layer's 400: send a real one)
    const std::string body = r.content_type.rfind("multipart/", 0) == 0
                                 ? "--x\r\nContent-Disposition: form-data; name=\"spec\"\r\n\r\n" + spec().dump() +
                                       "\r\n--x--\r\n"
                                 : spec().dump();
    Reply got = call(c, "POST", "/v1/jobs?dryRun=true", kUserA, body, {}, r.content_type);
    if (r.status == 200) EXPECT_EQ(got.status, 200) << got.text;
    else expect_error(got, 415, "unsupported_media_type", "Content-Type");
  }
  for (const std::string ct : {"application/yaml", "application/x-yaml", "text/yaml; charset=utf-8"}) {
    SCOPED_TRACE(ct);
    Reply got = call(c, "POST", "/v1/jobs?dryRun=true", kUserA, yaml, {}, ct);
    EXPECT_EQ(got.status, 200) << got.text;
  }
  // A YAML submit is stored like its JSON twin, and validated the same way.
  Reply made = call(c, "POST", "/v1/jobs", kUserA, yaml, {}, "application/yaml");
  ASSERT_EQ(made.status, 201) << made.text;
  EXPECT_EQ(made.body["spec"]["name"], "from-yaml");
  EXPECT_EQ(made.body["spec"]["regions"], json({"DE", "FR"}));
  EXPECT_EQ(made.body["spec"]["worker"]["data"]["train"], "t.bin");
  expect_error(call(c, "POST", "/v1/jobs", kUserA, yaml + "nodez: 2\n", {}, "application/yaml"), 400,
               "unknown_field", "nodez");
  expect_error(call(c, "POST", "/v1/jobs", kUserA, "name: [unclosed\n", {}, "application/yaml"), 400,
               "invalid_yaml", "");
  // The status push is JSON only.
  const std::string id = made.body["id"];
  expect_error(call(c, "POST", "/v1/jobs/" + id + "/status", c.registry->get(id)->worker_token, "state: running\n", {},
                    "application/yaml"),
               415, "unsupported_media_type", "Content-Type");
}

TEST(ControllerHostileInput, AKnownPathWithAnotherMethodIs405WithAllow) {
  Controller c;
  const std::string id = submit(c);
  EXPECT_EQ(allow_header(c, "PUT", "/v1/jobs"), "GET, HEAD, POST");
  EXPECT_EQ(allow_header(c, "DELETE", "/v1/jobs"), "GET, HEAD, POST");
  EXPECT_EQ(allow_header(c, "PATCH", "/v1/jobs/" + id), "GET, HEAD, DELETE");
  EXPECT_EQ(allow_header(c, "POST", "/v1/jobs/" + id), "GET, HEAD, DELETE");
  EXPECT_EQ(allow_header(c, "OPTIONS", "/v1/regions"), "GET, HEAD");
  EXPECT_EQ(allow_header(c, "GET", "/v1/jobs/" + id + "/status"), "POST");
  EXPECT_EQ(allow_header(c, "GET", "/v1/jobs/" + id + "/cancel"), "POST");
  EXPECT_EQ(allow_header(c, "POST", "/v1/jobs/" + id + "/logs"), "GET, HEAD");
  EXPECT_EQ(allow_header(c, "POST", "/healthz"), "GET, HEAD");
  EXPECT_EQ(allow_header(c, "PUT", "/v1/regions/DE/intensity"), "GET, HEAD");
  // Unknown paths stay 404, whatever the method.
  expect_error(call(c, "PUT", "/v1/nothing", kUserA, "{}"), 404, "route_not_found", "");
  expect_error(patch(c, "/v1/jobs/%ff", kUserA, "{}"), 404, "route_not_found", "");
  EXPECT_EQ(c.state(id), JobState::kPending);
}

TEST(ControllerHostileInput, AForgedContinueTokenIs400WithoutExceptionText) {
  Controller c;
  submit(c);
  const std::string forged[] = {
      R"({"v":"x","s":1,"f":"a"})",
      R"({"v":1,"s":"1","f":"a"})",
      R"({"v":1,"s":1,"f":1})",
      R"({"v":1,"s":1.5,"f":"0123456789abcdef"})",
      R"({"v":1,"s":18446744073709551615,"f":"0123456789abcdef"})",
      R"({"v":1,"s":-1,"f":"0123456789abcdef"})",
      R"({"v":null,"s":1,"f":"a"})",
      R"([1,2,3])",
      R"("v")",
      nested_arrays(1000),  // deeper than the reader's limit, inside the URI's
      "{\"v\":1,\"s\":1,\"f\":\"\xff\"}",
  };
  for (const auto& text : forged) {
    SCOPED_TRACE(text.substr(0, 60));
    Reply r = call(c, "GET", "/v1/jobs?continue=" + base64_encode(text, Base64::kUrl), kUserA);
    expect_error(r, 400, "invalid_parameter", "continue");
    EXPECT_EQ(r.body["error"]["message"], "continue: not a token issued by this server");
  }
}
