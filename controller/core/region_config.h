// A region's configuration as the regions file gives it (RegionConfig) and
// the cluster and checkpoint settings of its executor (KubeClusterConfig,
// S3CheckpointConfig): plain data, parsed and checked by config/regions.h
// (whose comment shows the file), used by the executors, the scheduler and
// the API.
#pragma once

#include <string>
#include <vector>

namespace controller {

// Checkpoints in S3-compatible object storage (validated by
// parse_regions_yaml; see the kubernetes: block in config/regions.h). Worker pods get
// GREENSHARD_CHECKPOINT_DIR=<url>/<job-id>, AWS_ENDPOINT_URL_S3, AWS_REGION (when set),
// and the Secret mounted read-only at /etc/greenshard/s3
// (GREENSHARD_S3_SECRET_DIR): credentials never appear in the pod spec.
struct S3CheckpointConfig {
  std::string url;       // s3://bucket[/prefix], no trailing '/' ("" = not configured)
  std::string endpoint;  // http(s)://host[:port], no trailing '/' (required with url)
  std::string region;    // "" = the worker's default (us-east-1)
  std::string secret;    // Secret name (DNS-1123 subdomain)
  bool enabled() const { return !url.empty(); }
};

struct KubeClusterConfig {
  std::string server;      // https://host:port or http://host:port (tests)
  std::string ca_file;
  std::string token;       // bearer token (read from token_file)
  std::string token_file;
  std::string namespace_ = "default";
  std::string image;       // default worker image
  std::string checkpoint_claim;  // PVC mounted at /checkpoints ("" = emptyDir)
  S3CheckpointConfig checkpoint_s3;  // instead of the claim (both set is an error)
  std::string queue_name;  // Kueue LocalQueue: Jobs are created suspended for Kueue
  int rendezvous_port = 29500;
  bool insecure_skip_verify = false;
};

struct RegionConfig {
  std::string name;
  double pue = 1.0;
  int nodes = 1;
  int gpus_per_node = 0;
  std::string executor = "local";
  double intensity = 400;
  std::vector<double> hourly;  // 24 values or empty
  std::string zone;            // a zone of the intensity source ("DE", "GB", ...)
  std::string hardware;        // carbon/ hardware profile (hardware file), "" = none given
  KubeClusterConfig kube;
};

}  // namespace controller
