// REST wire types: the job spec users submit, and the one error shape.
//
// Contract of parse_job_spec():
//   - the body must be a JSON object (a YAML body, application/yaml, is read
//     into JSON first with the same limits: parse_yaml_input);
//   - a type error names the field, the expected and the actual JSON type
//     ("estimate: expected an object, got array");
//   - every field is checked for type and range; an unknown field is an
//     error naming it ("nodez" -> field "nodez"); nested objects name the
//     path ("estimate.duration_s");
//   - structural problems are 400 "invalid_field"/"unknown_field"/"missing_field";
//     the spec is then self-consistent (home_region in regions, ...), and
//     anything that needs the controller's configuration (known regions,
//     capacity) is checked later by the API and reported as 422;
//   - elastic jobs: elastic.min_nodes <= nodes <= elastic.max_nodes, each in
//     [1, kMaxNodes]; scaling points have distinct widths >= 1, finite
//     tokens_per_second > 0, never falling as the width grows
//     (carbon::scaling_problem); an elastic or migratable job must resume
//     from its checkpoints (worker.checkpoint.resume not false). Whether a
//     migratable job's regions share a checkpoint location is a 422 of the
//     API (regions.h, shared_checkpoint_location);
//   - `worker` is passed to the worker unchanged (docs/worker-controller.md),
//     it must be an object no larger than kMaxWorkerPayload bytes; its fields
//     are checked by check_worker_spec() (POST /v1/jobs calls both; a stored
//     job is not re-checked when it is loaded).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace controller {

// An error the API renders as {"error": {"code", "message", "field"}}.
struct ApiError : std::runtime_error {
  int status;          // HTTP status: 400, 401, 403, 404, 409, 413, 422, 429
  std::string code;    // machine word: "invalid_field", "not_found", ...
  std::string field;   // offending field, flag or parameter ("" if none)
  ApiError(int status, std::string code, std::string message, std::string field = "")
      : std::runtime_error(std::move(message)), status(status), code(std::move(code)),
        field(std::move(field)) {}
  nlohmann::json to_json() const;
};

inline constexpr size_t kMaxWorkerPayload = 64 * 1024;
inline constexpr int kMaxNodes = 256;          // nodes, elastic.min_nodes, elastic.max_nodes
inline constexpr size_t kMaxScalingPoints = 64;

// One point of a declared scaling curve: the job's whole-gang throughput
// when it runs on `nodes` nodes.
struct ScalingPointSpec {
  int nodes = 0;
  double tokens_per_second = 0;
  bool operator==(const ScalingPointSpec&) const = default;
};
inline constexpr size_t kMaxBodyBytes = 256 * 1024;

struct JobSpec {
  std::string name;                  // DNS-1123 label, 1..40 chars
  std::string image;                 // worker image (kubernetes executor)
  nlohmann::json worker = nlohmann::json::object();  // the worker's job.json
  int nodes = 1;                     // 1..256
  int procs_per_node = 1;            // 1..64
  int gpus_per_node = 0;             // 0..16
  std::vector<std::string> regions;  // allowed regions (non-empty)
  std::string home_region;           // default: regions[0]; must be in regions
  int64_t deadline_ms = 0;           // unix ms, 0 = none (from RFC 3339 "deadline")
  int64_t max_delay_s = -1;          // -1 = none; mutually exclusive with deadline
  bool interruptible = false;
  int priority = 0;                  // -1000..1000, higher first
  int max_restarts = 3;              // 0..100
  double duration_s = 3600;          // estimate.duration_s  (placement input)
  double power_watts = 300;          // estimate.power_watts per node
  double checkpoint_gb = 0;          // estimate.checkpoint_gb (a move sends it; 0 = placement's default)
  // Elastic and migratable jobs (docs/elastic.md). elastic.min_nodes /
  // elastic.max_nodes: the widths placement may run the job at (0 = nodes:
  // not elastic); `nodes` is the nominal width, the one estimate.duration_s
  // is for. migratable: it may move between its allowed regions at a window
  // boundary (only between regions sharing one checkpoint location, checked
  // against the controller's regions: 422). scaling: a declared curve of
  // whole-gang tokens/s by width (empty: measured, else linear).
  int min_nodes = 0;
  int max_nodes = 0;
  bool migratable = false;
  std::vector<ScalingPointSpec> scaling;

  int min_width() const { return min_nodes > 0 ? min_nodes : nodes; }
  int max_width() const { return max_nodes > 0 ? max_nodes : nodes; }
  // Placement may change its width or region between windows.
  bool elastic() const { return min_width() != nodes || max_width() != nodes || migratable; }

  // Canonical JSON (every field, defaults filled in; `elastic`, `migratable`,
  // `scaling` and estimate.checkpoint_gb only when set, so a spec without
  // them keeps the canonical form and hash it had before they existed).
  // parse_job_spec of this yields an equal spec.
  nlohmann::json to_json() const;
};

// Parses and validates a submitted spec (see the contract above). Throws ApiError.
JobSpec parse_job_spec(const nlohmann::json& body);
// Checks `worker` with the worker's own job-spec schema (worker/config.h):
// unknown fields, types, ranges and cross-field rules, as greenshard-worker
// checks its job.json at start. Throws ApiError 400 whose field is the
// worker field prefixed with "worker." ("worker.sharding.strategy"); code
// "unknown_field" for a field the worker does not know, else "invalid_field".
void check_worker_spec(const nlohmann::json& worker);
// Parses text as JSON (or, with `yaml`, as YAML through yaml_to_json) then
// calls parse_job_spec. Throws ApiError (400 "invalid_json"/"invalid_yaml"
// for a syntax error, 400 "too_deep" for nesting past kMaxNestingDepth, 413
// for more than kMaxBodyBytes).
JobSpec parse_job_spec_text(std::string_view text, bool yaml = false);

// Outside input: every JSON or YAML document a client sends is read by one
// of these two, which refuse a document nested deeper than kMaxNestingDepth
// arrays/objects (400 "too_deep", field: the path of object keys to the
// container that is too deep, e.g. "worker.model"; "" for the top level:
// "worker.model: nested deeper than 64 levels") while reading it, before
// anything recurses over it (copy, dump(), yaml_to_json, the worker
// schema). A syntax error is 400 "invalid_json" / "invalid_yaml"; a YAML
// document whose aliases expand past kMaxBodyBytes nodes is 400 too.
inline constexpr int kMaxNestingDepth = 64;
nlohmann::json parse_json_input(std::string_view text);
nlohmann::json parse_yaml_input(std::string_view text);
// The one depth check both readers use: throws the 400 above when depth
// (1 = inside the top-level container) exceeds kMaxNestingDepth; `path` are
// the object keys leading to the container.
void check_nesting_depth(int depth, const std::vector<std::string>& path);

// Untrusted text (a path, a parameter, a header, a field value) for an error
// message: single-quoted, at most max_bytes of input, bytes that are not
// printable ASCII or valid UTF-8 shown as \xNN, control characters too, and
// "..." when cut. The result is always valid UTF-8.
std::string quote_untrusted(std::string_view s, size_t max_bytes = 64);

// RFC 3339 UTC ("2026-12-02T17:00:00Z", optional fraction and +hh:mm offset)
// -> unix ms; nullopt when malformed.
std::optional<int64_t> parse_rfc3339(std::string_view s);
std::string format_rfc3339(int64_t unix_ms);

// Hex SHA-256.
std::string sha256_hex(std::string_view data);

}  // namespace controller
