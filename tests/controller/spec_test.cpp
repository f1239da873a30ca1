// Job-spec parsing, tokens files, regions files and the shipped intensity data:
// tables keyed by a sentence.
#include <gtest/gtest.h>

#include <carbon/time_ms.h>

#include "common/spawn.h"
#include "controller/core/api_types.h"
#include "controller/api/auth.h"
#include "controller/core/region_snapshot.h"
#include "controller/config/regions.h"
#include "controller/config/intensity_sources.h"
#include "fixture.h"

using namespace controller;
using json = nlohmann::json;

namespace {

json base() {
  return {{"name", "demo"}, {"worker", {{"data", {{"train", "t.bin"}}}}}, {"regions", {"DE", "FR"}}};
}

struct SpecCase {
  const char* sentence;
  std::function<void(json&)> edit;
  int status;           // 0 = valid
  const char* field;
};

const SpecCase kSpecCases[] = {
    {"a minimal spec is valid", [](json&) {}, 0, ""},
    {"an unknown field is named", [](json& j) { j["nodez"] = 2; }, 400, "nodez"},
    {"an unknown estimate field is named with its path", [](json& j) { j["estimate"] = {{"watts", 1}}; }, 400, "estimate.watts"},
    {"a missing name is named", [](json& j) { j.erase("name"); }, 400, "name"},
    {"an upper case name is refused", [](json& j) { j["name"] = "Demo"; }, 400, "name"},
    {"a name of 41 characters is refused", [](json& j) { j["name"] = std::string(41, 'a'); }, 400, "name"},
    {"a missing worker payload is named", [](json& j) { j.erase("worker"); }, 400, "worker"},
    {"a worker payload that is not an object is refused", [](json& j) { j["worker"] = "x"; }, 400, "worker"},
    {"a worker payload over 64 KiB is too large", [](json& j) { j["worker"]["blob"] = std::string(70000, 'x'); }, 413, "worker"},
    {"zero nodes are refused", [](json& j) { j["nodes"] = 0; }, 400, "nodes"},
    {"nodes given as a string are refused", [](json& j) { j["nodes"] = "2"; }, 400, "nodes"},
    {"fractional nodes are refused", [](json& j) { j["nodes"] = 1.5; }, 400, "nodes"},
    {"a huge unsigned node count is refused", [](json& j) { j["nodes"] = 18446744073709551615ull; }, 400, "nodes"},
    {"65 processes per node are refused", [](json& j) { j["procs_per_node"] = 65; }, 400, "procs_per_node"},
    {"negative gpus are refused", [](json& j) { j["gpus_per_node"] = -1; }, 400, "gpus_per_node"},
    {"more ranks per node than GPUs are refused (one rank per GPU)",
     [](json& j) { j["procs_per_node"] = 4; j["gpus_per_node"] = 2; }, 400, "procs_per_node"},
    {"an empty region list is refused", [](json& j) { j["regions"] = json::array(); }, 400, "regions"},
    {"a duplicate region is named by index", [](json& j) { j["regions"] = {"DE", "DE"}; }, 400, "regions[1]"},
    {"a region name with a space is refused", [](json& j) { j["regions"] = {"D E"}; }, 400, "regions[0]"},
    {"a home region outside the allowed list is refused", [](json& j) { j["home_region"] = "PL"; }, 400, "home_region"},
    {"a malformed deadline is refused", [](json& j) { j["deadline"] = "tomorrow"; }, 400, "deadline"},
    {"February 30th is not a deadline", [](json& j) { j["deadline"] = "2026-02-30T00:00:00Z"; }, 400, "deadline"},
    {"deadline and max_delay_s together are refused", [](json& j) { j["deadline"] = "2026-12-02T18:00:00Z"; j["max_delay_s"] = 5; }, 400, "max_delay_s"},
    {"a negative max delay is refused", [](json& j) { j["max_delay_s"] = -1; }, 400, "max_delay_s"},
    {"interruptible must be a boolean", [](json& j) { j["interruptible"] = 1; }, 400, "interruptible"},
    {"priority above 1000 is refused", [](json& j) { j["priority"] = 1001; }, 400, "priority"},
    {"max_restarts above 100 is refused", [](json& j) { j["max_restarts"] = 101; }, 400, "max_restarts"},
    {"a zero duration estimate is refused", [](json& j) { j["estimate"] = {{"duration_s", 0}}; }, 400, "estimate.duration_s"},
    {"a complete spec is valid", [](json& j) {
       j["image"] = "r/w:1"; j["nodes"] = 2; j["procs_per_node"] = 4; j["gpus_per_node"] = 8;
       j["home_region"] = "FR"; j["deadline"] = "2026-12-02T18:00:00.5+01:00"; j["interruptible"] = true;
       j["priority"] = -5; j["max_restarts"] = 0; j["estimate"] = {{"duration_s", 60}, {"power_watts", 700.5}};
     }, 0, ""},
};

class SpecTable : public ::testing::TestWithParam<SpecCase> {};

TEST_P(SpecTable, Parses) {
  const auto& c = GetParam();
  json j = base();
  c.edit(j);
  if (c.status == 0) {
    JobSpec s = parse_job_spec(j);
    // The canonical form parses to the same spec.
    EXPECT_EQ(parse_job_spec(s.to_json()).to_json(), s.to_json());
    return;
  }
  try {
    parse_job_spec(j);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, c.status) << e.what();
    EXPECT_EQ(e.field, c.field) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(ControllerSpec, SpecTable, ::testing::ValuesIn(kSpecCases),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

// --- the `worker` object, checked with the worker's own schema at submit ---

struct WorkerCase {
  const char* sentence;
  std::function<void(json& worker)> edit;  // on the fixture's valid worker object
  const char* field;                       // "" = accepted (201)
  const char* code = "invalid_field";
};

const WorkerCase kWorkerCases[] = {
    {"an unknown sharding strategy", [](json& w) { w["sharding"] = {{"strategy", "FULL_SHARDD"}}; },
     "worker.sharding.strategy"},
    {"a width not divisible by the heads", [](json& w) { w["model"] = {{"embd", 100}, {"heads", 3}}; },
     "worker.model.embd"},
    {"an unknown section", [](json& w) { w["modle"] = {{"layers", 2}}; }, "worker.modle", "unknown_field"},
    {"an unknown field in a known section", [](json& w) { w["schedule"]["stepz"] = 5; }, "worker.schedule.stepz",
     "unknown_field"},
    {"a word where a number belongs", [](json& w) { w["schedule"]["steps"] = "five"; }, "worker.schedule.steps"},
    {"a fraction where an integer belongs", [](json& w) { w["model"] = {{"layers", 2.5}}; }, "worker.model.layers"},
    {"a mapping where a value belongs", [](json& w) { w["model"] = {{"layers", {{"n", 2}}}}; },
     "worker.model.layers"},
    {"a null value", [](json& w) { w["data"]["val"] = nullptr; }, "worker.data.val"},
    {"a missing training file", [](json& w) { w["data"].erase("train"); }, "worker.data.train"},
    {"an unknown hardware profile", [](json& w) { w["carbon"] = {{"hardware", "cpu-node"}}; },
     "worker.carbon.hardware"},
    {"a final learning rate above the peak", [](json& w) { w["optimizer"] = {{"lr", 0.001}, {"min_lr", 0.01}}; },
     "worker.optimizer.min_lr"},
    {"every strategy shard knows in any case with fields the controller sets left out",
     [](json& w) {
       w["sharding"] = {{"strategy", "hybrid_shard"}, {"hybrid_group_size", 1}};
       w["model"] = {{"layers", 2}, {"heads", 2}, {"embd", 64}, {"context", 32}};
       w["data"]["val"] = "v.bin";  // relative to the job's directory: not opened at submit
     },
     ""},
};

class WorkerSpecTable : public ::testing::TestWithParam<WorkerCase> {};

TEST_P(WorkerSpecTable, ABadWorkerFieldIsA400NamingIt) {
  const auto& c = GetParam();
  ctltest::Controller ctl;
  json s = ctltest::spec();
  c.edit(s["worker"]);
  auto cli = ctl.client(ctltest::kUserA);
  auto r = cli.Post("/v1/jobs", s.dump(), "application/json");
  ASSERT_TRUE(r);
  auto listed = cli.Get("/v1/jobs");
  ASSERT_TRUE(listed);
  const size_t stored = json::parse(listed->body).at("items").size();
  if (!*c.field) {
    EXPECT_EQ(r->status, 201) << r->body;
    EXPECT_EQ(stored, 1u);
    return;
  }
  EXPECT_EQ(r->status, 400) << r->body;
  json body = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(body.is_object() && body.contains("error")) << r->body;
  EXPECT_EQ(body["error"]["field"], c.field) << r->body;
  EXPECT_EQ(body["error"]["code"], c.code) << r->body;
  EXPECT_EQ(body["error"]["message"].get<std::string>().rfind(std::string(c.field) + ": ", 0), 0u) << r->body;
  EXPECT_EQ(stored, 0u) << "a refused spec is not stored";
}

INSTANTIATE_TEST_SUITE_P(ControllerSubmit, WorkerSpecTable, ::testing::ValuesIn(kWorkerCases),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerSpec, TextThatIsNotJsonIsInvalidJson) {
  try {
    parse_job_spec_text("{\"name\": ");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "invalid_json");
    EXPECT_EQ(e.status, 400);
  }
}

// --- issue 33: messages of the spec parser, nesting, untrusted text ------

ApiError spec_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted";
  return ApiError(0, "", "");
}

std::string nested(int levels, const std::string& inner = "") {
  return std::string(size_t(levels), '[') + inner + std::string(size_t(levels), ']');
}

TEST(ControllerSpec, TypeErrorsNameTheFieldTheExpectedAndTheActualType) {
  struct Case {
    std::function<void(json&)> edit;
    const char* field;
    const char* message;
  };
  const Case cases[] = {
      {[](json& j) { j["estimate"] = json::array(); }, "estimate", "estimate: expected an object, got an array"},
      {[](json& j) { j["worker"] = json::array(); }, "worker", "worker: expected an object, got an array"},
      {[](json& j) { j["nodes"] = "2"; }, "nodes", "nodes: expected an integer, got a string"},
      {[](json& j) { j["regions"] = json::object(); }, "regions", "regions: expected an array of region names, got an object"},
      {[](json& j) { j["interruptible"] = nullptr; }, "interruptible", "interruptible: expected a boolean, got null"},
      {[](json& j) { j["elastic"] = true; }, "elastic", "elastic: expected an object {min_nodes, max_nodes}, got a boolean"},
      {[](json& j) { j["estimate"] = {{"duration_s", "1"}}; }, "estimate.duration_s",
       "estimate.duration_s: expected a number, got a string"},
  };
  for (const auto& c : cases) {
    json j = base();
    c.edit(j);
    ApiError e = spec_error([&] { parse_job_spec(j); });
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.field, c.field);
    EXPECT_STREQ(e.what(), c.message);
  }
}

