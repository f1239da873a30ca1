#include "controller/api/openapi.h"

#include <map>

#include "controller/core/decision_outcome.h"
#include "controller/core/job.h"

namespace controller {

using json = nlohmann::json;

namespace {

json ref(const std::string& name) { return {{"$ref", "#/components/schemas/" + name}}; }

// The `enum` of a string schema: every value of a C++ enum, spelled by its
// to_string (one list, the type's own).
template <class E, size_t N>
json enum_of(const E (&all)[N]) {
  json values = json::array();
  for (E e : all) values.push_back(std::string(to_string(e)));
  return {{"type", "string"}, {"enum", values}};
}

json json_body(const json& schema) { return {{"application/json", {{"schema", schema}}}}; }

json ok(const std::string& desc, const std::string& schema) {
  return {{"description", desc}, {"content", json_body(ref(schema))}};
}

json text_ok(const std::string& desc, const std::string& media_type) {
  return {{"description", desc}, {"content", {{media_type, {{"schema", {{"type", "string"}}}}}}}};
}

json id_param() {
  return {{"name", "id"}, {"in", "path"}, {"required", true}, {"description", "the job's id"},
          {"schema", {{"type", "string"}, {"pattern", "^[a-z0-9]{1,64}$"}}}};
}

json query(const std::string& name, const json& schema, const std::string& desc) {
  return {{"name", name}, {"in", "query"}, {"required", false}, {"schema", schema},
          {"description", desc}};
}

// What a request to an operation can be answered with besides its success:
// status -> why (each an Error body, api.h's contract).
using Errors = std::map<int, std::string>;

// The error responses of one operation: `errors` (what its handler answers)
// and what the HTTP edge and the router may answer for any route, whatever
// its handler does (http_edge.h): 400 bad_request / invalid_header (a
// malformed request head or body framing), 405 (another method on this
// path; `Allow` lists the ones it has), 408 (a head or body not complete in
// time), 413 (a body over the limit), 414 (a request target over 8 KiB), 431
// (a head too large), 500 (an unexpected exception), 501 (a
// Transfer-Encoding other than chunked) and 503 overloaded (the request
// queue is full or too many connections are open; with Retry-After).
json error_responses(Errors errors) {
  auto add = [&](int status, const std::string& why) {
    std::string& d = errors[status];
    d += (d.empty() ? "" : "; ") + why;
  };
  add(400, "bad_request: a malformed HTTP request; invalid_header: Content-Length or Transfer-Encoding");
  add(405, "method_not_allowed: the path exists, not with this method (`Allow` lists its methods)");
  add(408, "request_timeout: the request's head or body did not arrive in time");
  add(413, "payload_too_large: the request body is over the limit");
  add(414, "uri_too_long: the request target is longer than 8 KiB");
  add(431, "header_too_large: the request head is too large");
  add(500, "internal: an unexpected error in the controller");
  add(501, "not_implemented: a Transfer-Encoding other than chunked");
  add(503, "overloaded: the server's request queue is full or too many connections are open; "
           "retry after Retry-After seconds");
  json r = json::object();
  for (const auto& [status, why] : errors) {
    json resp = {{"description", why}, {"content", json_body(ref("Error"))}};
    auto header = [&](const char* name, const char* desc, bool required) {
      resp["headers"][name] = {{"description", desc}, {"required", required}, {"schema", {{"type", "string"}}}};
    };
    if (status == 401) header("WWW-Authenticate", "Bearer", true);
    if (status == 405) header("Allow", "the methods this path has, comma-separated", true);
    if (status == 503) header("Retry-After", "overloaded: seconds to wait before retrying", false);
    r[std::to_string(status)] = resp;
  }
  return r;
}

// The errors of the routes that take a user or admin token (Principal via
// auth and the role check).
const char* kNoToken = "unauthenticated: missing, malformed or unknown bearer token";
const char* kWorkerToken = "forbidden: a worker token may not use this route";
const char* kUnknownParam = "unknown_parameter: a query parameter this route does not take (named in field)";
const char* kStore = "store_unavailable: the job store cannot be read or written";
const char* kNoJob = "not_found: no such job (or another tenant's)";

json merge(json a, const json& b) {
  for (auto& [k, v] : b.items()) a[k] = v;
  return a;
}

}  // namespace

json openapi_document() {
  json paths = json::object();

  paths["/v1/jobs"]["post"] = {
      {"operationId", "submitJob"},
      {"summary", "Submit a training job; honours Idempotency-Key; dryRun=true validates and authorizes only"},
      {"parameters", {{{"name", "Idempotency-Key"}, {"in", "header"}, {"required", false},
                       {"schema", {{"type", "string"}, {"maxLength", 128}}},
                       {"description", "same key + same body: the same job (200); another body: 409. "
                                       "A dry run checks only its syntax and neither looks it up nor records it"}},
                      query("dryRun", {{"type", "string"}, {"enum", {"true", "false"}}, {"default", "false"}},
                            "true: every check and error of a submit (authentication, role, parameters, "
                            "headers, body, regions), then nothing is stored or started and the answer is 200 "
                            "with the job as it would be created, `dryRun: true` and no id (as the Kubernetes "
                            "API's dryRun=All); any other value than true or false is 400 naming dryRun")}},
      {"requestBody", {{"required", true},
                       {"description", "JSON, or the same document in YAML (application/yaml; also spelled "
                                       "application/x-yaml or text/yaml)"},
                       {"content", {{"application/json", {{"schema", ref("JobSpec")}}},
                                    {"application/yaml", {{"schema", ref("JobSpec")}}}}}}},
      {"responses",
       merge({{"201", merge(ok("created", "Job"),
                            {{"headers", {{"Location", {{"description", "/v1/jobs/{id}"},
                                                        {"schema", {{"type", "string"}}}}}}}})},
              {"200", ok("idempotent replay, or (dryRun=true) the job as it would be created, "
                         "not stored: dryRun is true and id is empty",
                         "Job")}},
             error_responses({{400, "invalid_json, invalid_yaml: the body does not parse; invalid_body, invalid_field, "
                                    "unknown_field, missing_field, too_deep: the spec (field named, "
                                    "worker.<field> for the worker's own schema); invalid_parameter: dryRun; "
                                    "invalid_header: Idempotency-Key; " + std::string(kUnknownParam)},
                              {401, kNoToken},
                              {403, kWorkerToken},
                              {409, "idempotency_conflict: the key was used with another body; "
                                    "idempotency_in_progress: a submit with the key is in flight"},
                              {413, "payload_too_large: the body or its worker object is over the limit"},
                              {415, "unsupported_media_type: the body is neither application/json nor "
                                    "application/yaml"},
                              {422, "valid, but this controller cannot honour it: unknown_region, "
                                    "unschedulable, checkpoint_not_shared, deadline_passed"},
                              {429, "quota_exceeded: the tenant has its maximum of unfinished jobs"},
                              {503, kStore}}))}};
  paths["/v1/jobs"]["get"] = {
      {"operationId", "listJobs"},
      {"summary", "List jobs, oldest first, paginated"},
      {"parameters",
       {query("state", enum_of(kAllStates), "only jobs in this state"),
        query("tenant", {{"type", "string"}}, "admins: another tenant"),
        query("limit", {{"type", "integer"}, {"minimum", 1}, {"maximum", 1000}, {"default", 100}},
              "page size"),
        query("continue", {{"type", "string"}}, "opaque token from the previous page")}},
      {"responses",
       merge({{"200", ok("a page", "JobList")}},
             error_responses({{400, "invalid_parameter: state, limit or continue (named in field); " +
                                        std::string(kUnknownParam)},
                              {401, kNoToken},
                              {403, std::string(kWorkerToken) + "; forbidden: tenant (only admins list "
                                                                "other tenants' jobs)"},
                              {503, kStore}}))}};
  paths["/v1/jobs/{id}"]["get"] = {
      {"operationId", "getJob"},
      {"summary", "One job: state, conditions, placement, progress, energy, decisions"},
      {"parameters", {id_param()}},
      {"responses", merge({{"200", ok("the job", "Job")}},
                          error_responses({{400, kUnknownParam}, {401, kNoToken}, {403, kWorkerToken},
                                           {404, kNoJob}, {503, kStore}}))}};
  paths["/v1/jobs/{id}"]["delete"] = {
      {"operationId", "deleteJob"},
      {"summary", "Delete a finished job"},
      {"parameters", {id_param()}},
      {"responses", merge({{"200", ok("deleted", "Deleted")}},
                          error_responses({{400, kUnknownParam},
                                           {401, kNoToken},
                                           {403, kWorkerToken},
                                           {404, kNoJob},
                                           {409, "not_finished: the job has not ended (cancel it first)"},
                                           {503, kStore}}))}};
  paths["/v1/jobs/{id}/cancel"]["post"] = {
      {"operationId", "cancelJob"},
      {"summary", "Cancel: SIGTERM the gang, SIGKILL after the grace period"},
      {"parameters", {id_param()}},
      {"responses", merge({{"200", ok("cancelled", "Job")}},
                          error_responses({{400, kUnknownParam},
                                           {401, kNoToken},
                                           {403, kWorkerToken},
                                           {404, kNoJob},
                                           {409, "already_finished: the job has already ended"},
                                           {503, kStore}}))}};
  paths["/v1/jobs/{id}/logs"]["get"] = {
      {"operationId", "jobLogs"},
      {"summary", "A rank's log; follow streams until the job ends"},
      {"parameters",
       {id_param(), query("rank", {{"type", "integer"}, {"minimum", 0}}, "rank (default 0)"),
        query("offset", {{"type", "integer"}, {"minimum", 0}}, "byte offset"),
        query("follow", {{"type", "boolean"}}, "stream new output")}},
      {"responses", merge({{"200", text_ok("log text", "text/plain")}},
                          error_responses({{400, "invalid_parameter: rank, offset or follow (named in field); " +
                                                     std::string(kUnknownParam)},
                                           {401, kNoToken},
                                           {403, kWorkerToken},
                                           {404, std::string(kNoJob) + "; no_logs: the job has not started, or "
                                                                       "the rank has no log yet"},
                                           {503, kStore}}))}};
  paths["/v1/jobs/{id}/status"]["post"] = {
      {"operationId", "pushStatus"},
      {"summary", "Worker progress push (only the job's own worker token, GREENSHARD_STATUS_TOKEN)"},
      {"parameters", {id_param()}},
      {"requestBody", {{"required", true}, {"content", json_body(ref("WorkerStatus"))}}},
      {"responses", merge({{"200", ok("accepted", "Accepted")}},
                          error_responses({{400, "invalid_json: the body is not JSON; invalid_field, "
                                                 "unknown_field: the status (field named); " +
                                                     std::string(kUnknownParam)},
                                           {401, "unauthenticated: missing or malformed bearer token, or not "
                                                 "this job's worker token (also when there is no such job)"},
                                           {403, "forbidden: a token of the tokens file (any role) may not push "
                                                 "job status"},
                                           {404, "not_found: the job was deleted while the push was handled"},
                                           {409, "already_finished: the job has already ended"},
                                           {415, "unsupported_media_type: the body is not application/json"},
                                           {503, kStore}}))}};
  paths["/v1/regions"]["get"] = {
      {"operationId", "listRegions"},
      {"summary", "Regions: intensity now and forecast, capacity, PUE"},
      {"responses", merge({{"200", ok("regions", "RegionList")}},
                          error_responses({{400, kUnknownParam}, {401, kNoToken}, {403, kWorkerToken}}))}};
  paths["/v1/regions/{name}/intensity"]["get"] = {
      {"operationId", "regionIntensity"},
      {"summary", "The intensity in force now in a region (any token of the tokens file, or a live job's worker token)"},
      {"parameters", {{{"name", "name"}, {"in", "path"}, {"required", true}, {"description", "the region's name"},
                       {"schema", {{"type", "string"}, {"maxLength", 128}}}}}},
      {"responses",
       merge({{"200", ok("intensity", "RegionIntensity")}},
             error_responses({{400, kUnknownParam},
                              {401, "unauthenticated: missing or malformed bearer token, or neither a token of "
                                    "the tokens file nor a live job's worker token"},
                              {404, "not_found: no such region"},
                              {503, "intensity_unavailable: the region's intensity source has no value now"}}))}};
  paths["/v1/openapi.json"]["get"] = {
      {"operationId", "openapi"}, {"summary", "This document"}, {"security", json::array()},
      {"responses", merge({{"200", {{"description", "OpenAPI 3 document"},
                                    {"content", json_body({{"type", "object"}})}}}},
                          error_responses({}))}};
  paths["/healthz"]["get"] = {{"operationId", "healthz"}, {"summary", "Liveness"},
                              {"security", json::array()},
                              {"responses", merge({{"200", ok("alive", "Health")}}, error_responses({}))}};
  paths["/readyz"]["get"] = {
      {"operationId", "readyz"}, {"summary", "Readiness (a scheduler cycle ran)"},
      {"security", json::array()},
      {"responses", merge({{"200", ok("ready", "Ready")}},
                          error_responses({{503, "not_ready: the scheduler has not completed a cycle yet"}}))}};
  paths["/metrics"]["get"] = {
      {"operationId", "metrics"}, {"summary", "Prometheus metrics"},
      {"security", json::array()},
      {"responses", merge({{"200", text_ok("text exposition format", "text/plain")}}, error_responses({}))}};
  paths["/"]["get"] = {
      {"operationId", "statusPage"}, {"summary", "The built-in status page (its script calls this API)"},
      {"security", json::array()},
      {"responses", merge({{"200", text_ok("HTML page", "text/html")}}, error_responses({}))}};

  json num = {{"type", "number"}};
  json integer = {{"type", "integer"}};
  json str = {{"type", "string"}};
  json schemas;
  schemas["Error"] = {{"type", "object"},
                      {"required", {"error"}},
                      {"properties", {{"error", {{"type", "object"},
                                                 {"required", {"code", "message", "field"}},
                                                 {"properties", {{"code", str}, {"message", str}, {"field", str}}}}}}}};
  schemas["JobSpec"] = {
      {"type", "object"},
      {"additionalProperties", false},
      {"required", {"name", "worker", "regions"}},
      {"properties",
       {{"name", {{"type", "string"}, {"pattern", "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}, {"maxLength", 40}}},
        {"image", str},
        {"worker", {{"type", "object"}, {"description", "the worker's job.json (docs/worker-controller.md)"}}},
        {"nodes", {{"type", "integer"}, {"minimum", 1}, {"maximum", 256}, {"default", 1}}},
        {"procs_per_node", {{"type", "integer"}, {"minimum", 1}, {"maximum", 64}, {"default", 1}, {"description", "ranks per node; with gpus_per_node > 0 at most gpus_per_node (local rank r uses GPU r)"}}},
        {"gpus_per_node", {{"type", "integer"}, {"minimum", 0}, {"maximum", 16}, {"default", 0}}},
        {"regions", {{"type", "array"}, {"items", str}, {"minItems", 1}, {"maxItems", 64}}},
        {"home_region", str},
        {"deadline", {{"type", "string"}, {"format", "date-time"}}},
        {"max_delay_s", {{"type", "integer"}, {"minimum", 0}}},
        {"interruptible", {{"type", "boolean"}, {"default", false}}},
        {"priority", {{"type", "integer"}, {"minimum", -1000}, {"maximum", 1000}, {"default", 0}}},
        {"max_restarts", {{"type", "integer"}, {"minimum", 0}, {"maximum", 100}, {"default", 3}}},
        {"estimate", {{"type", "object"}, {"additionalProperties", false},
                      {"properties", {{"duration_s", {{"type", "number"}, {"description", "run time at `nodes` nodes"}}},
                                      {"power_watts", num},
                                      {"checkpoint_gb", {{"type", "number"}, {"minimum", 0},
                                                         {"description", "checkpoint size (a move sends it); 0 = placement's default"}}}}}}},
        {"elastic", {{"type", "object"}, {"additionalProperties", false},
                     {"description", "widths placement may run the job at, changing between windows at a "
                                     "checkpoint (docs/elastic.md); min_nodes <= nodes <= max_nodes"},
                     {"properties", {{"min_nodes", {{"type", "integer"}, {"minimum", 1}, {"maximum", 256}}},
                                     {"max_nodes", {{"type", "integer"}, {"minimum", 1}, {"maximum", 256}}}}}}},
        {"migratable", {{"type", "boolean"}, {"default", false},
                        {"description", "may move between its regions at a window boundary; every allowed region "
                                        "must share one checkpoint location (else 422 checkpoint_not_shared)"}}},
        {"scaling", {{"type", "array"}, {"minItems", 1}, {"maxItems", 64},
                     {"description", "declared scaling curve: whole-gang tokens/s by width; distinct widths, "
                                     "never falling as the width grows (default: measured, else linear)"},
                     {"items", {{"type", "object"}, {"additionalProperties", false},
                                {"required", {"nodes", "tokens_per_second"}},
                                {"properties", {{"nodes", {{"type", "integer"}, {"minimum", 1}, {"maximum", 256}}},
                                                {"tokens_per_second", {{"type", "number"}, {"exclusiveMinimum", true},
                                                                       {"minimum", 0}}}}}}}}}}}};
  schemas["Job"] = {
      {"type", "object"},
      {"required", {"id", "tenant", "state", "spec", "conditions", "placement", "progress", "energy",
                    "recovery_count", "failure_reason"}},
      {"properties",
       {{"id", str}, {"tenant", str},
        {"state", enum_of(kAllStates)},
        {"spec", ref("JobSpec")},
        {"created", str}, {"updated", str},
        {"conditions", {{"type", "array"},
                        {"description", "the job's history: each state it entered, why and when"},
                        {"items", {{"type", "object"},
                                   {"required", {"state", "reason", "message", "time"}},
                                   {"properties", {{"state", enum_of(kAllStates)},
                                                   {"reason", str}, {"message", str},
                                                   {"time", {{"type", "string"}, {"format", "date-time"}}}}}}}}},
        {"placement", {{"type", "object"}, {"nullable", true},
                       {"properties", {{"region", str}, {"policy", str}, {"start", str},
                                       {"windows", {{"type", "array"},
                                                    {"description", "run windows, each with its region and width (nodes)"},
                                                    {"items", {{"type", "object"},
                                                               {"properties", {{"start", str}, {"end", str},
                                                                               {"region", str}, {"nodes", integer}}}}}}},
                                       {"changes", {{"type", "array"},
                                                    {"description", "elastic and migratable jobs: each planned change "
                                                                    "of width or region between windows"},
                                                    {"items", {{"type", "object"},
                                                               {"properties", {{"at", str}, {"from_region", str},
                                                                               {"to_region", str}, {"from_nodes", integer},
                                                                               {"to_nodes", integer}, {"resize", {{"type", "boolean"}}},
                                                                               {"move", {{"type", "boolean"}}},
                                                                               {"cost_grams", num}, {"saved_grams", num},
                                                                               {"why", str}}}}}}},
                                       {"expected_grams", num}, {"run_now_home_grams", num},
                                       {"grams_avoided", num}, {"explanation", str}, {"cycle", integer}}}}},
        {"progress", {{"type", "object"},
                      {"description", "what the worker last pushed (state is empty before its first push)"},
                      {"properties", {{"state", str}, {"step", integer}, {"total_steps", integer},
                                      {"tokens", integer}, {"loss", num}, {"val_loss", num},
                                      {"tokens_per_s", num}, {"mfu", num}, {"eta_s", num}, {"message", str}}}}},
        {"energy", {{"type", "object"},
                    {"properties", {{"joules", num}, {"operational_grams", num}, {"embodied_grams", num},
                                    {"total_grams", num}}}}},
        {"recovery_count", integer},
        {"failure_reason", str},
        {"waiting", {{"type", "object"}, {"nullable", true},
                     {"description", "PENDING jobs: why the job waits (reason QuotaExceeded | "
                                     "WaitingForCapacity | WaitingForIntensityData) and a sentence"},
                     {"properties", {{"reason", str}, {"message", str}}}}},
        {"gang", {{"type", "object"}, {"nullable", true},
                  {"description", "where the current (or last) gang runs: region, nodes, placement window index"},
                  {"properties", {{"region", str}, {"nodes", integer}, {"window", integer}}}}},
        {"measured_scaling", {{"type", "array"},
                              {"description", "GET /v1/jobs/{id} only: mean tokens/s the job's running gangs "
                                              "pushed, per width"},
                              {"items", {{"type", "object"},
                                         {"properties", {{"nodes", integer}, {"tokens_per_second", num},
                                                         {"samples", integer}, {"updated", str}}}}}}},
        {"dryRun", {{"type", "boolean"},
                    {"description", "POST /v1/jobs?dryRun=true only: always true; the job was validated and "
                                    "authorized but not stored (its id is empty)"}}},
        {"decisions", {{"type", "array"},
                       {"description", "GET /v1/jobs/{id} only: the newest scheduling decisions "
                                       "(at most 50), oldest first"},
                       {"items", ref("Decision")}}}}}};
  schemas["Decision"] = {
      {"type", "object"},
      {"required", {"cycle", "time", "outcome", "region", "policy", "explanation"}},
      {"properties", {{"cycle", integer},
                      {"time", {{"type", "string"}, {"format", "date-time"}}},
                      {"outcome", enum_of(kAllDecisionOutcomes)},
                      {"region", str},
                      {"policy", str},
                      {"explanation", str}}}};
  schemas["JobList"] = {{"type", "object"},
                        {"required", {"items", "continue"}},
                        {"properties", {{"items", {{"type", "array"}, {"items", ref("Job")}}}, {"continue", str}}}};
  schemas["WorkerStatus"] = {
      {"type", "object"},
      {"additionalProperties", false},
      {"required", {"state"}},
      {"properties", {{"state", enum_of(greenshard::kAllRunPhases)},
                      {"step", integer}, {"total_steps", integer}, {"tokens", integer},
                      {"loss", num}, {"val_loss", num}, {"tokens_per_s", num}, {"mfu", num},
                      {"eta_s", num}, {"energy_joules", num}, {"operational_grams", num},
                      {"embodied_grams", num}, {"message", str}}}};
  schemas["RegionList"] = {
      {"type", "object"},
      {"required", {"items", "policy"}},
      {"properties",
       {{"items", {{"type", "array"},
                   {"items", {{"type", "object"},
                              {"properties", {{"name", str}, {"intensity_gco2_per_kwh", num},
                                              {"forecast", {{"type", "array"},
                                                            {"items", {{"type", "object"},
                                                                       {"properties", {{"time", str},
                                                                                       {"gco2_per_kwh", num}}}}}}},
                                              {"capacity_nodes", integer}, {"free_nodes", integer},
                                              {"gpus_per_node", integer}, {"pue", num}, {"executor", str}}}}}}},
        {"policy", str}}}};
  schemas["RegionIntensity"] = {{"type", "object"},
                                {"required", {"region", "gco2_per_kwh"}},
                                {"properties", {{"region", str}, {"gco2_per_kwh", num}}}};
  schemas["Deleted"] = {{"type", "object"}, {"required", {"deleted"}},
                        {"properties", {{"deleted", {{"type", "string"}, {"description", "the job's id"}}}}}};
  schemas["Accepted"] = {{"type", "object"}, {"required", {"accepted"}},
                         {"properties", {{"accepted", {{"type", "boolean"}}}}}};
  schemas["Health"] = {{"type", "object"}, {"required", {"status"}}, {"properties", {{"status", str}}}};
  schemas["Ready"] = {{"type", "object"}, {"required", {"status", "cycles"}},
                      {"properties", {{"status", str}, {"cycles", integer}}}};
  return {{"openapi", "3.0.3"},
          {"info", {{"title", "GreenShard controller"},
                    {"description", "The REST API of greenshard-controller (docs/controller.md)"},
                    {"license", {{"name", "MIT"}, {"url", "https://opensource.org/licenses/MIT"}}},
                    {"version", "1"}}},
          {"servers", {{{"url", "/"}, {"description", "the controller that serves this document"}}}},
          {"paths", paths},
          {"components", {{"schemas", schemas},
                          {"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}}}},
          {"security", {{{"bearer", json::array()}}}}};
}

}  // namespace controller
