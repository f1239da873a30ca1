// Kubernetes manifests and executor.
//
// No real API server can run here, so the executor is tested against an
// in-test HTTP server that plays the Kubernetes API server (the only fake in
// the controller tests). The request bodies are checked offline against a
// minimal structural schema embedded below, transcribed from the Kubernetes
// 1.28 OpenAPI definitions for exactly the fields we send (batch/v1 Job,
// v1 Service, v1 ConfigMap): unknown fields, wrong types and invalid names
// fail. (The npm package kubernetes-models is not available offline from
// Debian, so the checks are embedded rather than generated.)
#include <gtest/gtest.h>
#include <httplib.h>

#include <mutex>
#include <regex>

#include "common/spawn.h"
#include "controller/executor_k8s.h"

using namespace controller;
using json = nlohmann::json;

namespace {

// --- a minimal structural schema ------------------------------------------

json obj(json props, json required = json::array()) {
  return {{"type", "object"}, {"properties", props}, {"required", required}};
}
json map_of(json v) { return {{"type", "map"}, {"values", v}}; }
json arr(json items) { return {{"type", "array"}, {"items", items}}; }
const json S = {{"type", "string"}};
const json I = {{"type", "integer"}};
const json B = {{"type", "boolean"}};
const json LABEL_KEY = {{"type", "string"}, {"format", "label-key"}};
const json DNS = {{"type", "string"}, {"format", "dns-label"}};

json object_meta() {
  return obj({{"name", DNS},
              {"namespace", DNS},
              {"labels", {{"type", "labels"}}},
              {"annotations", map_of(S)},
              {"ownerReferences", arr(obj({{"apiVersion", S}, {"kind", S}, {"name", DNS}, {"uid", S},
                                          {"controller", B}, {"blockOwnerDeletion", B}},
                                         {"apiVersion", "kind", "name", "uid"}))}},
             {"name"});
}

json env_var() {
  json field_ref = obj({{"fieldPath", S}, {"apiVersion", S}}, {"fieldPath"});
  return obj({{"name", {{"type", "string"}, {"format", "c-identifier"}}},
              {"value", S},
              {"valueFrom", obj({{"fieldRef", field_ref}})}},
             {"name"});
}

json container() {
  return obj({{"name", DNS},
              {"image", S},
              {"command", arr(S)},
              {"args", arr(S)},
              {"env", arr(env_var())},
              {"ports", arr(obj({{"name", S}, {"containerPort", {{"type", "port"}}}, {"protocol", {{"type", "enum"}, {"values", {"TCP", "UDP", "SCTP"}}}}},
                                {"containerPort"}))},
              {"resources", obj({{"requests", map_of({{"type", "quantity"}})},
                                 {"limits", map_of({{"type", "quantity"}})}})},
              {"volumeMounts", arr(obj({{"name", S}, {"mountPath", S}, {"readOnly", B}}, {"name", "mountPath"}))}},
             {"name", "image"});
}

json job_schema() {
  json volume = obj({{"name", DNS},
                     {"configMap", obj({{"name", DNS}})},
                     {"emptyDir", obj(json::object())},
                     {"persistentVolumeClaim", obj({{"claimName", DNS}, {"readOnly", B}}, {"claimName"})}},
                    {"name"});
  json pod_spec = obj({{"subdomain", DNS},
                       {"restartPolicy", {{"type", "enum"}, {"values", {"Never", "OnFailure"}}}},
                       {"terminationGracePeriodSeconds", I},
                       {"containers", arr(container())},
                       {"volumes", arr(volume)}},
                      {"containers"});
  return obj({{"apiVersion", {{"type", "const"}, {"value", "batch/v1"}}},
              {"kind", {{"type", "const"}, {"value", "Job"}}},
              {"metadata", object_meta()},
              {"spec", obj({{"completionMode", {{"type", "enum"}, {"values", {"NonIndexed", "Indexed"}}}},
                            {"completions", I},
                            {"parallelism", I},
                            {"backoffLimit", I},
                            {"suspend", B},
                            {"template", obj({{"metadata", obj({{"labels", {{"type", "labels"}}}})}, {"spec", pod_spec}},
                                             {"spec"})}},
                           {"template"})}},
             {"apiVersion", "kind", "metadata", "spec"});
}

json service_schema() {
  return obj({{"apiVersion", {{"type", "const"}, {"value", "v1"}}},
              {"kind", {{"type", "const"}, {"value", "Service"}}},
              {"metadata", object_meta()},
              {"spec", obj({{"clusterIP", S},
                            {"publishNotReadyAddresses", B},
                            {"selector", {{"type", "labels"}}},
                            {"ports", arr(obj({{"name", S}, {"port", {{"type", "port"}}}, {"targetPort", {{"type", "port"}}},
                                               {"protocol", {{"type", "enum"}, {"values", {"TCP", "UDP", "SCTP"}}}}},
                                              {"port"}))}})}},
             {"apiVersion", "kind", "metadata", "spec"});
}

json configmap_schema() {
  return obj({{"apiVersion", {{"type", "const"}, {"value", "v1"}}},
              {"kind", {{"type", "const"}, {"value", "ConfigMap"}}},
              {"metadata", object_meta()},
              {"data", map_of(S)}},
             {"apiVersion", "kind", "metadata"});
}

bool dns_label(const std::string& s) {
  static const std::regex re("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
  return s.size() <= 63 && std::regex_match(s, re);
}
bool label_value(const std::string& s) {
  static const std::regex re("^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$");
  return s.size() <= 63 && std::regex_match(s, re);
}
bool label_key(const std::string& k) {
  auto slash = k.find('/');
  std::string name = slash == std::string::npos ? k : k.substr(slash + 1);
  static const std::regex sub("^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$");
  if (slash != std::string::npos && (slash > 253 || !std::regex_match(k.substr(0, slash), sub))) return false;
  return !name.empty() && label_value(name);
}

void validate(const json& v, const json& schema, const std::string& path, std::vector<std::string>& errs) {
  const std::string t = schema["type"];
  auto err = [&](const std::string& m) { errs.push_back(path + ": " + m); };
  if (t == "object") {
    if (!v.is_object()) return err("expected an object");
    for (auto& [k, x] : v.items()) {
      if (!schema["properties"].contains(k)) err("unknown field '" + k + "'");
      else validate(x, schema["properties"][k], path + "." + k, errs);
    }
    for (auto& r : schema["required"])
      if (!v.contains(r.get<std::string>())) err("missing required field '" + r.get<std::string>() + "'");
  } else if (t == "map") {
    if (!v.is_object()) return err("expected a map");
    for (auto& [k, x] : v.items()) validate(x, schema["values"], path + "[" + k + "]", errs);
  } else if (t == "labels") {
    if (!v.is_object()) return err("expected labels");
    for (auto& [k, x] : v.items()) {
      if (!label_key(k)) err("invalid label key '" + k + "'");
      if (!x.is_string() || !label_value(x.get<std::string>())) err("invalid label value for '" + k + "'");
    }
  } else if (t == "array") {
    if (!v.is_array()) return err("expected an array");
    for (size_t i = 0; i < v.size(); ++i) validate(v[i], schema["items"], path + "[" + std::to_string(i) + "]", errs);
  } else if (t == "string") {
    if (!v.is_string()) return err("expected a string");
    std::string s = v;
    std::string f = schema.value("format", "");
    if (f == "dns-label" && !dns_label(s)) err("not a DNS-1123 label: '" + s + "'");
    if (f == "c-identifier" && !std::regex_match(s, std::regex("^[A-Za-z_][A-Za-z0-9_]*$"))) err("not a C identifier");
  } else if (t == "integer") {
    if (!v.is_number_integer()) err("expected an integer");
  } else if (t == "port") {
    if (!v.is_number_integer() || v.get<int>() < 1 || v.get<int>() > 65535) err("expected a port number");
  } else if (t == "boolean") {
    if (!v.is_boolean()) err("expected a boolean");
  } else if (t == "quantity") {
    if (!v.is_string() || !std::regex_match(v.get<std::string>(), std::regex("^[0-9]+(\\.[0-9]+)?(m|k|M|G|Ki|Mi|Gi)?$")))
      err("expected a quantity string");
  } else if (t == "enum") {
    bool ok = false;
    for (auto& x : schema["values"]) ok = ok || x == v;
    if (!ok) err("not one of " + schema["values"].dump());
  } else if (t == "const") {
    if (v != schema["value"]) err("expected " + schema["value"].dump());
  }
}

std::vector<std::string> check(const json& v, const json& schema) {
  std::vector<std::string> errs;
  validate(v, schema, v.value("kind", "?"), errs);
  return errs;
}

GangSpec gang(int nodes, int ppn, int gpus, int attempt = 0) {
  GangSpec g;
  g.job_id = "jabc123def456ghi";
  g.spec = parse_job_spec(json{{"name", "demo"}, {"worker", {{"data", {{"train", "t.bin"}}}}},
                               {"regions", {"eu"}}, {"nodes", nodes}, {"procs_per_node", ppn},
                               {"gpus_per_node", gpus}, {"image", "registry.example/greenshard-worker:0.1"}});
  g.region = "eu";
  g.attempt = attempt;
  g.status_url = "https://controller.example/v1/jobs/jabc123def456ghi/status";
  g.status_token = "tok";
  g.intensity = 123.5;
  g.pue = 1.2;
  return g;
}

json env_of(const json& job, const std::string& name) {
  for (auto& e : job["spec"]["template"]["spec"]["containers"][0]["env"])
    if (e["name"] == name) return e;
  return nullptr;
}

struct ManifestCase {
  const char* sentence;
  int nodes, ppn, gpus;
  std::string queue, claim;
};

const ManifestCase kManifests[] = {
    {"one node with one process", 1, 1, 0, "", ""},
    {"four nodes of eight GPUs with eight processes each", 4, 8, 8, "", ""},
    {"a Kueue queue creates the Job suspended", 2, 1, 1, "team-a-queue", ""},
    {"a checkpoint claim is mounted for restarts", 2, 2, 0, "", "greenshard-ckpt"},
};

class ManifestTable : public ::testing::TestWithParam<ManifestCase> {};
TEST_P(ManifestTable, RendersValidObjects) {
  const auto& c = GetParam();
  KubeClusterConfig k;
  k.namespace_ = "greenshard";
  k.queue_name = c.queue;
  k.checkpoint_claim = c.claim;
  KubeObjects o = render_kube_objects(gang(c.nodes, c.ppn, c.gpus, 3), k, std::chrono::seconds(120), "uid-1");
  for (const auto& [obj_, schema] : {std::pair{o.job, job_schema()}, std::pair{o.service, service_schema()},
                                     std::pair{o.config_map, configmap_schema()}}) {
    auto errs = check(obj_, schema);
    EXPECT_TRUE(errs.empty()) << ::testing::PrintToString(errs);
  }
  const json& spec = o.job["spec"];
  EXPECT_EQ(o.name, "gs-jabc123def456ghi-3");
  EXPECT_EQ(spec["completionMode"], "Indexed");
  EXPECT_EQ(spec["completions"], c.nodes);
  EXPECT_EQ(spec["parallelism"], c.nodes);
  EXPECT_EQ(spec["suspend"], !c.queue.empty());
  if (!c.queue.empty()) EXPECT_EQ(o.job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], c.queue);
  const json& pod = spec["template"]["spec"];
  EXPECT_EQ(pod["subdomain"], o.service["metadata"]["name"]);
  EXPECT_EQ(pod["terminationGracePeriodSeconds"], 120);
  EXPECT_EQ(o.service["spec"]["clusterIP"], "None");
  EXPECT_EQ(o.service["spec"]["publishNotReadyAddresses"], true);
  // The Service selects exactly this Job's pods.
  for (auto& [k2, v] : o.service["spec"]["selector"].items()) EXPECT_EQ(spec["template"]["metadata"]["labels"][k2], v);
  for (const json* owned : {&o.service, &o.config_map}) {
    const json& ref = (*owned)["metadata"]["ownerReferences"][0];
    EXPECT_EQ(ref["kind"], "Job");
    EXPECT_EQ(ref["uid"], "uid-1");
    EXPECT_EQ(ref["name"], o.name);
  }
  // Rendezvous: rank 0's pod by its stable DNS name; node rank from the completion index.
  EXPECT_EQ(env_of(o.job, "MASTER_ADDR")["value"], o.name + "-0." + o.name);
  EXPECT_EQ(env_of(o.job, "PET_MASTER_ADDR")["value"], o.name + "-0." + o.name);
  EXPECT_EQ(env_of(o.job, "WORLD_SIZE")["value"], std::to_string(c.nodes * c.ppn));
  EXPECT_EQ(env_of(o.job, "PET_NNODES")["value"], std::to_string(c.nodes));
  EXPECT_EQ(env_of(o.job, "PET_NPROC_PER_NODE")["value"], std::to_string(c.ppn));
  EXPECT_EQ(env_of(o.job, "PET_NODE_RANK")["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['batch.kubernetes.io/job-completion-index']");
  EXPECT_EQ(env_of(o.job, "RANK").is_null(), c.ppn != 1);
  EXPECT_EQ(env_of(o.job, "GREENSHARD_GRID_INTENSITY")["value"], "123.500000");
  EXPECT_EQ(env_of(o.job, "GREENSHARD_STATUS_TOKEN")["value"], "tok");
  const json& ctr = pod["containers"][0];
  if (c.gpus > 0) {
    EXPECT_EQ(ctr["resources"]["limits"]["nvidia.com/gpu"], std::to_string(c.gpus));
    EXPECT_EQ(ctr["resources"]["requests"]["nvidia.com/gpu"], std::to_string(c.gpus));
  } else {
    EXPECT_FALSE(ctr.contains("resources"));
  }
  EXPECT_EQ(o.job["metadata"]["labels"]["app.kubernetes.io/managed-by"], "greenshard-controller");
  EXPECT_EQ(json::parse(o.config_map["data"]["job.json"].get<std::string>())["data"]["train"], "t.bin");
  bool pvc = pod["volumes"][1].contains("persistentVolumeClaim");
  EXPECT_EQ(pvc, !c.claim.empty());
}
INSTANTIATE_TEST_SUITE_P(ControllerKubeManifest, ManifestTable, ::testing::ValuesIn(kManifests),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerKubeManifest, TheSchemaCheckCatchesMistakes) {
  KubeClusterConfig k;
  KubeObjects o = render_kube_objects(gang(1, 1, 0), k, std::chrono::seconds(30), "u");
  json bad = o.job;
  bad["spec"]["completionMode"] = "indexed";
  bad["spec"]["template"]["spec"]["containers"][0]["env"][0]["name"] = "MASTER-ADDR";
  bad["spec"]["paralelism"] = 1;
  bad["metadata"]["labels"]["app.kubernetes.io/name"] = std::string(64, 'a');
  EXPECT_EQ(check(bad, job_schema()).size(), 4u) << ::testing::PrintToString(check(bad, job_schema()));
}

// --- the executor against an in-test API server ---------------------------

class FakeApiServer {
 public:
  explicit FakeApiServer(std::string token) : token_(std::move(token)) {
    auto authed = [this](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") != "Bearer " + token_) {
        res.status = 401;
        res.set_content(R"({"kind":"Status","message":"Unauthorized"})", "application/json");
        return false;
      }
      return true;
    };
    const std::string ns = "(/namespaces/([a-z0-9-]+))";
    svr_.Post("/apis/batch/v1/namespaces/([a-z0-9-]+)/jobs", [=, this](const httplib::Request& req, httplib::Response& res) {
      if (!authed(req, res)) return;
      std::lock_guard<std::mutex> l(mu);
      json j = json::parse(req.body);
      requests.push_back({"POST job", j});
      std::string name = j["metadata"]["name"];
      if (jobs.count(name)) {
        res.status = 409;
        res.set_content(R"({"kind":"Status","reason":"AlreadyExists","message":"exists"})", "application/json");
        return;
      }
      j["metadata"]["uid"] = "uid-" + name;
      j["status"] = json::object();
      jobs[name] = j;
      res.status = 201;
      res.set_content(j.dump(), "application/json");
    });
    for (const char* kind : {"services", "configmaps"})
      svr_.Post(std::string("/api/v1/namespaces/([a-z0-9-]+)/") + kind,
                [=, this](const httplib::Request& req, httplib::Response& res) {
                  if (!authed(req, res)) return;
                  std::lock_guard<std::mutex> l(mu);
                  json j = json::parse(req.body);
                  requests.push_back({std::string("POST ") + kind, j});
                  owned[j["metadata"]["ownerReferences"][0]["uid"]].push_back(kind);
                  res.status = 201;
                  res.set_content(j.dump(), "application/json");
                });
    svr_.Get("/apis/batch/v1/namespaces/([a-z0-9-]+)/jobs/([a-z0-9-]+)", [=, this](const httplib::Request& req, httplib::Response& res) {
      if (!authed(req, res)) return;
      std::lock_guard<std::mutex> l(mu);
      auto it = jobs.find(req.matches[2]);
      if (it == jobs.end()) {
        res.status = 404;
        res.set_content(R"({"kind":"Status","reason":"NotFound"})", "application/json");
        return;
      }
      res.set_content(it->second.dump(), "application/json");
    });
    svr_.Delete("/apis/batch/v1/namespaces/([a-z0-9-]+)/jobs/([a-z0-9-]+)", [=, this](const httplib::Request& req, httplib::Response& res) {
      if (!authed(req, res)) return;
      std::lock_guard<std::mutex> l(mu);
      requests.push_back({"DELETE job", json::parse(req.body.empty() ? "{}" : req.body)});
      auto it = jobs.find(req.matches[2]);
      if (it == jobs.end()) {
        res.status = 404;
        return;
      }
      // Garbage collection: what the Job owns goes with it.
      owned.erase(it->second["metadata"]["uid"].get<std::string>());
      jobs.erase(it);
      res.set_content(R"({"kind":"Status","status":"Success"})", "application/json");
    });
    svr_.Get("/api/v1/namespaces/([a-z0-9-]+)/pods", [=, this](const httplib::Request& req, httplib::Response& res) {
      if (!authed(req, res)) return;
      std::lock_guard<std::mutex> l(mu);
      selectors.push_back(req.get_param_value("labelSelector"));
      res.set_content(json{{"items", pods}}.dump(), "application/json");
    });
    svr_.Get("/api/v1/namespaces/([a-z0-9-]+)/pods/([a-z0-9-]+)/log", [=, this](const httplib::Request& req, httplib::Response& res) {
      if (!authed(req, res)) return;
      res.set_content("log of " + req.matches[2].str() + "\n", "text/plain");
    });
    port = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeApiServer() {
    svr_.stop();
    thread_.join();
  }
  void set_status(const std::string& name, json status) {
    std::lock_guard<std::mutex> l(mu);
    jobs[name]["status"] = status;
  }
  void set_pod_exit(int code) {
    std::lock_guard<std::mutex> l(mu);
    pods = {{{"metadata", {{"name", "pod-0"}}},
             {"status", {{"containerStatuses", {{{"state", {{"terminated", {{"exitCode", code}}}}}}}}}}}};
  }

  std::mutex mu;
  std::map<std::string, json> jobs;
  std::map<std::string, std::vector<std::string>> owned;  // job uid -> kinds
  std::vector<std::pair<std::string, json>> requests;
  std::vector<std::string> selectors;
  json pods = json::array();
  int port = 0;

 private:
  std::string token_;
  httplib::Server svr_;
  std::thread thread_;
};

KubeClusterConfig cluster(int port) {
  KubeClusterConfig k;
  k.server = "http://127.0.0.1:" + std::to_string(port);
  k.token = "k8s-sa-token";
  k.namespace_ = "greenshard";
  k.image = "registry.example/greenshard-worker:0.1";
  return k;
}

}  // namespace

TEST(ControllerKubeExecutor, CreatesJobServiceAndConfigMapThenFollowsToCompletion) {
  FakeApiServer api("k8s-sa-token");
  auto ex = make_kubernetes_executor(cluster(api.port));
  GangStatus st = ex->start(gang(2, 1, 1));
  EXPECT_EQ(st.phase, GangPhase::kStarting);
  const std::string name = "gs-jabc123def456ghi-0";
  {
    std::lock_guard<std::mutex> l(api.mu);
    ASSERT_EQ(api.requests.size(), 3u);
    EXPECT_EQ(api.requests[0].first, "POST job");
    EXPECT_TRUE(check(api.requests[0].second, job_schema()).empty());
    EXPECT_TRUE(check(api.requests[1].second, service_schema()).empty());
    EXPECT_TRUE(check(api.requests[2].second, configmap_schema()).empty());
    // The Service and ConfigMap are owned by the created Job's uid.
    EXPECT_EQ(api.owned["uid-" + name].size(), 2u);
  }
  EXPECT_EQ(st.runtime["uid"], "uid-" + name);
  EXPECT_EQ(ex->poll("jabc123def456ghi").phase, GangPhase::kStarting);
  api.set_status(name, {{"active", 2}});
  EXPECT_EQ(ex->poll("jabc123def456ghi").phase, GangPhase::kRunning);
  api.set_status(name, {{"succeeded", 2}, {"conditions", {{{"type", "Complete"}, {"status", "True"}}}}});
  EXPECT_EQ(ex->poll("jabc123def456ghi").phase, GangPhase::kSucceeded);
}

TEST(ControllerKubeExecutor, AFailedJobIsReportedAndRemovedAndExit2IsAConfigError) {
  for (int code : {1, 2}) {
    FakeApiServer api("k8s-sa-token");
    auto ex = make_kubernetes_executor(cluster(api.port));
    ex->start(gang(2, 1, 0));
    const std::string name = "gs-jabc123def456ghi-0";
    api.set_pod_exit(code);
    api.set_status(name, {{"failed", 1},
                          {"conditions", {{{"type", "Failed"}, {"status", "True"}, {"reason", "BackoffLimitExceeded"}}}}});
    GangStatus st = ex->poll("jabc123def456ghi");
    EXPECT_EQ(st.phase, code == 2 ? GangPhase::kConfigError : GangPhase::kFailed) << st.message;
    EXPECT_NE(st.message.find("BackoffLimitExceeded"), std::string::npos);
    std::lock_guard<std::mutex> l(api.mu);
    EXPECT_EQ(api.jobs.count(name), 0u);       // deleted for the restart
    EXPECT_EQ(api.owned.count("uid-" + name), 0u);
    EXPECT_EQ(api.selectors.back(), "job-name=" + name);
  }
}

TEST(ControllerKubeExecutor, StopDeletesWithBackgroundPropagationAndGoneFollows) {
  FakeApiServer api("k8s-sa-token");
  auto ex = make_kubernetes_executor(cluster(api.port));
  ex->start(gang(1, 1, 0));
  EXPECT_FALSE(ex->gone("jabc123def456ghi"));
  ex->stop("jabc123def456ghi", std::chrono::seconds(30));
  {
    std::lock_guard<std::mutex> l(api.mu);
    EXPECT_EQ(api.requests.back().first, "DELETE job");
    EXPECT_EQ(api.requests.back().second["propagationPolicy"], "Background");
  }
  EXPECT_TRUE(ex->gone("jabc123def456ghi"));
}

TEST(ControllerKubeExecutor, ARestartedControllerAdoptsARunningJob) {
  FakeApiServer api("k8s-sa-token");
  json runtime;
  {
    auto ex = make_kubernetes_executor(cluster(api.port));
    runtime = ex->start(gang(2, 2, 0, 1)).runtime;
  }
  auto ex = make_kubernetes_executor(cluster(api.port));
  EXPECT_TRUE(ex->adopt("jabc123def456ghi", runtime, std::chrono::seconds(1)));
  api.set_status("gs-jabc123def456ghi-1", {{"active", 2}});
  EXPECT_EQ(ex->poll("jabc123def456ghi").phase, GangPhase::kRunning);
  // Rank 3 runs on node 1 (two processes per node).
  api.set_pod_exit(0);
  auto log = ex->logs("jabc123def456ghi", 3, 0, 1000);
  ASSERT_TRUE(log);
  EXPECT_EQ(*log, "log of pod-0\n");
  std::lock_guard<std::mutex> l(api.mu);
  EXPECT_EQ(api.selectors.back(), "job-name=gs-jabc123def456ghi-1,batch.kubernetes.io/job-completion-index=1");
  EXPECT_FALSE(ex->adopt("jother", {{"executor", "kubernetes"}, {"name", "gs-jother-0"}}, std::chrono::seconds(1)));
}

TEST(ControllerKubeExecutor, AWrongTokenIsALaunchFailureNamingTheStatus) {
  FakeApiServer api("the-right-token");
  auto ex = make_kubernetes_executor(cluster(api.port));
  try {
    ex->start(gang(1, 1, 0));
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP 401"), std::string::npos) << e.what();
  }
}