TEST(ControllerSpec, AWorkerSectionOrValueOfTheWrongJsonTypeIsATypeError) {
  struct Case {
    json worker;
    const char* field;
    const char* message;
  };
  const Case cases[] = {
      {{{"model", json::array()}}, "worker.model", "worker.model: expected an object, got an array"},
      {{{"model", 3}}, "worker.model", "worker.model: expected an object, got a number"},
      {{{"model", nullptr}}, "worker.model", "worker.model: expected an object, got null"},
      {{{"model", {{"layers", json::array()}}}}, "worker.model.layers",
       "worker.model.layers: expected an integer, got an array"},
      {{{"data", {{"val", json::object()}}}}, "worker.data.val", "worker.data.val: expected a string, got an object"},
  };
  for (const auto& c : cases) {
    ApiError e = spec_error([&] { check_worker_spec(c.worker); });
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.code, "invalid_field") << e.what();
    EXPECT_EQ(e.field, c.field);
    EXPECT_STREQ(e.what(), c.message);
  }
}

TEST(ControllerSpec, NestingDeeperThan64LevelsIsRefusedNamingTheField) {
  // worker.model holding n arrays: the document is n + 2 levels deep.
  for (int arrays : {70000, 50000, 30000, 63}) {
    const std::string text = R"({"name":"x","regions":["DE"],"worker":{"model":)" + nested(arrays) + "}}";
    ApiError e = spec_error([&] { parse_job_spec_text(text); });
    EXPECT_EQ(e.status, 400) << arrays;
    EXPECT_EQ(e.code, "too_deep") << arrays;
    EXPECT_EQ(e.field, "worker.model") << arrays;
    EXPECT_STREQ(e.what(), "worker.model: nested deeper than 64 levels");
  }
  // 64 levels in all: read, and refused for what it is (a type error).
  ApiError ok = spec_error([&] {
    check_worker_spec(parse_job_spec_text(R"({"name":"x","regions":["DE"],"worker":{"model":)" + nested(62) + "}}")
                          .worker);
  });
  EXPECT_EQ(ok.code, "invalid_field") << ok.what();
  EXPECT_EQ(ok.field, "worker.model");
  // The top level.
  EXPECT_EQ(spec_error([] { parse_json_input(nested(65)); }).field, "");
  EXPECT_STREQ(spec_error([] { parse_json_input(nested(65)); }).what(), "the body is nested deeper than 64 levels");
  EXPECT_EQ(parse_json_input(nested(64)).size(), 1u);
  // YAML: the same limit and field, and yaml-cpp's own limit (2000) is the top level.
  ApiError y = spec_error([] { parse_yaml_input("name: x\nworker:\n  model: " + nested(63) + "\n"); });
  EXPECT_EQ(y.code, "too_deep");
  EXPECT_EQ(y.field, "worker.model");
  EXPECT_EQ(parse_yaml_input("a: " + nested(63) + "\n").size(), 1u);
  for (int arrays : {3000, 70000}) {
    ApiError deep = spec_error([&] { parse_yaml_input("worker: " + nested(arrays) + "\n"); });
    EXPECT_EQ(deep.code, "too_deep") << deep.what();
    EXPECT_EQ(std::string(deep.what()).find("yaml-cpp"), std::string::npos) << deep.what();
  }
  // Aliases that expand without end (a billion laughs) stop at a node count.
  std::string laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i)
    laughs += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" +
              std::string("*a" + std::to_string(i - 1) + ", ") + "*a" + std::to_string(i - 1) + ", *a" +
              std::to_string(i - 1) + ", *a" + std::to_string(i - 1) + ", *a" + std::to_string(i - 1) + ", *a" +
              std::to_string(i - 1) + ", *a" + std::to_string(i - 1) + ", *a" + std::to_string(i - 1) + ", *a" +
              std::to_string(i - 1) + ", *a" + std::to_string(i - 1) + "]\n";
  EXPECT_EQ(spec_error([&] { parse_yaml_input(laughs); }).code, "invalid_yaml");
  EXPECT_EQ(spec_error([] { parse_yaml_input("a: \xff\n"); }).code, "invalid_yaml");
}

