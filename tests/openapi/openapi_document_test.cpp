// The OpenAPI document's enums are the C++ types' values, both ways, and
// every operation documents the responses any route may give.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "controller/core/decision_outcome.h"
#include "controller/core/job.h"
#include "controller/api/openapi.h"

namespace {

using controller::DecisionOutcome;
using controller::JobState;
using json = nlohmann::json;

template <class E, size_t N>
std::multiset<std::string> names(const E (&all)[N]) {
  std::multiset<std::string> out;
  for (E e : all) out.insert(std::string(to_string(e)));
  return out;
}

// The document's enum at `schema` as a multiset (a duplicate would show).
std::multiset<std::string> doc_enum(const json& schema) {
  EXPECT_EQ(schema.value("type", ""), "string") << schema.dump();
  std::multiset<std::string> out;
  for (const auto& v : schema.at("enum")) out.insert(v.get<std::string>());
  return out;
}

const json& schemas() {
  static const json doc = controller::openapi_document();
  return doc.at("components").at("schemas");
}

TEST(DecisionOutcome, EveryValueHasItsOwnNameAndParsesBack) {
  std::set<std::string> seen;
  for (DecisionOutcome o : controller::kAllDecisionOutcomes) {
    const std::string n(to_string(o));
    EXPECT_FALSE(n.empty());
    EXPECT_TRUE(seen.insert(n).second) << n << " twice";
    EXPECT_EQ(controller::parse_decision_outcome(n), o) << n;
  }
  EXPECT_EQ(controller::parse_decision_outcome("Admitted"), std::nullopt);
  EXPECT_EQ(controller::parse_decision_outcome(""), std::nullopt);
  // What the scheduler writes (Scheduler::place, Scheduler::preempt).
  for (const char* written : {"admitted", "replanned", "deferred", "requeued", "rejected", "preempting"})
    EXPECT_TRUE(controller::parse_decision_outcome(written).has_value()) << written;
}

TEST(OpenApiEnums, DecisionOutcomeIsExactlyTheEnumsValues) {
  EXPECT_EQ(doc_enum(schemas().at("Decision").at("properties").at("outcome")),
            names(controller::kAllDecisionOutcomes));
}

TEST(OpenApiEnums, WorkerStatusStateIsExactlyTheRunPhases) {
  EXPECT_EQ(doc_enum(schemas().at("WorkerStatus").at("properties").at("state")), names(greenshard::kAllRunPhases));
}

TEST(OpenApiEnums, JobStatesAreExactlyTheEnumsValues) {
  const auto want = names(controller::kAllStates);
  const json& job = schemas().at("Job").at("properties");
  EXPECT_EQ(doc_enum(job.at("state")), want);
  EXPECT_EQ(doc_enum(job.at("conditions").at("items").at("properties").at("state")), want);
  const json doc = controller::openapi_document();
  bool found = false;
  for (const auto& p : doc.at("paths").at("/v1/jobs").at("get").at("parameters"))
    if (p.at("name") == "state") {
      found = true;
      EXPECT_EQ(doc_enum(p.at("schema")), want);
    }
  EXPECT_TRUE(found) << "GET /v1/jobs has no state parameter";
}

TEST(OpenApiDocument, EveryOperationDocumentsTheEdgesResponsesWithTheErrorSchema) {
  const json doc = controller::openapi_document();
  int ops = 0;
  for (const auto& [path, item] : doc.at("paths").items())
    for (const auto& [method, op] : item.items()) {
      ++ops;
      const json& r = op.at("responses");
      for (const char* s : {"400", "405", "408", "413", "414", "431", "500", "501", "503"})
        EXPECT_TRUE(r.contains(s)) << method << " " << path << " lacks " << s;
      for (const auto& [status, resp] : r.items()) {
        EXPECT_FALSE(resp.value("description", "").empty()) << method << " " << path << " " << status;
        if (status[0] == '4' || status[0] == '5')
          EXPECT_EQ(resp.at("content").at("application/json").at("schema").at("$ref"),
                    "#/components/schemas/Error")
              << method << " " << path << " " << status;
      }
      EXPECT_TRUE(r.at("405").at("headers").contains("Allow")) << method << " " << path;
    }
  EXPECT_GE(ops, 14);
}

// The routes that take a token answer 401 and (but the status push and the
// intensity route, which any token of the file may use) 403 for a worker
// token; every route that reads the query names an unknown parameter (400).
TEST(OpenApiDocument, TokenRoutesDocument401And403) {
  const json doc = controller::openapi_document();
  for (const auto& [path, item] : doc.at("paths").items())
    for (const auto& [method, op] : item.items()) {
      if (op.contains("security") && op.at("security").empty()) continue;
      const json& r = op.at("responses");
      EXPECT_TRUE(r.contains("401")) << method << " " << path;
      EXPECT_TRUE(r.at("401").at("headers").contains("WWW-Authenticate")) << method << " " << path;
      if (path != "/v1/regions/{name}/intensity") EXPECT_TRUE(r.contains("403")) << method << " " << path;
      EXPECT_NE(r.at("400").at("description").get<std::string>().find("unknown_parameter"), std::string::npos)
          << method << " " << path;
    }
}

}  // namespace
