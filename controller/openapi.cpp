#include "controller/openapi.h"

#include <map>

namespace controller {

using json = nlohmann::json;

namespace {

json ref(const std::string& name) { return {{"$ref", "#/components/schemas/" + name}}; }

json err(const std::string& desc) {
  return {{"description", desc},
          {"content", {{"application/json", {{"schema", ref("Error")}}}}}};
}

json ok(const std::string& desc, const std::string& schema) {
  return {{"description", desc},
          {"content", {{"application/json", {{"schema", ref(schema)}}}}}};
}

json id_param() {
  return {{"name", "id"}, {"in", "path"}, {"required", true},
          {"schema", {{"type", "string"}, {"pattern", "^[a-z0-9]{1,64}$"}}}};
}

json query(const std::string& name, const json& schema, const std::string& desc) {
  return {{"name", name}, {"in", "query"}, {"required", false}, {"schema", schema},
          {"description", desc}};
}

json common_errors(std::initializer_list<int> codes) {
  json r = json::object();
  for (int c : codes) {
    static const std::map<int, std::string> d = {
        {400, "malformed request (field named)"}, {401, "missing or unknown bearer token"},
        {403, "the token's role may not use this route"}, {404, "no such job (or another tenant's)"},
        {409, "conflicting state or idempotency key"}, {413, "body too large"},
        {422, "valid but not schedulable by this controller"}, {429, "tenant quota exceeded"},
        {503, "not ready / store unavailable"}};
    r[std::to_string(c)] = err(d.at(c));
  }
  return r;
}

}  // namespace

json openapi_document() {
  json paths = json::object();
  auto merge = [](json a, const json& b) {
    for (auto& [k, v] : b.items()) a[k] = v;
    return a;
  };

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
                       {"content", {{"application/json", {{"schema", ref("JobSpec")}}}}}}},
      {"responses", merge({{"201", ok("created", "Job")},
                           {"200", ok("idempotent replay, or (dryRun=true) the job as it would be created, "
                                      "not stored: dryRun is true and id is empty",
                                      "Job")}},
                          common_errors({400, 401, 403, 409, 413, 422, 429}))}};
  paths["/v1/jobs"]["get"] = {
      {"operationId", "listJobs"},
      {"summary", "List jobs, oldest first, paginated"},
      {"parameters",
       {query("state", {{"type", "string"}, {"enum", {"PENDING", "SCHEDULED", "STARTING", "RUNNING",
                                                      "RECOVERING", "SUSPENDED", "SUCCEEDED",
                                                      "FAILED", "CANCELLED"}}},
              "only jobs in this state"),
        query("tenant", {{"type", "string"}}, "admins: another tenant"),
        query("limit", {{"type", "integer"}, {"minimum", 1}, {"maximum", 1000}, {"default", 100}},
              "page size"),
        query("continue", {{"type", "string"}}, "opaque token from the previous page")}},
      {"responses", merge({{"200", ok("a page", "JobList")}}, common_errors({400, 401, 403}))}};
  paths["/v1/jobs/{id}"]["get"] = {
      {"operationId", "getJob"},
      {"summary", "One job: state, conditions, placement, progress, energy"},
      {"parameters", {id_param()}},
      {"responses", merge({{"200", ok("the job", "Job")}}, common_errors({401, 403, 404}))}};
  paths["/v1/jobs/{id}"]["delete"] = {
      {"operationId", "deleteJob"},
      {"summary", "Delete a finished job"},
      {"parameters", {id_param()}},
      {"responses", merge({{"200", {{"description", "deleted"}}}}, common_errors({401, 403, 404, 409}))}};
  paths["/v1/jobs/{id}/cancel"]["post"] = {
      {"operationId", "cancelJob"},
      {"summary", "Cancel: SIGTERM the gang, SIGKILL after the grace period"},
      {"parameters", {id_param()}},
      {"responses", merge({{"200", ok("cancelled", "Job")}}, common_errors({401, 403, 404, 409}))}};
  paths["/v1/jobs/{id}/logs"]["get"] = {
      {"operationId", "jobLogs"},
      {"summary", "A rank's log; follow streams until the job ends"},
      {"parameters",
       {id_param(), query("rank", {{"type", "integer"}, {"minimum", 0}}, "rank (default 0)"),
        query("offset", {{"type", "integer"}, {"minimum", 0}}, "byte offset"),
        query("follow", {{"type", "boolean"}}, "stream new output")}},
      {"responses", merge({{"200", {{"description", "log text"},
                                    {"content", {{"text/plain", {{"schema", {{"type", "string"}}}}}}}}}},
                          common_errors({400, 401, 403, 404}))}};
  paths["/v1/jobs/{id}/status"]["post"] = {
      {"operationId", "pushStatus"},
      {"summary", "Worker progress push (worker token)"},
      {"parameters", {id_param()}},
      {"requestBody", {{"required", true},
                       {"content", {{"application/json", {{"schema", ref("WorkerStatus")}}}}}}},
      {"responses", merge({{"200", {{"description", "accepted"}}}}, common_errors({400, 401, 403, 404, 409}))}};
  paths["/v1/regions"]["get"] = {
      {"operationId", "listRegions"},
      {"summary", "Regions: intensity now and forecast, capacity, PUE"},
      {"responses", merge({{"200", ok("regions", "RegionList")}}, common_errors({401}))}};
  paths["/v1/regions/{name}/intensity"]["get"] = {
      {"operationId", "regionIntensity"},
      {"summary", "The intensity in force now in a region (any token of the tokens file, or a live job's worker token)"},
      {"parameters", {{{"name", "name"}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}}}},
      {"responses", merge({{"200", ok("intensity", "RegionIntensity")}}, common_errors({401, 404, 503}))}};
  paths["/v1/openapi.json"]["get"] = {
      {"operationId", "openapi"}, {"summary", "This document"}, {"security", json::array()},
      {"responses", {{"200", {{"description", "OpenAPI 3 document"}}}}}};
  paths["/healthz"]["get"] = {{"operationId", "healthz"}, {"summary", "Liveness"},
                              {"security", json::array()},
                              {"responses", {{"200", {{"description", "alive"}}}}}};
  paths["/readyz"]["get"] = {{"operationId", "readyz"}, {"summary", "Readiness (a scheduler cycle ran)"},
                             {"security", json::array()},
                             {"responses", {{"200", {{"description", "ready"}}}, {"503", err("not ready")}}}};
  paths["/metrics"]["get"] = {{"operationId", "metrics"}, {"summary", "Prometheus metrics"},
                              {"security", json::array()},
                              {"responses", {{"200", {{"description", "text exposition format"}}}}}};

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
        {"state", {{"type", "string"}}},
        {"spec", ref("JobSpec")},
        {"created", str}, {"updated", str},
        {"conditions", {{"type", "array"}, {"items", {{"type", "object"}}}}},
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
        {"progress", {{"type", "object"}}},
        {"energy", {{"type", "object"}}},
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
                      {"outcome", {{"type", "string"}, {"enum", {"admitted", "deferred", "rejected"}}}},
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
      {"properties", {{"state", {{"type", "string"}, {"enum", {"running", "succeeded", "preempted", "failed"}}}},
                      {"step", integer}, {"total_steps", integer}, {"tokens", integer},
                      {"loss", num}, {"val_loss", num}, {"tokens_per_s", num}, {"mfu", num},
                      {"eta_s", num}, {"energy_joules", num}, {"operational_grams", num},
                      {"embodied_grams", num}, {"message", str}}}};
  schemas["RegionList"] = {{"type", "object"},
                           {"properties", {{"items", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                                           {"policy", str}}}};
  schemas["RegionIntensity"] = {{"type", "object"},
                                {"properties", {{"region", str}, {"gco2_per_kwh", num}}}};
  return {{"openapi", "3.0.3"},
          {"info", {{"title", "GreenShard controller"}, {"version", "1"}}},
          {"paths", paths},
          {"components", {{"schemas", schemas},
                          {"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}}}},
          {"security", {{{"bearer", json::array()}}}}};
}

}  // namespace controller