TEST(ControllerSpec, UntrustedTextIsQuotedPrintableCappedAndValidUtf8) {
  EXPECT_EQ(quote_untrusted("abc"), "'abc'");
  EXPECT_EQ(quote_untrusted("a\xff" "b"), "'a\\xffb'");
  EXPECT_EQ(quote_untrusted("a\nb\\"), "'a\\x0ab\\x5c'");
  EXPECT_EQ(quote_untrusted("gr\xc3\xbc\xc3\x9f"), "'gr\xc3\xbc\xc3\x9f'");  // UTF-8 stays
  EXPECT_EQ(quote_untrusted("\xe2\x82"), "'\\xe2\\x82'");                    // a cut sequence does not
  EXPECT_EQ(quote_untrusted(std::string(100, 'x'), 8), "'xxxxxxxx...'");
  EXPECT_EQ(quote_untrusted("ab\xc3\xbc", 3), "'ab...'");  // no character cut in half
  // Whatever comes in, the result dumps as JSON with the default (strict) handler.
  std::string all;
  for (int b = 0; b < 256; ++b) all += char(b);
  EXPECT_NO_THROW(json(quote_untrusted(all, 1000)).dump());
}

TEST(ControllerSpec, Rfc3339OffsetsAreApplied) {
  EXPECT_EQ(parse_rfc3339("1970-01-01T01:00:00+01:00"), 0);
  EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:01.250Z"), 1250);
  EXPECT_EQ(format_rfc3339(1250), "1970-01-01T00:00:01.250Z");
}

