// The worker's job spec: every field, its default, its documentation and its
// validation in one table (config.cpp). Sources, later ones overriding:
// defaults < the --config file (JSON or YAML) < GREENSHARD_* environment
// (docs/worker-controller.md) < command-line flags (--section.field VALUE).
// No LibTorch here.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker/spec/model_shape.h"

namespace greenshard {

// Bad input: the message names the field (or flag, or variable).
struct ConfigError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
  ConfigError(const std::string& message, std::string field_path)
      : std::invalid_argument(message), field(std::move(field_path)) {}
  // The job-spec field at fault ("model.embd", "sharding.strategy"), when the
  // error is about one (the controller names it in its 400 answer).
  std::string field;
};

// greenshard-worker prints a configuration error (exit 2) as one line on
// stderr starting with this; the local executor reads that line back into
// the job's failure_reason (docs/worker-controller.md).
inline constexpr const char* kConfigErrorPrefix = "greenshard-worker: config error: ";
// The worker's configuration error in a log text: the last line starting
// with kConfigErrorPrefix, without the prefix, cut to at most `max_bytes`
// (ending "..."); "" when there is none. The executors (local log files,
// Kubernetes termination messages) read it back with this.
std::string config_error_in(const std::string& log_text, size_t max_bytes = 512);

// The largest vocabulary the trainer takes (model.vocab); prepare checks a
// tokenizer against it too (worker/tokenizer.h).
inline constexpr int64_t kMaxVocab = 65536;

struct JobConfig {
  struct Model : ModelShape {
    Model() : ModelShape{4, 4, 128, 64, 256} {}
    double dropout = 0.0;
    std::string attention = "auto";  // auto | sdpa | explicit (worker/device.h)
  } model;
  struct Data {
    std::string train, val;
    uint64_t seed = 1234;
  } data;
  struct Optimizer {
    double lr = 3e-3, min_lr = 3e-4, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, grad_clip = 1.0;
    int64_t warmup_steps = 10;
  } optimizer;
  struct Schedule {
    int64_t steps = 100, batch_size = 8, grad_accum = 1, eval_interval = 25, eval_batches = 4;
  } schedule;
  struct Sharding {
    std::string strategy = "FULL_SHARD";
    std::string param_dtype = "auto";  // auto | float32 | bfloat16 (worker/device.h)
    int64_t limit_all_gathers = 2;
    int64_t hybrid_group_size = 0;
    bool activation_checkpointing = false;
    bool cpu_offload = false;
    double timeout_s = 180;
  } sharding;
  struct Checkpoint {
    std::string dir;          // "" = no checkpoints
    int64_t interval = 50;    // steps
    int64_t keep_last = 2;
    bool resume = true;       // resume from the newest DONE checkpoint in dir
    bool async = true;        // interval saves write in the background (training waits for the host copy only)
  } checkpoint;
  struct Metrics {
    int64_t port = 0;         // rank r listens on port + r; 0 = no exporter
    std::string bind = "0.0.0.0";
  } metrics;
  struct Carbon {
    std::string region = "unknown";
    double gco2_per_kwh = 400.0;
    std::string intensity_url;   // polled every intensity_poll_s when set
    double intensity_poll_s = 60.0;  // seconds between intensity_url polls
    double pue = 1.2;
    std::string hardware = "auto";  // auto (from the device) or a carbon/ profile
    double cpu_tdp_watts = 65.0;  // modelled CPU power when RAPL is unreadable
    double resources = 1.0;       // GPUs (or CPU sockets) reserved per rank
  } carbon;
  struct Log {
    std::string format = "text";  // text | json
    int64_t every = 1;            // steps between log lines
  } log;
  struct Status {
    std::string url, token;
    double interval_s = 5.0;
  } status;
  std::string device = "auto";   // auto | cpu | cuda (worker/device.h)
  double peak_flops = 0;         // per rank, for MFU; 0 = from the device
  std::string summary_path;
  // Kubernetes terminationMessagePath: rank 0 also writes a compact summary
  // there (state, steps, tokens, energy, grams; < 4096 bytes) so the
  // controller learns how the gang ended without reading the volume.
  std::string termination_log;
  std::string job_id = "greenshard";
  std::string export_path;       // consolidated state dict at the end ("" = none)
  std::string export_format = "libtorch";  // libtorch | torch_save
};

// Field paths ("model.layers", ...) with their help text, for --help.
struct FieldDoc {
  std::string path, type, default_value, help;
};
std::vector<FieldDoc> config_fields();

// Applies a JSON or YAML document (YAML is a superset: one parser). Unknown
// fields and wrong types throw ConfigError naming "file: field".
void apply_config_text(JobConfig& c, const std::string& text, const std::string& origin);
void apply_config_file(JobConfig& c, const std::string& path);
// One field by path from its text form ("--model.layers 4").
void apply_field(JobConfig& c, const std::string& path, const std::string& value, const std::string& origin);
// GREENSHARD_* variables of docs/worker-controller.md.
void apply_environment(JobConfig& c, const std::map<std::string, std::string>& env);
// Cross-field checks (ranges, files named, divisibility); throws ConfigError.
void validate(const JobConfig& c);
// The resolved config as JSON (--print-config; the checkpoint's record).
std::string to_json(const JobConfig& c, int indent = 2);

// The Kubernetes launch variables: what the controller's manifests set on a
// pod (controller/executors/k8s_manifest.cpp) and resolve_launch reads. A
// pod whose node runs more than one rank starts them itself, each with the
// torchrun variables (shard/rank_env.h).
inline constexpr const char* kPetNnodesVar = "PET_NNODES";
inline constexpr const char* kPetNprocPerNodeVar = "PET_NPROC_PER_NODE";
inline constexpr const char* kPetNodeRankVar = "PET_NODE_RANK";
inline constexpr const char* kPetMasterAddrVar = "PET_MASTER_ADDR";
inline constexpr const char* kPetMasterPortVar = "PET_MASTER_PORT";
inline constexpr const char* kJobCompletionIndexVar = "JOB_COMPLETION_INDEX";  // an Indexed Job's pod

// Where this process sits in the gang. From torchrun's variables, or from
// the Kubernetes ones (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK or
// JOB_COMPLETION_INDEX, PET_MASTER_ADDR, PET_MASTER_PORT), in which case this
// process starts nproc_per_node local ranks itself.
struct LaunchPlan {
  bool spawn_local = false;   // start nproc_per_node ranks (Kubernetes pod, or --nproc)
  int nproc_per_node = 1;
  int node_rank = 0;
  int nnodes = 1;
  std::string master_addr;
  int master_port = 0;
  bool standalone = false;    // no rendezvous variables at all: one rank
};
LaunchPlan resolve_launch(const std::map<std::string, std::string>& env, int nproc_flag);

std::map<std::string, std::string> environment_map();

}  // namespace greenshard
