// Job-spec parsing, tokens files, regions files and the greedy placer:
// tables keyed by a sentence.
#include <gtest/gtest.h>

#include "common/spawn.h"
#include "controller/api_types.h"
#include "controller/auth.h"
#include "controller/placement.h"
#include "controller/regions.h"

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

TEST(ControllerSpec, TextThatIsNotJsonIsInvalidJson) {
  try {
    parse_job_spec_text("{\"name\": ");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "invalid_json");
    EXPECT_EQ(e.status, 400);
  }
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

// --- greedy placer ---------------------------------------------------------

constexpr int64_t kHour = 3600 * 1000;
constexpr int64_t kT0 = 1764633600000;  // 2025-12-02T00:00:00Z, an hour boundary

RegionSnapshot region(const std::string& name, std::vector<double> hourly, int nodes = 4, int free = 4) {
  RegionSnapshot r;
  r.name = name;
  r.capacity_nodes = nodes;
  r.free_nodes = free;
  r.intensity_now = hourly.front();
  for (size_t h = 0; h < hourly.size(); ++h) r.forecast.push_back({kT0 + int64_t(h) * kHour, hourly[h]});
  return r;
}

PlacementRequest request(std::vector<std::string> allowed, double hours, int64_t slack_h, bool interruptible = false) {
  PlacementRequest q;
  q.job_id = "j";
  q.allowed = allowed;
  q.home_region = allowed.front();
  q.duration_s = hours * 3600;
  q.power_watts = 1000;
  q.interruptible = interruptible;
  q.earliest_start_ms = kT0;
  q.latest_end_ms = slack_h < 0 ? 0 : kT0 + int64_t(hours * kHour) + slack_h * kHour;
  return q;
}

struct PlaceCase {
  const char* sentence;
  std::vector<RegionSnapshot> regions;
  PlacementRequest req;
  std::string region;       // "" when not placed
  std::string policy;
  int64_t start_h;          // first window start, hours after kT0
  size_t windows;
  bool impossible, wait;
};

std::vector<PlaceCase> place_cases() {
  return {
      {"without slack a job runs now at home", {region("DE", {300, 100, 100})}, request({"DE"}, 1, -1),
       "DE", "run-now-home", 0, 1, false, false},
      {"with slack a job waits for the clean hour", {region("DE", {300, 100, 300, 300})}, request({"DE"}, 1, 3),
       "DE", "carbon-shift", 1, 1, false, false},
      {"a cleaner allowed region wins now", {region("DE", {300, 300}), region("FR", {50, 50})},
       request({"DE", "FR"}, 1, -1), "FR", "carbon-region", 0, 1, false, false},
      {"a cleaner region that is full is skipped", {region("DE", {300, 300}), region("FR", {50, 50}, 4, 0)},
       request({"DE", "FR"}, 1, -1), "DE", "run-now-home", 0, 1, false, false},
      {"equal grams prefer the home region", {region("FR", {200, 200}), region("DE", {200, 200})},
       request({"DE", "FR"}, 1, -1), "DE", "run-now-home", 0, 1, false, false},
      {"an interruptible job takes the two clean hours apart",
       {region("DE", {100, 500, 100, 500, 500})}, request({"DE"}, 2, 2, true), "DE", "carbon-windows", 0, 2, false, false},
      {"a job larger than every region is impossible", {region("DE", {100}, 2, 2)},
       [] { auto q = request({"DE"}, 1, -1); q.nodes = 3; return q; }(), "", "", 0, 0, true, false},
      {"a job waits while every fitting region is full", {region("DE", {100}, 4, 1)},
       [] { auto q = request({"DE"}, 1, -1); q.nodes = 2; return q; }(), "", "", 0, 0, false, true},
  };
}

class PlaceTable : public ::testing::TestWithParam<PlaceCase> {};
TEST_P(PlaceTable, Places) {
  const auto& c = GetParam();
  auto p = make_greedy_placer();
  PlacementDecision d = p->place(c.req, c.regions, kT0);
  EXPECT_EQ(d.impossible, c.impossible) << d.explanation;
  EXPECT_EQ(d.wait_for_capacity, c.wait) << d.explanation;
  if (c.region.empty()) return;
  EXPECT_EQ(d.region, c.region) << d.explanation;
  EXPECT_EQ(d.policy, c.policy) << d.explanation;
  ASSERT_EQ(d.windows.size(), c.windows) << d.explanation;
  EXPECT_EQ(d.windows.front().first, kT0 + c.start_h * kHour);
  int64_t total = 0;
  for (auto [a, b] : d.windows) total += b - a;
  EXPECT_EQ(total, int64_t(c.req.duration_s * 1000));
  EXPECT_LE(d.expected_grams, d.run_now_home_grams + 1e-9);
  EXPECT_FALSE(d.explanation.empty());
}
INSTANTIATE_TEST_SUITE_P(ControllerPlacer, PlaceTable, ::testing::ValuesIn(place_cases()),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerPlacer, PlanGramsIsEnergyTimesIntensityTimesPue) {
  RegionSnapshot r = region("DE", {200, 400});
  r.pue = 1.5;
  // 1 kW for the first hour at 200 g/kWh with PUE 1.5 = 300 g; the next half hour 0.75 kWh * 400.
  EXPECT_NEAR(plan_grams(r, 1000, {{kT0, kT0 + kHour}}), 300.0, 1e-9);
  EXPECT_NEAR(plan_grams(r, 1000, {{kT0 + kHour, kT0 + kHour + kHour / 2}}), 300.0, 1e-9);
}

}  // namespace

#ifdef GREENSHARD_HAVE_CARBON
namespace {

// The same table of situations through carbon/'s placement: it must agree
// with the greedy placer on where (and, without slack, when) a job runs.
class CarbonPlaceTable : public ::testing::TestWithParam<PlaceCase> {};
TEST_P(CarbonPlaceTable, Places) {
  const auto& c = GetParam();
  auto p = make_carbon_placer();
  PlacementDecision d = p->place(c.req, c.regions, kT0);
  EXPECT_EQ(d.impossible, c.impossible) << d.explanation;
  EXPECT_EQ(d.wait_for_capacity, c.wait) << d.explanation;
  if (c.region.empty()) return;
  EXPECT_EQ(d.region, c.region) << d.explanation;
  ASSERT_FALSE(d.windows.empty());
  if (c.windows == 1) EXPECT_EQ(d.windows.front().first, kT0 + c.start_h * kHour) << d.explanation;
  EXPECT_LE(d.expected_grams, d.run_now_home_grams + 1e-6) << d.explanation;
  EXPECT_FALSE(d.explanation.empty());
}
INSTANTIATE_TEST_SUITE_P(ControllerCarbonPlacer, CarbonPlaceTable, ::testing::ValuesIn(place_cases()),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

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
#endif