struct TokenCase {
  const char* sentence;
  const char* text;
  const char* error;  // substring, "" = valid
};

const TokenCase kTokenCases[] = {
    {"a user an admin and a worker line load", "# c\nuser-token-0000001,team-a,user\nadmin-token-000001,ops,admin\n\nworker-token-00001,team-a,worker\n", ""},
    {"a short token names its line", "short,team-a,user\n", ":1: token"},
    {"an unknown role names its line", "# x\nuser-token-0000001,team-a,root\n", ":2: role 'root'"},
    {"a tenant with capitals is refused", "user-token-0000001,TeamA,user\n", "tenant 'TeamA'"},
    {"a line with two fields is refused", "user-token-0000001,team-a\n", "expected 'token,tenant,role'"},
    {"a duplicate token is refused", "user-token-0000001,a,user\nuser-token-0000001,b,user\n", "duplicate token"},
};

class TokenTable : public ::testing::TestWithParam<TokenCase> {};
TEST_P(TokenTable, Loads) {
  const auto& c = GetParam();
  if (!*c.error) {
    EXPECT_NO_THROW(Auth::from_text(c.text));
    return;
  }
  try {
    Auth::from_text(c.text);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(c.error), std::string::npos) << e.what();
  }
}
INSTANTIATE_TEST_SUITE_P(ControllerAuth, TokenTable, ::testing::ValuesIn(kTokenCases),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerAuth, BearerHeaderIsRequiredAndRolesMap) {
  Auth a = Auth::from_text("user-token-0000001,team-a,user\nadmin-token-000001,ops,admin\n");
  EXPECT_EQ(a.authenticate("Bearer user-token-0000001").tenant, "team-a");
  EXPECT_EQ(a.authenticate("Bearer admin-token-000001").tenant, "*");
  for (const char* h : {"", "user-token-0000001", "Basic user-token-0000001", "Bearer nope-nope-nope-nope"}) {
    try {
      a.authenticate(h);
      FAIL() << h;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 401) << h;
    }
  }
}

