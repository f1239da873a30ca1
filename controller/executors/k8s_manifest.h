// The Kubernetes executor's manifests (k8s_manifest.cpp): the worker
// defaults file and the pure rendering of a gang's Job, Service and
// ConfigMap. What they hold and what the defaults may set: executor_k8s.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "controller/core/region_config.h"
#include "controller/executors/executor.h"

namespace controller {

struct KubeObjects {
  std::string name;          // Job, Service and ConfigMap name
  nlohmann::json job, service, config_map;
};

struct WorkerDefaults {
  std::string image, image_pull_policy;
  nlohmann::json image_pull_secrets = nlohmann::json::array();
  std::optional<int64_t> termination_grace_s;
  std::optional<bool> automount_service_account_token;
  nlohmann::json resources = nlohmann::json::object();  // {requests?, limits?}: quantity strings
  nlohmann::json env = nlohmann::json::array();
  nlohmann::json volumes = nlohmann::json::array(), volume_mounts = nlohmann::json::array();
  nlohmann::json pod_security_context = nlohmann::json::object(),
                 security_context = nlohmann::json::object(),
                 node_selector = nlohmann::json::object(),
                 tolerations = nlohmann::json::array(),
                 affinity = nlohmann::json::object();
  std::string priority_class_name;
};

// Parses worker-defaults.yaml (YAML or JSON text); throws std::runtime_error
// "<origin>: <key path>: <problem>".
WorkerDefaults parse_worker_defaults(const std::string& text, const std::string& origin);
WorkerDefaults load_worker_defaults_file(const std::string& path);
// The file named by $GREENSHARD_WORKER_DEFAULTS_FILE (empty defaults when the
// variable is unset or empty); throws like parse_worker_defaults.
WorkerDefaults worker_defaults_from_env();

// Pure rendering (no I/O). `job_uid` is the created Job's uid for the
// owner references ("" renders none; the executor creates the Job first).
KubeObjects render_kube_objects(const GangSpec& gang, const KubeClusterConfig& cluster,
                                std::chrono::milliseconds grace, const std::string& job_uid = "",
                                const WorkerDefaults& defaults = {});
// "gs-<id>-<attempt>".
std::string kube_name(const std::string& job_id, int attempt);

}  // namespace controller
