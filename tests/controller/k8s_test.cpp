// Kubernetes manifests and executor.
//
// No real API server can run here, so the executor is tested against an
// in-test HTTP server that plays the Kubernetes API server (the only fake in
// the controller tests). The request bodies are checked offline against the
// Kubernetes API schemas of the npm package kubernetes-models (installed into
// <repo>/.tools/npm by scripts/install_helm.sh, as for tests/charts), by
// tests/controller/k8s/validate_objects.mjs run with node: schema types,
// required fields, enums and formats, no unknown field anywhere, DNS names
// and labels, and references between the objects. The chart's
// worker-defaults.yaml is rendered by the real helm (<repo>/.tools/bin/helm).
// Without node, kubernetes-models or helm these tests fail, naming them.
#include <gtest/gtest.h>

#include <carbon/time_ms.h>
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "common/spawn.h"
#include "controller/core/base64.h"
#include "controller/executors/executor_k8s.h"
#include "controller/scheduling/scheduler.h"
#include "controller/store/store.h"
#include "fake_executor.h"

using namespace controller;
using json = nlohmann::json;

namespace {

// --- offline validation with kubernetes-models ------------------------------

const std::filesystem::path kRepo =
    std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();

std::string find_program(const std::string& env_var, const std::string& name) {
  if (const char* e = std::getenv(env_var.c_str()); e && *e) return e;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t b = 0;
  while (b <= dirs.size()) {
    size_t e = dirs.find(':', b);
    if (e == std::string::npos) e = dirs.size();
    std::filesystem::path p = std::filesystem::path(dirs.substr(b, e - b)) / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
    b = e + 1;
  }
  return "";
}

struct Validation {
  int exit_code = -1;
  std::string output;
};

// cases: [{"case": sentence, "objects": [...]}] -> validate_objects.mjs.
Validation validate_objects(const json& cases) {
  const std::string node = find_program("NODE", "node");
  const auto script = kRepo / "tests/controller/k8s/validate_objects.mjs";
  if (node.empty()) return {-1, "node not found (set NODE or install nodejs)"};
  gstest::TempDir dir;
  std::ofstream(dir.file("objects.json")) << cases.dump(1);
  auto r = gstest::run_process({node, script.string(), dir.file("objects.json")}, {}, std::chrono::seconds(120));
  return {r.exit_code, r.output};
}

json one_case(const std::string& sentence, const KubeObjects& o) {
  return {{"case", sentence}, {"objects", {o.job, o.service, o.config_map}}};
}

// A file of the chart's controller ConfigMap as the real helm renders it.
std::string helm_config_file(const std::string& key, const std::vector<std::string>& extra_args) {
  const char* h = std::getenv("GREENSHARD_HELM");
  const std::string helm = h && *h ? h : (kRepo / ".tools/bin/helm").string();
  std::vector<std::string> argv = {helm, "template", "gs", (kRepo / "charts/greenshard").string(),
                                   "--show-only", "templates/configmap.yaml"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  auto r = gstest::run_process(argv, {}, std::chrono::seconds(120));
  if (r.exit_code != 0)
    throw std::runtime_error("helm template failed (scripts/install_helm.sh installs helm): " + r.output);
  YAML::Node cm = YAML::Load(r.output);
  return cm["data"][key].as<std::string>();
}
std::string helm_worker_defaults(const std::vector<std::string>& extra_args) {
  return helm_config_file("worker-defaults.yaml", extra_args);
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

// A region's checkpoint_s3 block as parse_regions_yaml leaves it.
S3CheckpointConfig s3_config(const std::string& endpoint = "https://minio.example:9000",
                             const std::string& region = "us-east-1") {
  S3CheckpointConfig s3;
  s3.url = "s3://greenshard-ckpt/runs";
  s3.endpoint = endpoint;
  s3.region = region;
  s3.secret = "greenshard-s3";
  return s3;
}

struct ManifestCase {
  const char* sentence;
  int nodes, ppn, gpus;
  std::string queue, claim;
  S3CheckpointConfig s3;
};

const ManifestCase kManifests[] = {
    {"one node with one process", 1, 1, 0, "", "", {}},
    {"four nodes of eight GPUs with eight processes each", 4, 8, 8, "", "", {}},
    {"a Kueue queue creates the Job suspended", 2, 1, 1, "team-a-queue", "", {}},
    {"a checkpoint claim is mounted for restarts", 2, 2, 0, "", "greenshard-ckpt", {}},
    {"checkpoints in S3 with the credentials mounted from a Secret", 2, 1, 1, "", "", s3_config()},
};

class ManifestTable : public ::testing::TestWithParam<ManifestCase> {};
TEST_P(ManifestTable, RendersTheGang) {
  const auto& c = GetParam();
  KubeClusterConfig k;
  k.namespace_ = "greenshard";
  k.queue_name = c.queue;
  k.checkpoint_claim = c.claim;
  k.checkpoint_s3 = c.s3;
  KubeObjects o = render_kube_objects(gang(c.nodes, c.ppn, c.gpus, 3), k, std::chrono::seconds(120), "uid-1");
  const json& spec = o.job["spec"];
  EXPECT_EQ(o.name, "gs-jabc123def456ghi-3");
  EXPECT_EQ(spec["completionMode"], "Indexed");
  EXPECT_EQ(spec["completions"], c.nodes);
  EXPECT_EQ(spec["parallelism"], c.nodes);
  EXPECT_EQ(spec["suspend"], !c.queue.empty());
  if (!c.queue.empty()) {
    EXPECT_EQ(o.job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], c.queue);
  }
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
  // GPU jobs must train on their GPUs (no silent CPU fallback).
  EXPECT_EQ(env_of(o.job, "GREENSHARD_DEVICE")["value"], c.gpus > 0 ? "cuda" : "cpu");
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

KubeObjects render_case(const ManifestCase& c, const WorkerDefaults& d = {}) {
  KubeClusterConfig k;
  k.namespace_ = "greenshard";
  k.queue_name = c.queue;
  k.checkpoint_claim = c.claim;
  k.checkpoint_s3 = c.s3;
  return render_kube_objects(gang(c.nodes, c.ppn, c.gpus, 3), k, std::chrono::seconds(120), "uid-1", d);
}

TEST(ControllerKubeManifest, EveryRenderedObjectValidatesAgainstTheKubernetesSchemas) {
  json cases = json::array();
  for (const auto& c : kManifests) cases.push_back(one_case(c.sentence, render_case(c)));
  Validation v = validate_objects(cases);
  EXPECT_EQ(v.exit_code, 0) << v.output;
  for (const auto& c : kManifests)
    EXPECT_NE(v.output.find(std::string(c.sentence) + ": 3 objects valid"), std::string::npos) << v.output;
}

TEST(ControllerKubeManifest, TheSchemaCheckCatchesMistakes) {
  KubeObjects o = render_case(kManifests[0]);
  json bad = o.job;
  bad["spec"]["completionMode"] = "indexed";
  bad["spec"]["template"]["spec"]["containers"][0]["env"][0]["name"] = "MASTER ADDR";
  bad["spec"]["paralelism"] = 1;
  bad["spec"]["template"]["spec"]["containers"][0]["resources"] = {{"limits", {{"cpu", "lots"}}}};
  bad["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {{"runAsNonRoot", "yes"}};
  bad["metadata"]["labels"]["app.kubernetes.io/name"] = std::string(64, 'a');
  json svc = o.service;
  svc["spec"]["selector"]["greenshard.io/job-id"] = "someone-else";
  Validation v = validate_objects(json::array({{{"case", "broken"}, {"objects", {bad, svc, o.config_map}}},
                                               one_case("intact", o)}));
  EXPECT_EQ(v.exit_code, 1) << v.output;
  for (const char* want : {"spec/completionMode must be equal to one of the allowed values",
                           "Job/gs-jabc123def456ghi-3.spec: unknown field 'paralelism'",
                           "env name 'MASTER ADDR' is invalid",
                           "resources/limits/cpu must match format \"quantity\"",
                           "securityContext/runAsNonRoot must be boolean",
                           "label 'app.kubernetes.io/name' value",
                           "Service/gs-jabc123def456ghi-3: selector matches no Job's pod template",
                           "intact: 3 objects valid"})
    EXPECT_NE(v.output.find(want), std::string::npos) << want << "\n" << v.output;
  EXPECT_EQ(v.output.find("intact: Job"), std::string::npos) << v.output;
}

// --- worker defaults (the chart's worker-defaults.yaml) ---------------------

const json* find_named(const json& list, const std::string& name) {
  for (const auto& x : list)
    if (x.value("name", "") == name) return &x;
  return nullptr;
}

struct DefaultsCase {
  const char* sentence;
  std::vector<std::string> helm_args;
  int gpus;
  bool pull_secret;  // helm_args set worker.imagePullSecrets
};

const DefaultsCase kDefaults[] = {
    {"the chart's default values on a one GPU job", {"--set", "worker.imagePullSecrets[0].name=regcred"}, 1, true},
    {"the multi-region GPU values on an eight GPU job",
     {"-f", (kRepo / "charts/greenshard/ci/multi-region-gpu-values.yaml").string()}, 8, false},
    {"the chart's default values on a CPU-only job", {}, 0, false},
};

class WorkerDefaultsTable : public ::testing::TestWithParam<DefaultsCase> {};
TEST_P(WorkerDefaultsTable, TheRenderedJobCarriesTheChartsWorkerDefaultsAndValidates) {
  const auto& c = GetParam();
  const std::string text = helm_worker_defaults(c.helm_args);
  const json chart = [&] {
    YAML::Node y = YAML::Load(text);
    json j;
    j["grace"] = y["terminationGracePeriodSeconds"].as<int64_t>();
    j["cpu"] = y["resources"]["requests"]["cpu"].as<std::string>();
    j["memory"] = y["resources"]["requests"]["memory"].as<std::string>();
    j["shm"] = y["volumes"][1]["emptyDir"]["sizeLimit"].as<std::string>();
    j["ifname"] = y["env"][1]["value"].as<std::string>();
    return j;
  }();
  WorkerDefaults d = parse_worker_defaults(text, "worker-defaults.yaml");
  KubeClusterConfig k;
  k.namespace_ = "greenshard";
  GangSpec g = gang(2, 1, c.gpus);
  g.spec.image.clear();  // the defaults' image applies
  KubeObjects o = render_kube_objects(g, k, std::chrono::seconds(30), "uid-1", d);
  const json& pod = o.job["spec"]["template"]["spec"];
  const json& ctr = pod["containers"][0];

  EXPECT_EQ(ctr["image"], d.image);
  EXPECT_EQ(ctr["imagePullPolicy"], "IfNotPresent");
  // NCCL after the controller's own variables, which stay.
  ASSERT_NE(find_named(ctr["env"], "NCCL_SOCKET_IFNAME"), nullptr);
  EXPECT_EQ((*find_named(ctr["env"], "NCCL_SOCKET_IFNAME"))["value"], chart["ifname"]);
  EXPECT_NE(find_named(ctr["env"], "NCCL_DEBUG"), nullptr);
  EXPECT_NE(find_named(ctr["env"], "NCCL_IB_DISABLE"), nullptr);
  EXPECT_NE(find_named(ctr["env"], "MASTER_ADDR"), nullptr);
  // /dev/shm: a memory-backed emptyDir.
  const json* shm = find_named(pod["volumes"], "dshm");
  ASSERT_NE(shm, nullptr);
  EXPECT_EQ((*shm)["emptyDir"]["medium"], "Memory");
  EXPECT_EQ((*shm)["emptyDir"]["sizeLimit"], chart["shm"]);
  ASSERT_NE(find_named(ctr["volumeMounts"], "dshm"), nullptr);
  EXPECT_EQ((*find_named(ctr["volumeMounts"], "dshm"))["mountPath"], "/dev/shm");
  EXPECT_NE(find_named(pod["volumes"], "checkpoints"), nullptr);
  // Security contexts, grace, scheduling.
  EXPECT_EQ(ctr["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(ctr["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ(ctr["securityContext"]["capabilities"]["drop"], json::array({"ALL"}));
  EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(pod["securityContext"]["runAsUser"], 65532);
  EXPECT_EQ(pod["terminationGracePeriodSeconds"], chart["grace"]);
  EXPECT_EQ(pod["automountServiceAccountToken"], false);
  ASSERT_TRUE(pod.contains("tolerations"));
  EXPECT_EQ(pod["tolerations"][0]["key"], "nvidia.com/gpu");
  if (c.pull_secret) {
    EXPECT_EQ(pod["imagePullSecrets"], json::parse(R"([{"name":"regcred"}])"));
  } else {
    EXPECT_FALSE(pod.contains("imagePullSecrets"));
  }
  // Resources: the defaults' CPU and memory; GPUs from the job.
  EXPECT_EQ(ctr["resources"]["requests"]["cpu"], chart["cpu"]);
  EXPECT_EQ(ctr["resources"]["requests"]["memory"], chart["memory"]);
  if (c.gpus > 0) {
    EXPECT_EQ(ctr["resources"]["requests"]["nvidia.com/gpu"], std::to_string(c.gpus));
    EXPECT_EQ(ctr["resources"]["limits"]["nvidia.com/gpu"], std::to_string(c.gpus));
  } else {
    EXPECT_FALSE(ctr["resources"]["requests"].contains("nvidia.com/gpu"));
    EXPECT_FALSE(ctr["resources"]["limits"].contains("nvidia.com/gpu"));
  }
  Validation v = validate_objects(json::array({one_case(c.sentence, o)}));
  EXPECT_EQ(v.exit_code, 0) << v.output;
}
INSTANTIATE_TEST_SUITE_P(ControllerKubeWorkerDefaults, WorkerDefaultsTable, ::testing::ValuesIn(kDefaults),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

struct BadDefaultsCase {
  const char* sentence;
  const char* yaml;
  const char* error;  // a substring of the message
};

const BadDefaultsCase kBadDefaults[] = {
    {"an unknown key is named", "imagePullPolicyy: Always\n", "worker-defaults.yaml: imagePullPolicyy: unknown key"},
    {"a pull policy outside the enum", "imagePullPolicy: Sometimes\n", "imagePullPolicy: 'Sometimes' is not one of"},
    {"a grace period that is a string", "terminationGracePeriodSeconds: \"300\"\n",
     "terminationGracePeriodSeconds: expected an integer"},
    {"a negative grace period", "terminationGracePeriodSeconds: -1\n", "terminationGracePeriodSeconds: must be in"},
    {"a memory request that is not a quantity", "resources:\n  requests:\n    memory: lots\n",
     "resources.requests.memory: 'lots' is not a quantity"},
    {"a resources section other than requests and limits", "resources:\n  claims: []\n",
     "resources.claims: unknown key"},
    {"an environment variable the controller sets", "env:\n  - {name: MASTER_ADDR, value: x}\n",
     "env[0].name: MASTER_ADDR is set by the controller"},
    {"an environment value that is a number", "env:\n  - {name: NCCL_IB_GID_INDEX, value: 3}\n",
     "env[0].value: expected a string"},
    {"an environment variable set twice", "env:\n  - {name: A, value: x}\n  - {name: A, value: y}\n",
     "env[1].name: A is set twice"},
    {"a mount without its volume", "volumeMounts:\n  - {name: dshm, mountPath: /dev/shm}\n",
     "volumeMounts[0].name: no volume named 'dshm' in volumes"},
    {"a volume named like the controller's", "volumes:\n  - {name: checkpoints, emptyDir: {}}\n",
     "volumes[0].name: checkpoints is the controller's volume"},
    {"a shm medium outside the enum", "volumes:\n  - name: dshm\n    emptyDir: {medium: Disk}\n",
     "volumes[0].emptyDir.medium: 'Disk' is not one of"},
    {"a volume named like the controller's S3 credentials", "volumes:\n  - {name: s3-credentials, emptyDir: {}}\n",
     "volumes[0].name: s3-credentials is the controller's volume"},
    {"a mount over the S3 credentials",
     "volumes:\n  - {name: x, emptyDir: {}}\nvolumeMounts:\n  - {name: x, mountPath: /etc/greenshard/s3}\n",
     "volumeMounts[0].mountPath: /etc/greenshard/s3 is the controller's mount"},
    {"a mount over the checkpoint directory",
     "volumes:\n  - {name: x, emptyDir: {}}\nvolumeMounts:\n  - {name: x, mountPath: /checkpoints}\n",
     "volumeMounts[0].mountPath: /checkpoints is the controller's mount"},
    {"a security context key with a typo", "securityContext:\n  readOnlyRootFilesytem: true\n",
     "securityContext.readOnlyRootFilesytem: unknown key"},
    {"a pod user that is a string", "podSecurityContext:\n  runAsUser: nobody\n",
     "podSecurityContext.runAsUser: expected an integer"},
    {"a toleration effect outside the enum", "tolerations:\n  - {key: a, operator: Exists, effect: Never}\n",
     "tolerations[0].effect: 'Never' is not one of"},
    {"a pull secret without a name", "imagePullSecrets:\n  - {}\n", "imagePullSecrets[0].name: required"},
    {"a list where a map belongs", "nodeSelector: [a]\n", "nodeSelector: expected a map"},
    {"a YAML syntax error names the file", "env: [\n", "worker-defaults.yaml: "},
};

class BadWorkerDefaults : public ::testing::TestWithParam<BadDefaultsCase> {};
TEST_P(BadWorkerDefaults, IsRefusedNamingTheField) {
  const auto& c = GetParam();
  try {
    parse_worker_defaults(c.yaml, "worker-defaults.yaml");
    FAIL() << "accepted: " << c.yaml;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(c.error), std::string::npos) << e.what();
  }
}
INSTANTIATE_TEST_SUITE_P(ControllerKubeWorkerDefaults, BadWorkerDefaults, ::testing::ValuesIn(kBadDefaults),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerKubeWorkerDefaults, TheFileIsReadFromTheEnvironmentVariable) {
  gstest::TempDir dir;
  ::unsetenv("GREENSHARD_WORKER_DEFAULTS_FILE");
  EXPECT_TRUE(worker_defaults_from_env().env.empty());
  std::ofstream(dir.file("wd.yaml")) << "env:\n  - {name: NCCL_DEBUG, value: INFO}\nterminationGracePeriodSeconds: 90\n";
  ::setenv("GREENSHARD_WORKER_DEFAULTS_FILE", dir.file("wd.yaml").c_str(), 1);
  WorkerDefaults d = worker_defaults_from_env();
  EXPECT_EQ(d.env[0]["value"], "INFO");
  EXPECT_EQ(d.termination_grace_s, 90);
  ::setenv("GREENSHARD_WORKER_DEFAULTS_FILE", dir.file("missing.yaml").c_str(), 1);
  try {
    worker_defaults_from_env();
    ADD_FAILURE() << "a missing file was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("GREENSHARD_WORKER_DEFAULTS_FILE"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing.yaml"), std::string::npos) << e.what();
  }
  ::unsetenv("GREENSHARD_WORKER_DEFAULTS_FILE");
}

// --- where checkpoints live: emptyDir, PVC or S3 ----------------------------

const char* const kJob = "jabc123def456ghi";

const json* mount_at(const json& ctr, const std::string& path) {
  for (const auto& m : ctr["volumeMounts"])
    if (m.value("mountPath", "") == path) return &m;
  return nullptr;
}

struct StorageCase {
  const char* sentence;
  std::string claim;
  S3CheckpointConfig s3;
  std::string dir, summary;                // GREENSHARD_CHECKPOINT_DIR, GREENSHARD_SUMMARY_PATH
  const char* volume;                      // the "checkpoints" volume's source
  std::optional<std::string> endpoint, region;  // AWS_ENDPOINT_URL_S3, AWS_REGION (nullopt: unset)
};

const StorageCase kStorage[] = {
    {"without a claim or S3 checkpoints stay in the pod's emptyDir", "", {},
     std::string("/checkpoints/") + kJob, std::string("/checkpoints/") + kJob + "/summary.json", "emptyDir",
     std::nullopt, std::nullopt},
    {"a claim keeps them on the PVC", "greenshard-ckpt", {},
     std::string("/checkpoints/") + kJob, std::string("/checkpoints/") + kJob + "/summary.json",
     "persistentVolumeClaim", std::nullopt, std::nullopt},
    {"S3 with an endpoint and a region", "", s3_config(),
     std::string("s3://greenshard-ckpt/runs/") + kJob, "/checkpoints/summary.json", "emptyDir",
     "https://minio.example:9000", "us-east-1"},
    {"S3 with the worker's default region", "", s3_config("http://10.0.0.5:9000", ""),
     std::string("s3://greenshard-ckpt/runs/") + kJob, "/checkpoints/summary.json", "emptyDir",
     "http://10.0.0.5:9000", std::nullopt},
};

void PrintTo(const StorageCase& c, std::ostream* os) { *os << c.sentence; }

class CheckpointStorage : public ::testing::TestWithParam<StorageCase> {};
TEST_P(CheckpointStorage, TheWorkerPodGetsItsCheckpointDirAndNoCredentialInItsSpec) {
  const auto& c = GetParam();
  KubeClusterConfig k;
  k.namespace_ = "greenshard";
  k.checkpoint_claim = c.claim;
  k.checkpoint_s3 = c.s3;
  KubeObjects o = render_kube_objects(gang(2, 1, 1, 0), k, std::chrono::seconds(60), "uid-1");
  const json& pod = o.job["spec"]["template"]["spec"];
  const json& ctr = pod["containers"][0];
  EXPECT_EQ(env_of(o.job, "GREENSHARD_CHECKPOINT_DIR")["value"], c.dir);
  EXPECT_EQ(env_of(o.job, "GREENSHARD_SUMMARY_PATH")["value"], c.summary);
  // The summary's directory is a writable mount (the worker creates no
  // directory for it).
  const std::string summary_dir = std::filesystem::path(c.summary).parent_path().string();
  const json* m = mount_at(ctr, c.s3.enabled() ? summary_dir : "/checkpoints");
  ASSERT_NE(m, nullptr) << summary_dir;
  EXPECT_EQ(m->value("name", ""), "checkpoints");
  EXPECT_FALSE(m->value("readOnly", false));
  const json* ckpt = find_named(pod["volumes"], "checkpoints");
  ASSERT_NE(ckpt, nullptr);
  EXPECT_TRUE(ckpt->contains(c.volume)) << ckpt->dump();
  if (!c.claim.empty()) {
    EXPECT_EQ((*ckpt)["persistentVolumeClaim"]["claimName"], c.claim);
  }
  for (const auto& [name, want] : {std::pair{"AWS_ENDPOINT_URL_S3", c.endpoint}, std::pair{"AWS_REGION", c.region}}) {
    if (want) {
      EXPECT_EQ(env_of(o.job, name)["value"], *want) << name;
    } else {
      EXPECT_TRUE(env_of(o.job, name).is_null()) << name << " = " << env_of(o.job, name).dump();
    }
  }
  const json* secret = find_named(pod["volumes"], "s3-credentials");
  if (c.s3.enabled()) {
    // The Secret: a read-only volume the worker reads its key files from.
    EXPECT_EQ(env_of(o.job, "GREENSHARD_S3_SECRET_DIR")["value"], "/etc/greenshard/s3");
    ASSERT_NE(secret, nullptr);
    EXPECT_EQ((*secret)["secret"]["secretName"], c.s3.secret);
    const json* sm = mount_at(ctr, "/etc/greenshard/s3");
    ASSERT_NE(sm, nullptr);
    EXPECT_EQ(sm->value("name", ""), "s3-credentials");
    EXPECT_EQ(sm->value("readOnly", false), true);
  } else {
    EXPECT_TRUE(env_of(o.job, "GREENSHARD_S3_SECRET_DIR").is_null());
    EXPECT_EQ(secret, nullptr);
    EXPECT_EQ(mount_at(ctr, "/etc/greenshard/s3"), nullptr);
  }
  // No credential in the pod spec: no such variable, no secretKeyRef, and
  // not even the key names (the whole Secret is mounted).
  for (const auto& e : ctr["env"]) {
    const std::string n = e["name"];
    EXPECT_TRUE(n != "AWS_ACCESS_KEY_ID" && n != "AWS_SECRET_ACCESS_KEY" && n != "AWS_SESSION_TOKEN") << n;
    EXPECT_FALSE(e.contains("valueFrom") && e["valueFrom"].contains("secretKeyRef")) << e.dump();
  }
  for (const json* obj : {&o.job, &o.service, &o.config_map})
    for (const char* key : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "secretKeyRef"})
      EXPECT_EQ(obj->dump().find(key), std::string::npos) << key;
  Validation v = validate_objects(json::array({one_case(c.sentence, o)}));
  EXPECT_EQ(v.exit_code, 0) << v.output;
}
INSTANTIATE_TEST_SUITE_P(ControllerKubeManifest, CheckpointStorage, ::testing::ValuesIn(kStorage),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerKubeManifest, TheRegionsS3SettingsWinOverTheWorkerDefaultsEnv) {
  WorkerDefaults d = parse_worker_defaults(
      "env:\n  - {name: AWS_REGION, value: eu-west-9}\n  - {name: AWS_ENDPOINT_URL_S3, value: 'http://other:1'}\n"
      "  - {name: NCCL_DEBUG, value: WARN}\n",
      "worker-defaults.yaml");
  auto count = [](const json& job, const std::string& name) {
    int n = 0;
    for (const auto& e : job["spec"]["template"]["spec"]["containers"][0]["env"]) n += e["name"] == name;
    return n;
  };
  KubeClusterConfig k;
  k.checkpoint_s3 = s3_config();
  KubeObjects o = render_kube_objects(gang(1, 1, 0), k, std::chrono::seconds(60), "uid-1", d);
  EXPECT_EQ(env_of(o.job, "AWS_REGION")["value"], "us-east-1");
  EXPECT_EQ(env_of(o.job, "AWS_ENDPOINT_URL_S3")["value"], "https://minio.example:9000");
  EXPECT_EQ(count(o.job, "AWS_REGION"), 1);
  EXPECT_EQ(count(o.job, "AWS_ENDPOINT_URL_S3"), 1);
  EXPECT_EQ(env_of(o.job, "NCCL_DEBUG")["value"], "WARN");
  // Where the region leaves the region unset, or has no S3, the defaults' stay.
  k.checkpoint_s3 = s3_config("http://10.0.0.5:9000", "");
  KubeObjects unset = render_kube_objects(gang(1, 1, 0), k, std::chrono::seconds(60), "uid-1", d);
  EXPECT_EQ(env_of(unset.job, "AWS_REGION")["value"], "eu-west-9");
  EXPECT_EQ(env_of(unset.job, "AWS_ENDPOINT_URL_S3")["value"], "http://10.0.0.5:9000");
  EXPECT_EQ(count(unset.job, "AWS_ENDPOINT_URL_S3"), 1);
  k.checkpoint_s3 = {};
  KubeObjects none = render_kube_objects(gang(1, 1, 0), k, std::chrono::seconds(60), "uid-1", d);
  EXPECT_EQ(env_of(none.job, "AWS_REGION")["value"], "eu-west-9");
  EXPECT_EQ(env_of(none.job, "AWS_ENDPOINT_URL_S3")["value"], "http://other:1");
  Validation v = validate_objects(json::array({one_case("region's S3 settings", o), one_case("defaults' S3 settings", unset),
                                               one_case("no S3", none)}));
  EXPECT_EQ(v.exit_code, 0) << v.output;
}

// --- the executor against an in-test API server ---------------------------

class FakeApiServer {
 public:
  // HTTPS when given a certificate and key (PEM files).
  explicit FakeApiServer(std::string token, const std::string& cert = "", const std::string& key = "")
      : token_(std::move(token)),
        svr_(cert.empty() ? std::unique_ptr<httplib::Server>(new httplib::Server)
                          : std::unique_ptr<httplib::Server>(new httplib::SSLServer(cert.c_str(), key.c_str()))) {
    auto authed = [this](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") != "Bearer " + token_) {
        res.status = 401;
        res.set_content(R"({"kind":"Status","message":"Unauthorized"})", "application/json");
        return false;
      }
      return true;
    };
    const std::string ns = "(/namespaces/([a-z0-9-]+))";
    svr_->Post("/apis/batch/v1/namespaces/([a-z0-9-]+)/jobs", [=, this](const httplib::Request& req, httplib::Response& res) {
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
      svr_->Post(std::string("/api/v1/namespaces/([a-z0-9-]+)/") + kind,
                [=, this](const httplib::Request& req, httplib::Response& res) {
                  if (!authed(req, res)) return;
                  std::lock_guard<std::mutex> l(mu);
                  json j = json::parse(req.body);
                  requests.push_back({std::string("POST ") + kind, j});
                  if (std::string(kind) == "services" && service_post_status != 0) {
                    res.status = service_post_status;
                    res.set_content(R"({"kind":"Status","message":"services is forbidden"})", "application/json");
                    return;
                  }
                  owned[j["metadata"]["ownerReferences"][0]["uid"]].push_back(kind);
                  res.status = 201;
                  res.set_content(j.dump(), "application/json");
                });
    svr_->Get("/apis/batch/v1/namespaces/([a-z0-9-]+)/jobs/([a-z0-9-]+)", [=, this](const httplib::Request& req, httplib::Response& res) {
      if (!authed(req, res)) return;
      std::lock_guard<std::mutex> l(mu);
      if (job_get_status != 0) {
        res.status = job_get_status;
        res.set_content(R"({"kind":"Status","message":"etcdserver: request timed out"})", "application/json");
        return;
      }
      auto it = jobs.find(req.matches[2]);
      if (it == jobs.end()) {
        res.status = 404;
        res.set_content(R"({"kind":"Status","reason":"NotFound"})", "application/json");
        return;
      }
      res.set_content(it->second.dump(), "application/json");
    });
    svr_->Delete("/apis/batch/v1/namespaces/([a-z0-9-]+)/jobs/([a-z0-9-]+)", [=, this](const httplib::Request& req, httplib::Response& res) {
      if (!authed(req, res)) return;
      std::lock_guard<std::mutex> l(mu);
      const json opts = json::parse(req.body.empty() ? "{}" : req.body);
      requests.push_back({"DELETE job", opts});
      auto it = jobs.find(req.matches[2]);
      if (it == jobs.end()) {
        res.status = 404;
        return;
      }
      if (opts.value("propagationPolicy", "") == "Foreground") {
        // The Job stays, marked, until its dependents are gone (collect()).
        it->second["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
        it->second["metadata"]["finalizers"] = {"foregroundDeletion"};
        res.set_content(it->second.dump(), "application/json");
        return;
      }
      // Background: the Job goes now; what it owns goes with it.
      owned.erase(it->second["metadata"]["uid"].get<std::string>());
      jobs.erase(it);
      res.set_content(R"({"kind":"Status","status":"Success"})", "application/json");
    });
    svr_->Get("/api/v1/namespaces/([a-z0-9-]+)/pods", [=, this](const httplib::Request& req, httplib::Response& res) {
      if (!authed(req, res)) return;
      std::lock_guard<std::mutex> l(mu);
      selectors.push_back(req.get_param_value("labelSelector"));
      res.set_content(json{{"items", pods}}.dump(), "application/json");
    });
    svr_->Get("/api/v1/namespaces/([a-z0-9-]+)/pods/([a-z0-9-]+)/log", [=, this](const httplib::Request& req, httplib::Response& res) {
      if (!authed(req, res)) return;
      res.set_content("log of " + req.matches[2].str() + "\n", "text/plain");
    });
    port = svr_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_->listen_after_bind(); });
    while (!svr_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeApiServer() {
    svr_->stop();
    thread_.join();
  }
  void set_status(const std::string& name, json status) {
    std::lock_guard<std::mutex> l(mu);
    jobs[name]["status"] = status;
  }
  // The garbage collector finishes a deletion: the Job and what it owns go.
  void collect(const std::string& name) {
    std::lock_guard<std::mutex> l(mu);
    auto it = jobs.find(name);
    if (it == jobs.end()) return;
    owned.erase(it->second["metadata"]["uid"].get<std::string>());
    jobs.erase(it);
  }
  void set_pods(json p) {
    std::lock_guard<std::mutex> l(mu);
    pods = std::move(p);
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
  int job_get_status = 0;       // non-zero: GET of a Job answers this status
  int service_post_status = 0;  // non-zero: POST of a Service answers this status
  int port = 0;

 private:
  std::string token_;
  std::unique_ptr<httplib::Server> svr_;
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
    EXPECT_EQ(api.requests[1].first, "POST services");
    EXPECT_EQ(api.requests[2].first, "POST configmaps");
    // The request bodies as sent.
    Validation v = validate_objects(json::array(
        {{{"case", "the executor's requests"},
          {"objects", {api.requests[0].second, api.requests[1].second, api.requests[2].second}}}}));
    EXPECT_EQ(v.exit_code, 0) << v.output;
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

TEST(ControllerKubeExecutor, StopDeletesWithForegroundPropagationAndGoneWaitsForTheGarbageCollector) {
  FakeApiServer api("k8s-sa-token");
  auto ex = make_kubernetes_executor(cluster(api.port));
  ex->start(gang(1, 1, 0));
  const std::string name = "gs-jabc123def456ghi-0";
  EXPECT_FALSE(ex->gone("jabc123def456ghi"));
  ex->stop("jabc123def456ghi", std::chrono::seconds(30));
  {
    std::lock_guard<std::mutex> l(api.mu);
    EXPECT_EQ(api.requests.back().first, "DELETE job");
    // Foreground: the Job stays until its pods have checkpointed and ended.
    EXPECT_EQ(api.requests.back().second["propagationPolicy"], "Foreground");
  }
  EXPECT_FALSE(ex->gone("jabc123def456ghi"));  // pods still terminating
  api.collect(name);
  EXPECT_TRUE(ex->gone("jabc123def456ghi"));
  std::lock_guard<std::mutex> l(api.mu);
  EXPECT_EQ(api.owned.count("uid-" + name), 0u);
}

TEST(ControllerKubeExecutor, ARestartedControllerAdoptsARunningJob) {
  FakeApiServer api("k8s-sa-token");
  json runtime;
  {
    auto ex = make_kubernetes_executor(cluster(api.port));
    runtime = ex->start(gang(2, 2, 0, 1)).runtime;
  }
  auto ex = make_kubernetes_executor(cluster(api.port));
  EXPECT_TRUE(ex->adopt("jabc123def456ghi", runtime, AdoptOptions{std::chrono::seconds(1)}));
  api.set_status("gs-jabc123def456ghi-1", {{"active", 2}});
  EXPECT_EQ(ex->poll("jabc123def456ghi").phase, GangPhase::kRunning);
  // Rank 3 runs on node 1 (two processes per node).
  api.set_pod_exit(0);
  auto log = ex->logs("jabc123def456ghi", 3, 0, 1000);
  ASSERT_TRUE(log);
  EXPECT_EQ(*log, "log of pod-0\n");
  {
    std::lock_guard<std::mutex> l(api.mu);
    EXPECT_EQ(api.selectors.back(), "job-name=gs-jabc123def456ghi-1,batch.kubernetes.io/job-completion-index=1");
  }
  // (Not under api.mu: the fake server's handlers take it.)
  EXPECT_FALSE(ex->adopt("jother", {{"executor", "kubernetes"}, {"name", "gs-jother-0"}}, AdoptOptions{std::chrono::seconds(1)}));
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

TEST(ControllerKubeExecutor, TheWorkerDefaultsReachTheCreatedJob) {
  FakeApiServer api("k8s-sa-token");
  auto ex = make_kubernetes_executor(
      cluster(api.port), std::chrono::seconds(30),
      parse_worker_defaults("env:\n  - {name: NCCL_DEBUG, value: WARN}\nterminationGracePeriodSeconds: 240\n", "wd"));
  ex->start(gang(1, 1, 0));
  std::lock_guard<std::mutex> l(api.mu);
  const json& pod = api.requests.at(0).second["spec"]["template"]["spec"];
  ASSERT_NE(find_named(pod["containers"][0]["env"], "NCCL_DEBUG"), nullptr);
  EXPECT_EQ(pod["terminationGracePeriodSeconds"], 240);
}

// --- how a gang's end is read: Job phase x how it ended -> GangPhase -------

namespace {

const char* kId = "jabc123def456ghi";
const char* kName = "gs-jabc123def456ghi-0";

// A pod of the Job: exit nullopt = still running.
json pod(int index, std::optional<int> exit, const std::string& message = "", bool disrupted = false) {
  json p = {{"metadata", {{"name", std::string(kName) + "-" + std::to_string(index) + "-x7k2p"},
                          {"labels", {{"job-name", kName}}},
                          {"annotations", {{"batch.kubernetes.io/job-completion-index", std::to_string(index)}}}}},
            {"status", json::object()}};
  if (disrupted)
    p["status"]["conditions"] = {{{"type", "DisruptionTarget"}, {"status", "True"}, {"reason", "EvictionByEvictionAPI"}}};
  json state = {{"running", json::object()}};
  if (exit) {
    state = {{"terminated", {{"exitCode", *exit}, {"reason", *exit == 0 ? "Completed" : "Error"}}}};
    if (!message.empty()) state["terminated"]["message"] = message;
  }
  p["status"]["containerStatuses"] = {{{"name", "worker"}, {"state", state}}};
  return p;
}

json summary_message(const std::string& state) {
  return json{{"state", state}, {"job_id", kId}, {"steps", 40}, {"total_steps", 100}}.dump();
}

const json kRunningStatus = {{"active", 2}, {"ready", 2}};
const json kComplete = {{"succeeded", 2}, {"conditions", {{{"type", "Complete"}, {"status", "True"}}}}};
const json kFailedJob = {{"failed", 1},
                         {"conditions", {{{"type", "Failed"}, {"status", "True"}, {"reason", "BackoffLimitExceeded"},
                                          {"message", "Job has reached the specified backoff limit"}}}}};

struct EndCase {
  const char* sentence;
  bool stop;           // the controller called stop() (end of a window, cancel)
  json status;         // the Job's status then; null: the Job is gone (GET 404)
  json pods;
  GangPhase want;
  std::string message;             // part of the reported message
  const char* summary_state = "";  // the worker summary's state in the GangStatus ("" = none)
  bool suspend = false;            // the Job's spec.suspend (Kueue)
  int api_status = 0;              // the API server answers GET of the Job with this
};

void PrintTo(const EndCase& c, std::ostream* os) { *os << c.sentence; }

const EndCase kEnds[] = {
    {"every pod of the gang is running", false, kRunningStatus, json::array({pod(0, {}), pod(1, {})}),
     GangPhase::kRunning, ""},
    {"a pod of the gang is still pending", false, {{"active", 2}, {"ready", 1}}, json::array(),
     GangPhase::kStarting, "1 of 2 pods"},
    {"Kueue holds the Job suspended", false, json::object(), json::array(), GangPhase::kStarting,
     "suspended (waiting for admission by Kueue)", "", true},
    {"the Job completed and the worker summary says succeeded", false, kComplete,
     json::array({pod(1, 0), pod(0, 0, summary_message("succeeded"))}), GangPhase::kSucceeded,
     "completed (summary: succeeded)", "succeeded"},
    {"the Job completed without a worker summary", false, kComplete, json::array({pod(0, 0), pod(1, 0)}),
     GangPhase::kSucceeded, "completed"},
    {"the gang checkpointed and exited 0 on SIGTERM (summary preempted)", false, kComplete,
     json::array({pod(0, 0, summary_message("preempted")), pod(1, 0)}), GangPhase::kPreempted,
     "checkpointed on SIGTERM (summary: preempted)", "preempted"},
    {"Kubernetes evicted the pods and they exited 0 after checkpointing", false, kComplete,
     json::array({pod(0, 0, "", true), pod(1, 0, "", true)}), GangPhase::kPreempted, "DisruptionTarget"},
    {"the Job completed after the controller asked it to stop", true, kComplete,
     json::array({pod(0, 0), pod(1, 0)}), GangPhase::kPreempted, "stopped as asked"},
    {"the controller deleted the Job to stop the gang", true, nullptr, json::array(), GangPhase::kPreempted,
     "deleted by the controller to stop the gang (stopped as asked)"},
    {"someone else deleted the Job", false, nullptr, json::array(), GangPhase::kFailed,
     "disappeared from the cluster (deleted by someone else)"},
    {"a worker exited 2 (configuration error)", false, kFailedJob,
     json::array({pod(0, 137), pod(1, 2, "step 0\ngreenshard-worker: config error: model.layers: must be >= 1\n")}),
     GangPhase::kConfigError, "exited 2: model.layers: must be >= 1"},
    {"a worker failed otherwise", false, kFailedJob,
     json::array({pod(0, {}), pod(1, 1, "step 3 loss 2.1\nerror: cannot read shard 7 of t.bin\n")}),
     GangPhase::kFailed, "BackoffLimitExceeded Job has reached the specified backoff limit; pod " +
                             std::string(kName) + "-1-x7k2p (index 1) exited 1: error: cannot read shard 7 of t.bin"},
    {"the ranks of a stopped gang were killed after the grace period", true, kFailedJob,
     json::array({pod(0, 137), pod(1, 143)}), GangPhase::kPreempted, "killed after the grace period"},
    {"a worker crashed while the gang was stopping", true, kFailedJob, json::array({pod(0, 1, "segfault")}),
     GangPhase::kFailed, "exited 1: segfault"},
    {"the API server cannot answer after the gang ran", false, kRunningStatus, json::array(), GangPhase::kRunning,
     "kubernetes API HTTP 500", "", false, 500},
    // Found by fuzz_k8s_answers: ready + succeeded overflowed int (UB).
    {"an API answer with ready at the int maximum", false, {{"active", 1}, {"ready", 2147483647}, {"succeeded", 1}},
     json::array(), GangPhase::kRunning, ""},
};

}  // namespace

class KubeGangEnd : public ::testing::TestWithParam<EndCase> {};
TEST_P(KubeGangEnd, IsReportedAsItsPhase) {
  const EndCase& c = GetParam();
  FakeApiServer api("k8s-sa-token");
  auto ex = make_kubernetes_executor(cluster(api.port));
  ex->start(gang(2, 1, 0));
  api.set_status(kName, kRunningStatus);
  ASSERT_EQ(ex->poll(kId).phase, GangPhase::kRunning);
  if (c.stop) ex->stop(kId, std::chrono::seconds(30));
  if (c.status.is_null()) {
    api.collect(kName);
  } else {
    api.set_status(kName, c.status);
    std::lock_guard<std::mutex> l(api.mu);
    api.jobs[kName]["spec"]["suspend"] = c.suspend;
    api.job_get_status = c.api_status;
  }
  api.set_pods(c.pods);
  GangStatus st = ex->poll(kId);
  EXPECT_EQ(to_string(st.phase), to_string(c.want)) << st.message;
  EXPECT_NE(st.message.find(c.message), std::string::npos) << st.message;
  if (*c.summary_state) {
    ASSERT_TRUE(st.summary) << st.message;
    EXPECT_EQ(greenshard::to_string(st.summary->state), c.summary_state);
    EXPECT_EQ(st.summary->steps, 40);
  } else {
    EXPECT_FALSE(st.summary) << st.message;
  }
  EXPECT_EQ(st.runtime["name"], kName);
  EXPECT_EQ(st.runtime.value("stop_requested", false), c.stop);
}
INSTANTIATE_TEST_SUITE_P(ControllerKubeExecutor, KubeGangEnd, ::testing::ValuesIn(kEnds),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerKubeExecutor, APreemptedKubernetesGangIsNotSucceeded) {
  FakeApiServer api("k8s-sa-token");
  // The worker says it was preempted: a Complete Job is not a success.
  {
    auto ex = make_kubernetes_executor(cluster(api.port));
    ex->start(gang(2, 1, 0));
    api.set_pods(json::array({pod(0, 0, summary_message("preempted")), pod(1, 0)}));
    api.set_status(kName, kComplete);
    GangStatus st = ex->poll(kId);
    EXPECT_EQ(to_string(st.phase), "preempted") << st.message;
    ASSERT_TRUE(st.summary) << st.message;
    EXPECT_EQ(st.summary->state, greenshard::RunEnd::kPreempted);
    api.collect(kName);
  }
  // The controller asked it to stop, then restarted: the request survives
  // in the runtime the scheduler persisted, so the Complete Job the new
  // executor finds is still a preemption, even without a summary.
  json runtime;
  {
    auto ex = make_kubernetes_executor(cluster(api.port));
    ex->start(gang(2, 1, 0));
    ex->stop(kId, std::chrono::seconds(30));
    runtime = ex->poll(kId).runtime;  // the Job is being deleted: still there
    EXPECT_EQ(runtime["stop_requested"], true);
  }
  api.set_pods(json::array({pod(0, 0), pod(1, 0)}));
  api.set_status(kName, kComplete);
  auto ex = make_kubernetes_executor(cluster(api.port));
  ASSERT_TRUE(ex->adopt(kId, runtime, AdoptOptions{std::chrono::seconds(30)}));
  GangStatus st = ex->poll(kId);
  EXPECT_EQ(to_string(st.phase), "preempted") << st.message;
  EXPECT_NE(st.message.find("stopped as asked"), std::string::npos) << st.message;
}

TEST(ControllerKubeExecutor, AStopRequestedBeforeAControllerRestartIsStillAStopWhenTheJobIsGone) {
  FakeApiServer api("k8s-sa-token");
  json runtime;
  {
    auto ex = make_kubernetes_executor(cluster(api.port));
    runtime = ex->start(gang(2, 1, 0)).runtime;
    ex->stop(kId, std::chrono::seconds(30));
  }
  api.collect(kName);  // the pods checkpointed and the Job went while the controller was down
  // The scheduler had asked the gang to stop (Job::stop, persisted with the job).
  auto ex = make_kubernetes_executor(cluster(api.port));
  ASSERT_TRUE(ex->adopt(kId, runtime, AdoptOptions{std::chrono::seconds(30), /*stop_requested=*/true}));
  GangStatus st = ex->poll(kId);
  EXPECT_EQ(to_string(st.phase), "preempted") << st.message;
  // Without the request the same disappearance is a lost gang.
  EXPECT_FALSE(make_kubernetes_executor(cluster(api.port))->adopt(kId, runtime, AdoptOptions{std::chrono::seconds(30)}));
}

TEST(ControllerKubeExecutor, AdoptingAStopRequestedGangRepeatsItsDelete) {
  FakeApiServer api("k8s-sa-token");
  json runtime = make_kubernetes_executor(cluster(api.port))->start(gang(1, 1, 0)).runtime;
  runtime["stop_requested"] = true;  // the controller died before its DELETE got through
  auto ex = make_kubernetes_executor(cluster(api.port));
  ASSERT_TRUE(ex->adopt(kId, runtime, AdoptOptions{std::chrono::seconds(30)}));
  std::lock_guard<std::mutex> l(api.mu);
  ASSERT_EQ(api.requests.back().first, "DELETE job");
  EXPECT_EQ(api.requests.back().second["propagationPolicy"], "Foreground");
  EXPECT_TRUE(api.jobs[kName]["metadata"].contains("deletionTimestamp"));
}

TEST(ControllerKubeExecutor, AServiceThatCannotBeCreatedTakesItsJobDown) {
  FakeApiServer api("k8s-sa-token");
  {  // under the server's lock: its handlers read it on their threads
    std::lock_guard<std::mutex> l(api.mu);
    api.service_post_status = 403;
  }
  auto ex = make_kubernetes_executor(cluster(api.port));
  try {
    ex->start(gang(1, 1, 0));
    ADD_FAILURE() << "started without its Service";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP 403"), std::string::npos) << e.what();
  }
  std::lock_guard<std::mutex> l(api.mu);
  ASSERT_EQ(api.requests.back().first, "DELETE job");
  EXPECT_EQ(api.jobs.count(kName), 0u);  // no half-made gang left running
}

// --- the scheduler over the executor ---------------------------------------

namespace {

// A scheduler on a temp store and one region DE of two nodes, for an
// interruptible job of two nodes.
struct SchedulerRig {
  explicit SchedulerRig(Executor* ex) : clock(1764633600000) {
    store = std::make_unique<Store>(dir.file("c.db"));
    registry = std::make_unique<Registry>(*store, clock);
    registry->load();
    RegionConfig r;
    r.name = "DE";
    r.nodes = 2;
    r.executor = ex->kind();
    r.hourly = {20, 500, 20, 500, 500, 500, 500, 500, 500, 500, 500, 500,
                500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500};
    regions = {r};
    restart(ex);
  }
  // A controller (re)start: a new scheduler on the same store.
  void restart(Executor* ex) {
    SchedulerOptions so;
    so.backoff_base_ms = 10;
    so.stop_grace = std::chrono::seconds(30);
    so.status_url_base = "http://127.0.0.1:9";
    so.replan_period_ms = 0;
    sched = std::make_unique<Scheduler>(*registry, clock, regions, std::map<std::string, Executor*>{{"DE", ex}},
                                        nullptr, so);
  }
  std::string submit_interruptible() {
    json s = {{"name", "suspend-me"},
              {"worker", {{"data", {{"train", "t.bin"}}}}},
              {"regions", {"DE"}},
              {"nodes", 2},
              {"max_restarts", 2},
              {"interruptible", true},
              {"deadline", format_rfc3339(clock.now_ms() + 6 * carbon::kHourMs)},
              {"estimate", {{"duration_s", 7200}}}};
    return registry->submit("team-a", parse_job_spec(s), "").job.id();
  }
  // The job runs in two windows, [t0, t0+1h) and [t0+2h, t0+3h), whatever
  // the planner chose: the suspension, not the planner, is under test.
  void two_windows(const std::string& id) {
    const int64_t t0 = registry->get(id)->placement->start_ms, h = carbon::kHourMs;
    ASSERT_TRUE(registry->update(id, kAllTenants, [&](Job& j) {
      PlacementView pv = *j.placement;
      pv.windows = {{t0, t0 + h}, {t0 + 2 * h, t0 + 3 * h}};
      j.placement = pv;
      return true;
    }));
  }
  JobState state(const std::string& id) const { return registry->get(id)->state(); }
  std::vector<std::string> reasons(const std::string& id) const {
    std::vector<std::string> out;
    const Job j = *registry->get(id);
    for (auto& c : j.conditions()) out.push_back(c.reason);
    return out;
  }
  bool cycle_until(const std::string& id, JobState want, int max_cycles = 20) {
    for (int i = 0; i < max_cycles; ++i) {
      if (state(id) == want) return true;
      sched->cycle();
    }
    return state(id) == want;
  }

  gstest::TempDir dir;
  ManualClock clock;
  std::unique_ptr<Store> store;
  std::unique_ptr<Registry> registry;
  std::vector<RegionConfig> regions;
  std::unique_ptr<Scheduler> sched;
};

}  // namespace

TEST(ControllerKubeScheduler, ASuspensionIsNotAFailure) {
  FakeApiServer api("k8s-sa-token");
  auto ex = make_kubernetes_executor(cluster(api.port));
  SchedulerRig rig(ex.get());
  const std::string id = rig.submit_interruptible();
  ASSERT_TRUE(rig.cycle_until(id, JobState::kRunning));
  rig.two_windows(id);
  const std::string name = "gs-" + id + "-0";
  api.set_status(name, {{"active", 2}, {"ready", 2}});
  rig.sched->cycle();
  rig.clock.advance_ms(carbon::kHourMs);  // the first window closes
  rig.sched->cycle();                 // the scheduler deletes the Job
  {
    std::lock_guard<std::mutex> l(api.mu);
    ASSERT_EQ(api.requests.back().first, "DELETE job");
    ASSERT_TRUE(api.jobs.at(name)["metadata"].contains("deletionTimestamp"));
  }
  rig.sched->cycle();  // pods still checkpointing: nothing changes
  EXPECT_EQ(rig.state(id), JobState::kRunning);
  api.collect(name);  // the pods ended; the Job is gone (GET answers 404)
  rig.sched->cycle();
  Job j = *rig.registry->get(id);
  EXPECT_EQ(to_string(j.state()), to_string(JobState::kSuspended)) << j.conditions().back().message;
  EXPECT_EQ(j.conditions().back().reason, "WindowClosed");
  EXPECT_EQ(j.recovery_count, 0);  // no restart used
  for (const auto& r : rig.reasons(id)) EXPECT_NE(r, "GangFailed");
  // The next window resumes it as a new Job.
  rig.clock.advance_ms(carbon::kHourMs);
  ASSERT_TRUE(rig.cycle_until(id, JobState::kRunning));
  EXPECT_EQ(rig.reasons(id)[rig.reasons(id).size() - 2], "Resumed");
  std::lock_guard<std::mutex> l(api.mu);
  EXPECT_EQ(api.jobs.count(name), 1u);
}

TEST(ControllerKubeScheduler, ASuspensionAcrossAControllerRestartIsNotAFailure) {
  FakeApiServer api("k8s-sa-token");
  auto ex = make_kubernetes_executor(cluster(api.port));
  SchedulerRig rig(ex.get());
  const std::string id = rig.submit_interruptible();
  ASSERT_TRUE(rig.cycle_until(id, JobState::kRunning));
  rig.two_windows(id);
  const std::string name = "gs-" + id + "-0";
  api.set_status(name, {{"active", 2}, {"ready", 2}});
  rig.clock.advance_ms(carbon::kHourMs);
  rig.sched->cycle();  // asked to stop
  // The controller restarts while the pods checkpoint; they end meanwhile.
  auto ex2 = make_kubernetes_executor(cluster(api.port));
  rig.restart(ex2.get());
  rig.sched->recover();
  api.collect(name);
  rig.sched->cycle();
  Job j = *rig.registry->get(id);
  EXPECT_EQ(to_string(j.state()), to_string(JobState::kSuspended)) << j.conditions().back().message;
  EXPECT_EQ(j.recovery_count, 0);
}

TEST(ControllerFakeScheduler, ASuspensionIsNotAFailure) {
  ctltest::FakeExecutor ex;
  SchedulerRig rig(&ex);
  const std::string id = rig.submit_interruptible();
  ASSERT_TRUE(rig.cycle_until(id, JobState::kRunning));
  rig.two_windows(id);
  ASSERT_EQ(ex.starts().size(), 1u);
  EXPECT_EQ(ex.starts()[0].job_id, id);
  EXPECT_EQ(ex.starts()[0].attempt, 0);
  rig.clock.advance_ms(carbon::kHourMs);  // the window closes; the gang checkpoints and stops
  rig.sched->cycle();
  ASSERT_EQ(ex.stops().size(), 1u);
  EXPECT_EQ(ex.stops()[0].first, id);
  Job j = *rig.registry->get(id);
  EXPECT_EQ(to_string(j.state()), to_string(JobState::kSuspended)) << j.conditions().back().message;
  EXPECT_EQ(j.recovery_count, 0);
  rig.clock.advance_ms(carbon::kHourMs);
  ASSERT_TRUE(rig.cycle_until(id, JobState::kRunning));
  ASSERT_EQ(ex.starts().size(), 2u);
  EXPECT_EQ(ex.starts()[1].attempt, 0);  // a resumption is not a restart
}

// --- cluster connection: kubeconfig and in-cluster service account ---------

namespace {

// A self-signed certificate for 127.0.0.1 (real openssl).
void make_cert(const gstest::TempDir& d, const std::string& stem) {
  auto r = gstest::run_process({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                                d.file(stem + ".key"), "-out", d.file(stem + ".crt"), "-days", "1", "-subj",
                                "/CN=kube-apiserver", "-addext", "subjectAltName=IP:127.0.0.1"},
                               {}, std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string base64(const std::string& in) { return controller::base64_encode(in, controller::Base64::kStandard); }

std::string kubeconfig(const std::string& server, const std::string& cluster_extra, const std::string& user) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: gpu\n"
         "contexts:\n  - name: other\n    context: {cluster: nowhere, user: nobody}\n"
         "  - name: gpu\n    context: {cluster: eu, user: ctl, namespace: training}\n"
         "clusters:\n  - name: eu\n    cluster:\n      server: " + server + "\n" + cluster_extra +
         "users:\n  - name: ctl\n    user:\n" + user;
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST(ControllerKubeConfig, InlineCertificateAuthorityDataReachesATlsApiServer) {
  gstest::TempDir d;
  make_cert(d, "api");
  make_cert(d, "stranger");
  FakeApiServer api("kc-token", d.file("api.crt"), d.file("api.key"));
  const std::string server = "https://127.0.0.1:" + std::to_string(api.port);
  KubeClusterConfig k = parse_kubeconfig(
      kubeconfig(server, "      certificate-authority-data: " + base64(slurp(d.file("api.crt"))) + "\n",
                 "      token: kc-token\n"),
      "kc", d.file("ca"));
  EXPECT_EQ(k.server, server);
  EXPECT_EQ(k.namespace_, "training");
  EXPECT_EQ(k.token, "kc-token");
  EXPECT_FALSE(k.insecure_skip_verify);
  EXPECT_EQ(slurp(k.ca_file), slurp(d.file("api.crt")));  // the decoded CA, as a file under ca_dir
  EXPECT_EQ(k.ca_file.rfind(d.file("ca") + "/", 0), 0u) << k.ca_file;
  k.image = "registry.example/greenshard-worker:0.1";
  EXPECT_EQ(make_kubernetes_executor(k)->start(gang(1, 1, 0)).phase, GangPhase::kStarting);
  {
    std::lock_guard<std::mutex> l(api.mu);
    EXPECT_EQ(api.requests.size(), 3u);
  }
  // The same server is refused under another CA: the CA is really used.
  KubeClusterConfig wrong = parse_kubeconfig(
      kubeconfig(server, "      certificate-authority-data: " + base64(slurp(d.file("stranger.crt"))) + "\n",
                 "      token: kc-token\n"),
      "kc", d.file("ca"));
  EXPECT_NE(wrong.ca_file, k.ca_file);
  EXPECT_THROW(make_kubernetes_executor(wrong)->start(gang(1, 1, 0, 1)), std::runtime_error);
}

TEST(ControllerKubeConfig, AFileCaAndATokenFileAreRead) {
  gstest::TempDir d;
  std::ofstream(d.file("token")) << "file-token\n";
  std::ofstream(d.file("kubeconfig")) << kubeconfig(
      "https://10.0.0.1:6443/", "      certificate-authority: /etc/ca.crt\n      insecure-skip-tls-verify: true\n",
      "      tokenFile: " + d.file("token") + "\n");
  KubeClusterConfig k = read_kubeconfig_file(d.file("kubeconfig"));
  EXPECT_EQ(k.server, "https://10.0.0.1:6443");
  EXPECT_EQ(k.ca_file, "/etc/ca.crt");
  EXPECT_TRUE(k.insecure_skip_verify);
  EXPECT_EQ(k.token, "file-token");
  EXPECT_EQ(k.token_file, d.file("token"));
  EXPECT_THROW(read_kubeconfig_file(d.file("absent")), std::runtime_error);
}

struct BadKubeconfigCase {
  const char* sentence;
  std::string text;
  const char* error;
};

const std::string kOkCluster = "      certificate-authority: /etc/ca.crt\n";
const BadKubeconfigCase kBadKubeconfigs[] = {
    {"no current context", "clusters: []\n", "current-context: required"},
    {"a current context that is not listed", "current-context: gone\ncontexts: []\n", "contexts[gone]: no such entry"},
    {"a cluster without a server",
     "current-context: c\ncontexts: [{name: c, context: {cluster: x, user: u}}]\nclusters: [{name: x, cluster: {}}]\n",
     "clusters[x].cluster.server: required"},
    {"a server that is not a URL", kubeconfig("10.0.0.1:6443", kOkCluster, "      token: t\n"),
     "clusters[eu].cluster.server: '10.0.0.1:6443' is not an http(s) URL"},
    {"CA data that is not base64", kubeconfig("https://k", "      certificate-authority-data: '%%%'\n", "      token: t\n"),
     "clusters[eu].cluster.certificate-authority-data: not base64"},
    {"CA data that holds no certificate",
     kubeconfig("https://k", "      certificate-authority-data: " + base64("hello") + "\n", "      token: t\n"),
     "clusters[eu].cluster.certificate-authority-data: holds no PEM certificate"},
    {"both a CA file and CA data",
     kubeconfig("https://k", kOkCluster + "      certificate-authority-data: " + base64("x") + "\n", "      token: t\n"),
     "set certificate-authority or certificate-authority-data, not both"},
    {"a user without a token", kubeconfig("https://k", kOkCluster, "      username: admin\n"),
     "users[ctl].user: a token or tokenFile is required"},
    {"a token file that cannot be read", kubeconfig("https://k", kOkCluster, "      tokenFile: /nonexistent/token\n"),
     "users[ctl].user.tokenFile: cannot read '/nonexistent/token'"},
    {"a YAML syntax error", "current-context: [\n", "kubeconfig 'kc': "},
};

class BadKubeconfig : public ::testing::TestWithParam<BadKubeconfigCase> {};
TEST_P(BadKubeconfig, IsRefusedNamingTheKey) {
  const auto& c = GetParam();
  gstest::TempDir d;
  try {
    parse_kubeconfig(c.text, "kc", d.file("ca"));
    FAIL() << "accepted:\n" << c.text;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(c.error), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("kubeconfig 'kc': ", 0), 0u) << e.what();
  }
}
INSTANTIATE_TEST_SUITE_P(ControllerKubeConfig, BadKubeconfig, ::testing::ValuesIn(kBadKubeconfigs),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerKubeConfig, InClusterUsesTheServiceAccountAndTheServiceEnvironment) {
  gstest::TempDir d;
  make_cert(d, "api");
  // A fake service account directory, as the kubelet mounts it.
  std::filesystem::create_directories(d.file("sa"));
  std::ofstream(d.file("sa/token")) << "sa-token\n";
  std::filesystem::copy_file(d.file("api.crt"), d.file("sa/ca.crt"));
  std::ofstream(d.file("sa/namespace")) << "greenshard-jobs";
  FakeApiServer api("sa-token", d.file("api.crt"), d.file("api.key"));
  {
    ScopedEnv h("KUBERNETES_SERVICE_HOST", "127.0.0.1");
    ScopedEnv p("KUBERNETES_SERVICE_PORT", std::to_string(api.port).c_str());
    KubeClusterConfig k = in_cluster_config_at(d.file("sa"));
    EXPECT_EQ(k.server, "https://127.0.0.1:" + std::to_string(api.port));
    EXPECT_EQ(k.token, "sa-token");
    EXPECT_EQ(k.ca_file, d.file("sa/ca.crt"));
    EXPECT_EQ(k.namespace_, "greenshard-jobs");
    k.image = "registry.example/greenshard-worker:0.1";
    EXPECT_EQ(make_kubernetes_executor(k)->start(gang(1, 1, 0)).phase, GangPhase::kStarting);
    std::lock_guard<std::mutex> l(api.mu);
    EXPECT_EQ(api.requests.at(0).second["metadata"]["namespace"], "greenshard-jobs");
  }
  {
    ScopedEnv h("KUBERNETES_SERVICE_HOST", "fd00::1");
    ScopedEnv p("KUBERNETES_SERVICE_PORT", "443");
    EXPECT_EQ(in_cluster_config_at(d.file("sa")).server, "https://[fd00::1]:443");
    auto fails_with = [&](const std::string& dir, const std::string& want) {
      try {
        in_cluster_config_at(dir);
        ADD_FAILURE() << "accepted " << dir;
      } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      }
    };
    fails_with(d.file("nowhere"), d.file("nowhere/token"));
    std::filesystem::create_directories(d.file("badca"));
    std::ofstream(d.file("badca/token")) << "t";
    std::ofstream(d.file("badca/ca.crt")) << "not a certificate";
    fails_with(d.file("badca"), "holds no PEM certificate");
  }
  {
    ScopedEnv h("KUBERNETES_SERVICE_HOST", nullptr);
    ScopedEnv p("KUBERNETES_SERVICE_PORT", "443");
    try {
      in_cluster_config_at(d.file("sa"));
      ADD_FAILURE() << "accepted without KUBERNETES_SERVICE_HOST";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("KUBERNETES_SERVICE_HOST"), std::string::npos) << e.what();
    }
  }
}

// --- a region's kubernetes: block -------------------------------------------

namespace {

struct RegionKubeCase {
  const char* sentence;
  std::string block;  // the region's kubernetes: map, flow style; KC = the kubeconfig's path
  std::string ns, image, queue, claim, server;
};

void PrintTo(const RegionKubeCase& c, std::ostream* os) { *os << c.sentence; }

const RegionKubeCase kRegionKube[] = {
    {"namespace and image written before the kubeconfig are kept",
     "{namespace: team-a, image: 'reg/w:1', queue_name: q, checkpoint_claim: ck, kubeconfig: KC}", "team-a", "reg/w:1",
     "q", "ck", "https://eu.example:6443"},
    {"namespace and image written after the kubeconfig are kept",
     "{kubeconfig: KC, namespace: team-a, image: 'reg/w:1', queue_name: q, checkpoint_claim: ck}", "team-a", "reg/w:1",
     "q", "ck", "https://eu.example:6443"},
    {"the kubeconfig context's namespace when the region names none", "{image: 'reg/w:1', kubeconfig: KC}", "training",
     "reg/w:1", "", "", "https://eu.example:6443"},
    {"keys written before in_cluster are kept", "{namespace: team-b, queue_name: q, in_cluster: true}", "team-b", "",
     "q", "", "https://10.96.0.1:443"},
    {"in_cluster's namespace when the region names none", "{image: 'reg/w:2', in_cluster: true}", "greenshard-jobs",
     "reg/w:2", "", "", "https://10.96.0.1:443"},
};

}  // namespace

class RegionKube : public ::testing::TestWithParam<RegionKubeCase> {};
TEST_P(RegionKube, KeepsEveryKeyWhereverItIsWritten) {
  const RegionKubeCase& c = GetParam();
  gstest::TempDir d;
  make_cert(d, "api");
  std::filesystem::create_directories(d.file("sa"));
  std::ofstream(d.file("sa/token")) << "sa-token\n";
  std::filesystem::copy_file(d.file("api.crt"), d.file("sa/ca.crt"));
  std::ofstream(d.file("sa/namespace")) << "greenshard-jobs";
  std::ofstream(d.file("kc")) << kubeconfig("https://eu.example:6443", "", "      token: kc-token\n");
  ScopedEnv h("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv p("KUBERNETES_SERVICE_PORT", "443");
  std::string block = c.block;
  if (const size_t at = block.find("KC"); at != std::string::npos) block.replace(at, 2, d.file("kc"));
  RegionsFileOptions o;
  o.service_account_dir = d.file("sa");
  auto regions = parse_regions_yaml("regions:\n  - {name: eu, executor: kubernetes, kubernetes: " + block + "}\n", "r.yaml", o);
  ASSERT_EQ(regions.size(), 1u);
  const KubeClusterConfig& k = regions[0].kube;
  EXPECT_EQ(k.namespace_, c.ns);
  EXPECT_EQ(k.image, c.image);
  EXPECT_EQ(k.queue_name, c.queue);
  EXPECT_EQ(k.checkpoint_claim, c.claim);
  EXPECT_EQ(k.server, c.server);
  EXPECT_FALSE(k.token.empty());
}
INSTANTIATE_TEST_SUITE_P(ControllerKubeRegions, RegionKube, ::testing::ValuesIn(kRegionKube),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerKubeRegions, KubeconfigAndInClusterTogetherAreRefused) {
  try {
    parse_regions_yaml("regions:\n  - {name: eu, executor: kubernetes, kubernetes: {kubeconfig: /x, in_cluster: true}}\n",
                       "r.yaml");
    FAIL() << "accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("r.yaml: regions[0].kubernetes: set kubeconfig or in_cluster, not both"),
              std::string::npos)
        << e.what();
  }
}

// --- a region's checkpoint_s3 block -----------------------------------------

namespace {

std::string s3_regions_yaml(const std::string& block, const std::string& more = "") {
  return "regions:\n  - {name: eu, executor: kubernetes, kubernetes: {server: 'https://k.example:6443'" + more +
         ", checkpoint_s3: " + block + "}}\n";
}

struct GoodS3Case {
  const char* sentence;
  std::string block;
  std::string url, endpoint, region, secret;
};
void PrintTo(const GoodS3Case& c, std::ostream* os) { *os << c.sentence; }

const GoodS3Case kGoodS3[] = {
    {"every key is kept as written",
     "{url: 's3://greenshard-ckpt/runs/team-a', endpoint: 'https://minio.example:9000', region: us-east-1, "
     "secret: greenshard-s3}",
     "s3://greenshard-ckpt/runs/team-a", "https://minio.example:9000", "us-east-1", "greenshard-s3"},
    {"trailing slashes are dropped", "{url: 's3://ckpt.bucket-1/', endpoint: 'http://10.0.0.5:9000/', secret: s3}",
     "s3://ckpt.bucket-1", "http://10.0.0.5:9000", "", "s3"},
    {"an IPv6 endpoint", "{url: 's3://abc', endpoint: 'http://[fd00::5]:9000', region: eu_west, secret: a.b}",
     "s3://abc", "http://[fd00::5]:9000", "eu_west", "a.b"},
    {"without a region the worker's default applies",
     "{secret: greenshard-s3, endpoint: 'https://s3.us-east-1.amazonaws.com', "
     "url: \"s3://greenshard-ckpt/a/b_c/d.e/(x)'!*\"}",
     "s3://greenshard-ckpt/a/b_c/d.e/(x)'!*", "https://s3.us-east-1.amazonaws.com", "", "greenshard-s3"},
};

struct BadS3Case {
  const char* sentence;
  std::string block, more;  // more: other keys of the kubernetes: block
  std::string error;        // a substring of the message
  std::string never = "";   // must not appear in the message
};
void PrintTo(const BadS3Case& c, std::ostream* os) { *os << c.sentence; }

const std::string kS3At = "r.yaml: regions[0].kubernetes.checkpoint_s3";

const BadS3Case kBadS3[] = {
    {"a URL of another scheme", "{url: 'https://greenshard-ckpt/x', endpoint: 'https://s3.example', secret: s}", "",
     kS3At + ".url: must be s3://bucket[/prefix], got 'https://greenshard-ckpt/x'"},
    {"a URL without a bucket", "{url: 's3:///x', endpoint: 'https://s3.example', secret: s}", "", kS3At + ".url: must be s3://bucket[/prefix]"},
    {"a bucket of two characters", "{url: 's3://ab', endpoint: 'https://s3.example', secret: s}", "", kS3At + ".url: bucket 'ab' must be 3-63 characters"},
    {"a bucket of 64 characters", "{url: 's3://" + std::string(64, 'b') + "', endpoint: 'https://s3.example', secret: s}", "",
     kS3At + ".url: bucket '" + std::string(64, 'b') + "' must be 3-63 characters"},
    {"a bucket with capitals", "{url: 's3://GreenShard', endpoint: 'https://s3.example', secret: s}", "",
     kS3At + ".url: bucket 'GreenShard' may hold only lowercase letters, digits, '.' and '-'"},
    {"a bucket with an underscore", "{url: 's3://green_shard', endpoint: 'https://s3.example', secret: s}", "",
     kS3At + ".url: bucket 'green_shard' may hold only"},
    {"a bucket ending in a dash", "{url: 's3://greenshard-/x', endpoint: 'https://s3.example', secret: s}", "",
     kS3At + ".url: bucket 'greenshard-' must begin and end with a letter or digit"},
    {"a bucket with two dots in a row", "{url: 's3://green..shard', endpoint: 'https://s3.example', secret: s}", "",
     kS3At + ".url: bucket 'green..shard' must not hold '..'"},
    {"a bucket that is an IP address", "{url: 's3://192.168.10.1', endpoint: 'https://s3.example', secret: s}", "",
     kS3At + ".url: bucket '192.168.10.1' must not be an IP address"},
    {"a prefix with an empty segment", "{url: 's3://greenshard/a//b', endpoint: 'https://s3.example', secret: s}", "",
     kS3At + ".url: prefix 'a//b' has an empty, '.' or '..' segment"},
    {"a prefix with a dot-dot segment", "{url: 's3://greenshard/a/../b', endpoint: 'https://s3.example', secret: s}", "",
     kS3At + ".url: prefix 'a/../b' has an empty"},
    {"a prefix with a query", "{url: 's3://greenshard/a?b=1', endpoint: 'https://s3.example', secret: s}", "",
     kS3At + ".url: prefix 'a?b=1' may hold only letters, digits"},
    {"an endpoint with a path", "{url: 's3://greenshard', endpoint: 'https://minio.example:9000/s3', secret: s}", "",
     kS3At + ".endpoint: must be http(s)://host[:port] (no path or query), got 'https://minio.example:9000/s3'"},
    {"an endpoint of another scheme", "{url: 's3://greenshard', endpoint: 'ftp://minio.example', secret: s}", "",
     kS3At + ".endpoint: must be http(s)://host[:port]"},
    {"an endpoint without a host", "{url: 's3://greenshard', endpoint: 'https://', secret: s}", "",
     kS3At + ".endpoint: must be http(s)://host[:port]"},
    {"an endpoint with a port out of range", "{url: 's3://greenshard', endpoint: 'http://minio:70000', secret: s}", "",
     kS3At + ".endpoint: port 70000 must be in [1, 65535]"},
    {"an endpoint with credentials, not echoed",
     "{url: 's3://greenshard', endpoint: 'https://AKIAEXAMPLE:wJalrXUtnFEMI@minio.example', secret: s}", "",
     kS3At + ".endpoint: must not hold user information", "wJalrXUtnFEMI"},
    {"a region with spaces", "{url: 's3://greenshard', region: 'us east 1', endpoint: 'https://s3.example', secret: s}", "",
     kS3At + ".region: 'us east 1' must be 1-64 letters, digits, '-' or '_'"},
    {"a secret that is not a DNS name", "{url: 's3://greenshard', endpoint: 'https://s3.example', secret: S3_Creds}", "",
     kS3At + ".secret: 'S3_Creds' is not a DNS-1123 subdomain (a Secret name)"},
    {"a URL without a secret", "{url: 's3://greenshard', endpoint: 'https://s3.example'}", "",
     kS3At + ".secret: required with url (a Secret with keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"},
    {"a URL without an endpoint", "{url: 's3://greenshard', region: us-east-1, secret: s}", "",
     kS3At + ".endpoint: required with url (http(s)://host[:port] of the S3 API"},
    {"a secret without a URL", "{secret: greenshard-s3}", "", kS3At + ".url: required"},
    {"an endpoint and region alone", "{endpoint: 'https://s3.example', region: us-east-1}", "", kS3At + ".url: required"},
    {"an empty block", "{}", "", kS3At + ".url: required"},
    {"an unknown key", "{bucket: greenshard, url: 's3://greenshard', secret: s}", "",
     "r.yaml: unknown key 'regions[0].kubernetes.checkpoint_s3.bucket'"},
    {"a list where the map belongs", "[s3://greenshard]", "", kS3At + ": expected a map"},
    {"a URL that is a map", "{url: {bucket: greenshard}, secret: s}", "", kS3At + ".url: wrong type"},
    {"a claim written before S3", "{url: 's3://greenshard', endpoint: 'https://s3.example', secret: s}", ", checkpoint_claim: ckpt",
     kS3At + ": set checkpoint_claim or checkpoint_s3, not both"},
};

}  // namespace

class RegionS3 : public ::testing::TestWithParam<GoodS3Case> {};
TEST_P(RegionS3, IsReadAndNormalised) {
  const auto& c = GetParam();
  auto regions = parse_regions_yaml(s3_regions_yaml(c.block), "r.yaml");
  ASSERT_EQ(regions.size(), 1u);
  const S3CheckpointConfig& s3 = regions[0].kube.checkpoint_s3;
  EXPECT_TRUE(s3.enabled());
  EXPECT_EQ(s3.url, c.url);
  EXPECT_EQ(s3.endpoint, c.endpoint);
  EXPECT_EQ(s3.region, c.region);
  EXPECT_EQ(s3.secret, c.secret);
  EXPECT_TRUE(regions[0].kube.checkpoint_claim.empty());
}
INSTANTIATE_TEST_SUITE_P(ControllerKubeRegions, RegionS3, ::testing::ValuesIn(kGoodS3),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

class BadRegionS3 : public ::testing::TestWithParam<BadS3Case> {};
TEST_P(BadRegionS3, IsRefusedNamingTheField) {
  const auto& c = GetParam();
  try {
    parse_regions_yaml(s3_regions_yaml(c.block, c.more), "r.yaml");
    FAIL() << "accepted: " << c.block;
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(c.error), std::string::npos) << msg;
    if (!c.never.empty()) {
      EXPECT_EQ(msg.find(c.never), std::string::npos) << msg;
    }
  }
}
INSTANTIATE_TEST_SUITE_P(ControllerKubeRegions, BadRegionS3, ::testing::ValuesIn(kBadS3),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerKubeRegions, AClaimWrittenAfterS3IsRefusedToo) {
  try {
    parse_regions_yaml("regions:\n  - name: eu\n    executor: kubernetes\n    kubernetes:\n"
                       "      server: https://k.example:6443\n"
                       "      checkpoint_s3: {url: 's3://greenshard', endpoint: 'https://s3.example', secret: s}\n"
                       "      checkpoint_claim: ckpt\n",
                       "r.yaml");
    FAIL() << "accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(kS3At + ": set checkpoint_claim or checkpoint_s3, not both"),
              std::string::npos)
        << e.what();
  }
}

// The chart's values (ci/s3-checkpoints-values.yaml) through the real helm,
// the controller's regions parser and the manifest: both S3 regions send a
// job to the same <url>/<job-id> (a job moved between them resumes), each
// with its own endpoint; the PVC region mounts its claim.
TEST(ControllerKubeRegions, TheChartsS3ValuesReachTheWorkerPods) {
  gstest::TempDir d;
  make_cert(d, "api");
  std::filesystem::create_directories(d.file("sa"));
  std::ofstream(d.file("sa/token")) << "sa-token\n";
  std::filesystem::copy_file(d.file("api.crt"), d.file("sa/ca.crt"));
  std::ofstream(d.file("sa/namespace")) << "greenshard";
  std::ofstream(d.file("kc")) << kubeconfig("https://us-west.example:6443", "", "      token: kc-token\n");
  ScopedEnv h("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv p("KUBERNETES_SERVICE_PORT", "443");
  std::string text = helm_config_file(
      "regions.yaml", {"-f", (kRepo / "charts/greenshard/ci/s3-checkpoints-values.yaml").string()});
  const std::string kc_path = "/etc/greenshard/clusters/us-west/kubeconfig";
  const size_t at = text.find(kc_path);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, kc_path.size(), d.file("kc"));
  RegionsFileOptions o;
  o.service_account_dir = d.file("sa");
  auto regions = parse_regions_yaml(text, "regions.yaml", o);
  ASSERT_EQ(regions.size(), 3u);
  struct Want {
    std::string dir, endpoint, claim;
  };
  const std::map<std::string, Want> want = {
      {"eu-central", {std::string("s3://greenshard-checkpoints/prod/") + kJob, "http://minio.minio.svc:9000", ""}},
      {"us-west", {std::string("s3://greenshard-checkpoints/prod/") + kJob, "https://minio.eu-central.example.com", ""}},
      {"eu-north", {std::string("/checkpoints/") + kJob, "", "greenshard-checkpoints"}},
  };
  json cases = json::array();
  for (const auto& r : regions) {
    ASSERT_TRUE(want.count(r.name)) << r.name;
    const Want& w = want.at(r.name);
    KubeObjects obj = render_kube_objects(gang(2, 1, 8), r.kube, std::chrono::seconds(60), "uid-1");
    const json& pod = obj.job["spec"]["template"]["spec"];
    EXPECT_EQ(env_of(obj.job, "GREENSHARD_CHECKPOINT_DIR")["value"], w.dir) << r.name;
    if (w.claim.empty()) {
      EXPECT_EQ(env_of(obj.job, "AWS_ENDPOINT_URL_S3")["value"], w.endpoint) << r.name;
      EXPECT_EQ(env_of(obj.job, "AWS_REGION")["value"], "us-east-1") << r.name;
      EXPECT_EQ(env_of(obj.job, "GREENSHARD_S3_SECRET_DIR")["value"], "/etc/greenshard/s3") << r.name;
      ASSERT_NE(find_named(pod["volumes"], "s3-credentials"), nullptr) << r.name;
      EXPECT_EQ((*find_named(pod["volumes"], "s3-credentials"))["secret"]["secretName"], "greenshard-s3");
    } else {
      EXPECT_EQ((*find_named(pod["volumes"], "checkpoints"))["persistentVolumeClaim"]["claimName"], w.claim);
      EXPECT_EQ(find_named(pod["volumes"], "s3-credentials"), nullptr) << r.name;
      EXPECT_TRUE(env_of(obj.job, "AWS_ENDPOINT_URL_S3").is_null()) << r.name;
    }
    cases.push_back(one_case(r.name, obj));
  }
  Validation v = validate_objects(cases);
  EXPECT_EQ(v.exit_code, 0) << v.output;
}