TEST(ControllerRegions, AFileLoadsAndUnknownKeysAreNamed) {
  auto r = parse_regions_yaml(
      "regions:\n  - {name: DE, pue: 1.2, nodes: 4, gpus_per_node: 8, intensity: 380}\n"
      "  - {name: FR, nodes: 2, hourly: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24]}\n",
      "r.yaml");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].gpus_per_node, 8);
  EXPECT_EQ(r[1].hourly.size(), 24u);
  struct Bad { const char* text; const char* error; };
  for (auto b : {Bad{"regions:\n  - {name: DE, pue: 0.5}\n", "regions[0].pue"},
                 Bad{"regions:\n  - {name: DE, capacity: 3}\n", "unknown key 'regions[0].capacity'"},
                 Bad{"regions:\n  - {name: DE}\n  - {name: DE}\n", "duplicate 'DE'"},
                 Bad{"regions:\n  - {name: DE, executor: slurm}\n", "regions[0].executor"},
                 Bad{"regions:\n  - {name: DE, executor: kubernetes}\n", "kubernetes.server"},
                 Bad{"zones: []\n", "regions: required"}}) {
    try {
      parse_regions_yaml(b.text, "r.yaml");
      FAIL() << b.text;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(b.error), std::string::npos) << e.what();
    }
  }
}

// --- shipped intensity data -----------------------------------------------

constexpr int64_t kHour = carbon::kHourMs;
constexpr int64_t kT0 = 1764633600000;  // 2025-12-02T00:00:00Z, an hour boundary

TEST(ControllerCarbonData, ShippedZonesGiveAnHourlyForecastAndUnknownZonesAreNamed) {
  auto src = make_carbon_intensity_source();
  ASSERT_TRUE(src);
  auto f = src->forecast("DE", kT0 + 1234, 48);
  ASSERT_EQ(f.size(), 49u);
  EXPECT_EQ(f[0].time_ms, kT0);
  EXPECT_EQ(f[1].time_ms, kT0 + kHour);
  for (auto& p : f) EXPECT_GT(p.gco2_per_kwh, 0);
  EXPECT_THROW(src->forecast("ATLANTIS", kT0, 1), std::exception);
}

}  // namespace
