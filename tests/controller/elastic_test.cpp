// Elastic and migratable jobs in the controller (docs/elastic.md): the spec's
// validation at the REST edge, its typed columns in the store (and the
// migration of an older store), the scheduler carrying out plans whose
// windows differ in region or width (with one FakeExecutor per region: no
// processes), and the simulated gangs of the service simulation. Tables are
// keyed by a sentence.
#include <gtest/gtest.h>

#include <carbon/time_ms.h>

#include <sqlite3.h>

#include <carbon/placement.h>

#include <optional>
#include <regex>

#include "common/spawn.h"
#include "controller/executors/executor_sim.h"
#include "controller/scheduling/scheduler.h"
#include "fake_executor.h"
#include "fixture.h"

using namespace controller;
using ctltest::FakeExecutor;
using json = nlohmann::json;

namespace {

constexpr int64_t kHour = carbon::kHourMs;
constexpr int64_t kT0 = 1764633600000;  // 2025-12-02T00:00:00Z

json elastic_spec() {
  return {{"name", "stretch"},
          {"worker", {{"data", {{"train", "t.bin"}}}}},
          {"regions", {"DE", "FR"}},
          {"nodes", 2},
          {"elastic", {{"min_nodes", 1}, {"max_nodes", 2}}},
          {"migratable", true},
          {"scaling", {{{"nodes", 1}, {"tokens_per_second", 750}}, {{"nodes", 2}, {"tokens_per_second", 1000}}}},
          {"estimate", {{"duration_s", 4 * 3600}, {"checkpoint_gb", 12.5}}}};
}

// ---------------------------------------------------------------------------
// POST /v1/jobs: each bad field is named.

struct SpecCase {
  const char* sentence;
  std::function<void(json&)> edit;
  int status;         // 201 = accepted
  const char* field;  // "" when accepted
};

const SpecCase kSpecCases[] = {
    {"an elastic migratable job with a scaling curve is accepted", [](json&) {}, 201, ""},
    {"elastic alone keeps the nominal width as both bounds", [](json& j) { j["elastic"] = json::object(); }, 201, ""},
    {"migratable between two local regions is accepted (one filesystem)",
     [](json& j) { j.erase("elastic"); j.erase("scaling"); }, 201, ""},
    {"migratable between kubernetes regions with the same S3 location is accepted",
     [](json& j) { j["regions"] = {"S3A", "S3B"}; }, 201, ""},
    {"elastic must be an object", [](json& j) { j["elastic"] = 2; }, 400, "elastic"},
    {"an unknown elastic field is named", [](json& j) { j["elastic"]["min"] = 1; }, 400, "elastic.min"},
    {"a min_nodes of zero is refused", [](json& j) { j["elastic"]["min_nodes"] = 0; }, 400, "elastic.min_nodes"},
    {"a min_nodes above nodes is refused", [](json& j) { j["elastic"]["min_nodes"] = 3; }, 400, "elastic.min_nodes"},
    {"a max_nodes below nodes is refused", [](json& j) { j["elastic"]["max_nodes"] = 1; }, 400, "elastic.max_nodes"},
    {"a max_nodes above the node limit is refused", [](json& j) { j["elastic"]["max_nodes"] = 257; }, 400,
     "elastic.max_nodes"},
    {"a fractional max_nodes is refused", [](json& j) { j["elastic"]["max_nodes"] = 2.5; }, 400, "elastic.max_nodes"},
    {"migratable must be a boolean", [](json& j) { j["migratable"] = "yes"; }, 400, "migratable"},
    {"scaling must be an array", [](json& j) { j["scaling"] = {{"nodes", 1}}; }, 400, "scaling"},
    {"an empty scaling curve is refused", [](json& j) { j["scaling"] = json::array(); }, 400, "scaling"},
    {"a scaling point that is not an object is named by index", [](json& j) { j["scaling"][1] = 3; }, 400,
     "scaling[1]"},
    {"a scaling point of zero nodes is named", [](json& j) { j["scaling"][1]["nodes"] = 0; }, 400,
     "scaling[1].nodes"},
    {"a negative throughput is named", [](json& j) { j["scaling"][0]["tokens_per_second"] = -1; }, 400,
     "scaling[0].tokens_per_second"},
    {"a scaling point without its throughput is named", [](json& j) { j["scaling"][0].erase("tokens_per_second"); },
     400, "scaling[0].tokens_per_second"},
    {"an unknown scaling point field is named", [](json& j) { j["scaling"][0]["speed"] = 1; }, 400,
     "scaling[0].speed"},
    {"two points of one width are refused", [](json& j) { j["scaling"][1]["nodes"] = 1; }, 400, "scaling"},
    {"a throughput falling as the width grows is refused",
     [](json& j) { j["scaling"][1]["tokens_per_second"] = 500; }, 400, "scaling"},
    {"a negative checkpoint size is refused", [](json& j) { j["estimate"]["checkpoint_gb"] = -1; }, 400,
     "estimate.checkpoint_gb"},
    {"an elastic job that would not resume from its checkpoints is refused",
     [](json& j) { j["worker"]["checkpoint"] = {{"resume", false}}; }, 400, "worker.checkpoint.resume"},
    {"migratable with a region keeping checkpoints on its own volume is refused",
     [](json& j) { j["regions"] = {"DE", "K8"}; }, 422, "migratable"},
    {"migratable between a local and an S3 region is refused", [](json& j) { j["regions"] = {"DE", "S3A"}; }, 422,
     "migratable"},
    {"migratable between two different S3 locations is refused", [](json& j) { j["regions"] = {"S3A", "S3C"}; }, 422,
     "migratable"},
};

const char* kRegionsYaml =
    "regions:\n"
    "  - {name: DE, nodes: 2, intensity: 300}\n"
    "  - {name: FR, nodes: 2, intensity: 50}\n"
    "  - {name: K8, nodes: 2, intensity: 50, executor: kubernetes, kubernetes: {server: 'https://k.example:6443'}}\n"
    "  - {name: S3A, nodes: 2, intensity: 50, executor: kubernetes, kubernetes: {server: 'https://a.example:6443',"
    " checkpoint_s3: {url: 's3://ckpt/gs', endpoint: 'https://minio.example:9000', secret: greenshard-s3}}}\n"
    "  - {name: S3B, nodes: 2, intensity: 50, executor: kubernetes, kubernetes: {server: 'https://b.example:6443',"
    " checkpoint_s3: {url: 's3://ckpt/gs', endpoint: 'https://minio.example:9000', secret: greenshard-s3}}}\n"
    "  - {name: S3C, nodes: 2, intensity: 50, executor: kubernetes, kubernetes: {server: 'https://c.example:6443',"
    " checkpoint_s3: {url: 's3://other/gs', endpoint: 'https://minio.example:9000', secret: greenshard-s3}}}\n";

class ElasticSpecTable : public ::testing::TestWithParam<SpecCase> {};

TEST_P(ElasticSpecTable, IsCheckedAtTheRestEdge) {
  const auto& c = GetParam();
  ctltest::Options o;
  o.regions_yaml = kRegionsYaml;
  ctltest::Controller ctl(o);
  json s = elastic_spec();
  c.edit(s);
  auto cli = ctl.client(ctltest::kUserA);
  auto r = cli.Post("/v1/jobs", s.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, c.status) << r->body;
  json body = json::parse(r->body, nullptr, false);
  if (c.status == 201) {
    // The spec comes back as submitted, canonical, and parses to itself.
    const JobSpec back = parse_job_spec(body.at("spec"));
    EXPECT_EQ(back.to_json(), body.at("spec"));
    EXPECT_EQ(back.to_json(), parse_job_spec(s).to_json());
    auto got = cli.Get("/v1/jobs/" + body.at("id").get<std::string>());
    ASSERT_TRUE(got && got->status == 200);
    EXPECT_EQ(json::parse(got->body).at("spec"), body.at("spec"));
    return;
  }
  ASSERT_TRUE(body.is_object() && body.contains("error")) << r->body;
  EXPECT_EQ(body["error"]["field"], c.field) << r->body;
  if (body["error"]["code"] != "unknown_field") {  // those say "unknown field '<field>'"
    EXPECT_EQ(body["error"]["message"].get<std::string>().rfind(std::string(c.field) + ": ", 0), 0u) << r->body;
  }
  auto listed = cli.Get("/v1/jobs");
  ASSERT_TRUE(listed);
  EXPECT_TRUE(json::parse(listed->body).at("items").empty()) << "a refused spec is not stored";
}

INSTANTIATE_TEST_SUITE_P(ControllerElastic, ElasticSpecTable, ::testing::ValuesIn(kSpecCases),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerElastic, TheOpenApiDocumentDescribesTheElasticFields) {
  ctltest::Controller ctl;
  auto r = ctl.client().Get("/v1/openapi.json");
  ASSERT_TRUE(r && r->status == 200);
  const json doc = json::parse(r->body);
  const json& props = doc["components"]["schemas"]["JobSpec"]["properties"];
  for (const char* f : {"elastic", "migratable", "scaling"}) EXPECT_TRUE(props.contains(f)) << f;
  EXPECT_TRUE(props["estimate"]["properties"].contains("checkpoint_gb"));
  EXPECT_TRUE(doc["components"]["schemas"]["Job"]["properties"]["placement"]["properties"].contains("changes"));
}

// ---------------------------------------------------------------------------
// The store: typed columns, and an older store migrated.

struct Db {
  sqlite3* db = nullptr;
  explicit Db(const std::string& path) { EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK); }
  ~Db() { sqlite3_close(db); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "") << "\n" << sql;
  }
  // Every row of a query, columns joined by '|'.
  std::vector<std::string> rows(const std::string& sql) {
    std::vector<std::string> out;
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    while (st && sqlite3_step(st) == SQLITE_ROW) {
      std::string r;
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        auto t = sqlite3_column_text(st, i);
        r += (i ? "|" : "") + (t ? std::string(reinterpret_cast<const char*>(t)) : std::string("NULL"));
      }
      out.push_back(r);
    }
    sqlite3_finalize(st);
    return out;
  }
};

TEST(ControllerElasticStore, TheElasticFieldsAreTypedColumnsAndRowsNotDocumentKeys) {
  gstest::TempDir dir;
  ManualClock clock(kT0);
  std::string id;
  JobSpec submitted = parse_job_spec(elastic_spec());
  {
    Store store(dir.file("c.db"));
    Registry reg(store, clock);
    reg.load();
    id = reg.submit("team-a", submitted, "").job.id();
    auto plain = elastic_spec();
    plain.erase("elastic");
    plain.erase("migratable");
    plain.erase("scaling");
    reg.submit("team-a", parse_job_spec(plain), "");
    store.record_throughput(id, 2, 900, kT0);
    store.record_throughput(id, 2, 1100, kT0 + 5000);
    store.record_throughput(id, 1, 700, kT0 + 9000);
    store.record_throughput(id, 0, 700, kT0);    // ignored: no width
    store.record_throughput(id, 1, -1, kT0);     // ignored: no throughput
    auto m = store.measured_scaling(id);
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].nodes, 1);
    EXPECT_DOUBLE_EQ(m[0].tokens_per_second, 700);
    EXPECT_EQ(m[1].nodes, 2);
    EXPECT_DOUBLE_EQ(m[1].tokens_per_second, 1000);  // the mean of its samples
    EXPECT_EQ(m[1].samples, 2);
    EXPECT_EQ(m[1].updated_ms, kT0 + 5000);
  }
  {
    Db db(dir.file("c.db"));
    EXPECT_EQ(db.rows("SELECT min_nodes, max_nodes, migratable FROM jobs ORDER BY seq"),
              (std::vector<std::string>{"1|2|1", "NULL|NULL|0"}));
    EXPECT_EQ(db.rows("SELECT source, nodes, tokens_per_second FROM job_scaling WHERE job_id='" + id +
                      "' ORDER BY source, nodes"),
              (std::vector<std::string>{"declared|1|750.0", "declared|2|1000.0", "measured|1|700.0",
                                        "measured|2|1000.0"}));
    for (const auto& doc : db.rows("SELECT doc FROM jobs")) {
      const json spec = json::parse(doc).at("spec");
      EXPECT_FALSE(spec.contains("elastic") || spec.contains("migratable") || spec.contains("scaling")) << doc;
    }
  }
  Store store(dir.file("c.db"));
  auto jobs = store.load_all();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].spec().to_json(), submitted.to_json());
  EXPECT_TRUE(jobs[0].spec().elastic());
  EXPECT_FALSE(jobs[1].spec().elastic());
  EXPECT_FALSE(jobs[1].spec().to_json().contains("elastic"));
}

TEST(ControllerElasticStore, ASchemaFourStoreMigratesAndKeepsItsJobsAndReservations) {
  gstest::TempDir dir;
  const std::string path = dir.file("old.db");
  // A job as schema 4 stored it: its document, its reservation.
  Job old("jold00000000000001", "team-a", parse_job_spec(ctltest::spec()), kT0);
  old.seq = 1;
  PlacementView pv;
  pv.region = "DE";
  pv.policy = "spatio-temporal";
  pv.start_ms = kT0;
  pv.windows = {{kT0, kT0 + kHour}};
  ASSERT_TRUE(old.transition(JobState::kScheduled, "Placed", "by hand", kT0));
  old.placement = pv;
  {
    Db db(path);
    db.exec(
        "CREATE TABLE jobs (id TEXT PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, tenant TEXT NOT NULL,"
        " state TEXT NOT NULL, doc TEXT NOT NULL);"
        "CREATE INDEX jobs_tenant ON jobs(tenant, seq);"
        "ALTER TABLE jobs ADD COLUMN idem_key TEXT;"
        "CREATE UNIQUE INDEX jobs_idem ON jobs(tenant, idem_key) WHERE idem_key IS NOT NULL;"
        "CREATE TABLE decisions (id INTEGER PRIMARY KEY AUTOINCREMENT, cycle INTEGER NOT NULL,"
        " job_id TEXT NOT NULL, time_ms INTEGER NOT NULL, outcome TEXT NOT NULL, region TEXT, policy TEXT,"
        " explanation TEXT);"
        "CREATE TABLE reservations (job_id TEXT NOT NULL, region TEXT NOT NULL, start_ms INTEGER NOT NULL,"
        " end_ms INTEGER NOT NULL, nodes INTEGER NOT NULL, CHECK (end_ms > start_ms AND nodes > 0));"
        "CREATE TABLE load_history (hour_ms INTEGER PRIMARY KEY, busy_nodes REAL NOT NULL,"
        " capacity_nodes REAL NOT NULL);"
        "PRAGMA user_version=4;");
    std::string doc = old.to_document().dump();
    std::string q;
    for (char ch : doc) q += ch == '\'' ? std::string("''") : std::string(1, ch);
    db.exec("INSERT INTO jobs(id, seq, tenant, state, doc) VALUES('" + old.id() + "', 1, 'team-a', 'SCHEDULED', '" +
            q + "');");
    db.exec("INSERT INTO reservations VALUES('" + old.id() + "', 'DE', " + std::to_string(kT0) + ", " +
            std::to_string(kT0 + kHour) + ", 1);");
  }
  Store store(path);
  EXPECT_EQ(store.schema_version(), 5);
  auto jobs = store.load_all();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].id(), old.id());
  EXPECT_EQ(jobs[0].state(), JobState::kScheduled);
  EXPECT_FALSE(jobs[0].spec().elastic());
  EXPECT_EQ(jobs[0].spec().to_json(), old.spec().to_json());
  ASSERT_TRUE(jobs[0].placement);
  EXPECT_TRUE(jobs[0].placement->places.empty());
  EXPECT_EQ(window_place(jobs[0], 0), (WindowPlace{"DE", 1}));
  EXPECT_EQ(store.load_reservations(), (std::vector<Reservation>{{old.id(), "DE", kT0, kT0 + kHour, 1}}));
  EXPECT_TRUE(store.measured_scaling(old.id()).empty());
}

// ---------------------------------------------------------------------------
// The scheduler carries out a plan whose windows differ in region or width.

// A controller core over two regions, each with its own FakeExecutor.
struct Core {
  Core() : clock(kT0) {
    store = std::make_unique<Store>(dir.file("c.db"));
    registry = std::make_unique<Registry>(*store, clock);
    registry->load();
    regions = parse_regions_yaml(
        "regions:\n  - {name: DE, nodes: 2, intensity: 300}\n  - {name: FR, nodes: 2, intensity: 100}\n", "test");
    SchedulerOptions so;
    so.replan_period_ms = 0;  // the hand-made plan is final
    sched = std::make_unique<Scheduler>(*registry, clock, regions,
                                        std::map<std::string, Executor*>{{"DE", &de}, {"FR", &fr}}, &metrics, so);
  }
  // Submits the elastic job and gives it `plan` (SCHEDULED), as placement
  // would have: the scheduler's carrying out is under test, not the planner.
  std::string submit_with(const PlacementView& plan) {
    const std::string id = registry->submit("team-a", parse_job_spec(elastic_spec()), "").job.id();
    EXPECT_TRUE(registry->update(id, kAllTenants, [&](Job& j) {
      j.placement = plan;
      return j.transition(JobState::kScheduled, "Placed", "a hand-made plan", clock.now_ms());
    }));
    return id;
  }
  Job job(const std::string& id) const { return *registry->get(id); }
  double metric(const std::string& series) const {
    const std::string text = metrics.render();
    const auto at = text.find("\n" + series + " ");
    return at == std::string::npos ? 0.0 : std::stod(text.substr(at + series.size() + 2));
  }

  gstest::TempDir dir;
  ManualClock clock;
  Metrics metrics;
  FakeExecutor de{"fake-de"}, fr{"fake-fr"};
  std::unique_ptr<Store> store;
  std::unique_ptr<Registry> registry;
  std::vector<RegionConfig> regions;
  std::unique_ptr<Scheduler> sched;
};

// Two windows back to back at kT0 + 2 h (or after a pause): the first in DE
// on 2 nodes, the second `second` (and its planned change, when one).
PlacementView plan(WindowPlace second, int64_t second_start_h = 2) {
  PlacementView p;
  p.region = "DE";
  p.policy = "spatio-temporal";
  p.start_ms = kT0;
  p.windows = {{kT0, kT0 + 2 * kHour}, {kT0 + second_start_h * kHour, kT0 + (second_start_h + 2) * kHour}};
  p.places = {{"DE", 2}, second};
  p.expected_grams = 100;
  p.run_now_home_grams = 150;
  p.explanation = "a hand-made plan";
  if (!(second == WindowPlace{"DE", 2}))
    p.changes = {{kT0 + second_start_h * kHour, "DE", second.region, 2, second.nodes, 3.5, 12.5,
                  "cleaner hours ahead"}};
  return p;
}

struct ChangeCase {
  const char* sentence;
  WindowPlace second;
  int64_t second_start_h;
  const char* reason;          // of the second window's launch ("" = no relaunch)
  int resizes_shrink, resizes_grow, migrations;
  double avoided;              // greenshard_job_change_avoided_grams_total
};

const ChangeCase kChangeCases[] = {
    {"a resize at the boundary relaunches the gang one node narrower in the same region", {"DE", 1}, 2, "Resized",
     1, 0, 0, 12.5},
    {"a move starts the next window on the other region's executor", {"FR", 2}, 2, "Migrated", 0, 0, 1, 12.5},
    {"a move and a resize at once are one launch in the other region", {"FR", 1}, 2, "Migrated", 1, 0, 1, 12.5},
    {"a pause then the same place resumes without a change", {"DE", 2}, 3, "Resumed", 0, 0, 0, 0},
    {"back-to-back windows in the same place carry on without a restart", {"DE", 2}, 2, "", 0, 0, 0, 0},
};

class ChangeTable : public ::testing::TestWithParam<ChangeCase> {};

TEST_P(ChangeTable, AtTheWindowBoundary) {
  const ChangeCase& c = GetParam();
  Core core;
  const std::string id = core.submit_with(plan(c.second, c.second_start_h));
  // Each window is a reservation with its own region and width.
  EXPECT_EQ(core.store->load_reservations(),
            (std::vector<Reservation>{{id, "DE", kT0, kT0 + 2 * kHour, 2},
                                      {id, c.second.region, kT0 + c.second_start_h * kHour,
                                       kT0 + (c.second_start_h + 2) * kHour, c.second.nodes}}));
  core.sched->cycle();
  ASSERT_EQ(core.job(id).state(), JobState::kRunning);
  ASSERT_EQ(core.de.starts().size(), 1u);
  EXPECT_EQ(core.de.starts()[0].width(), 2);
  EXPECT_EQ(core.de.starts()[0].region, "DE");

  // Inside the first window nothing happens.
  core.clock.set_ms(kT0 + 2 * kHour - 1);
  core.sched->cycle();
  EXPECT_TRUE(core.de.stops().empty());

  core.clock.set_ms(kT0 + 2 * kHour);
  core.sched->cycle();
  const Job j = core.job(id);
  const std::vector<GangSpec> de = core.de.starts(), fr = core.fr.starts();
  if (!*c.reason) {
    EXPECT_TRUE(core.de.stops().empty()) << "no checkpoint-and-stop when nothing changes";
    EXPECT_EQ(j.state(), JobState::kRunning);
    EXPECT_EQ(j.gang.window, 1);
    EXPECT_EQ(de.size(), 1u);
  } else {
    ASSERT_EQ(core.de.stops().size(), 1u) << "the first gang checkpoints and stops";
    if (c.second_start_h > 2) {
      EXPECT_EQ(j.state(), JobState::kSuspended);  // paused until the next window opens
      core.clock.set_ms(kT0 + c.second_start_h * kHour);
      core.sched->cycle();
    }
    const Job k = core.job(id);
    ASSERT_EQ(k.state(), JobState::kRunning) << k.conditions().back().message;
    const std::vector<GangSpec>& second = c.second.region == "DE" ? core.de.starts() : core.fr.starts();
    const std::vector<GangSpec>& other = c.second.region == "DE" ? core.fr.starts() : core.de.starts();
    ASSERT_EQ(second.size(), c.second.region == "DE" ? 2u : 1u);
    EXPECT_EQ(other.size(), c.second.region == "DE" ? 0u : 1u);
    EXPECT_EQ(second.back().region, c.second.region);
    EXPECT_EQ(second.back().width(), c.second.nodes);
    EXPECT_EQ(second.back().spec.nodes, 2) << "the spec keeps its nominal width";
    EXPECT_EQ(k.gang.region, c.second.region);
    EXPECT_EQ(k.gang.nodes, c.second.nodes);
    EXPECT_EQ(k.gang.window, 1);
    // History: ... WindowClosed (SUSPENDED), <reason> (STARTING), GangRunning.
    const auto& conds = k.conditions();
    ASSERT_GE(conds.size(), 3u);
    EXPECT_EQ(conds[conds.size() - 3].reason, "WindowClosed");
    EXPECT_EQ(conds[conds.size() - 3].state, JobState::kSuspended);
    EXPECT_EQ(conds[conds.size() - 2].reason, c.reason);
    EXPECT_EQ(conds[conds.size() - 2].state, JobState::kStarting);
    if (c.avoided > 0) {
      const std::string& m = conds[conds.size() - 2].message;
      EXPECT_NE(m.find("from the newest checkpoint"), std::string::npos) << m;
      EXPECT_NE(m.find("expected to avoid 12.5 g"), std::string::npos) << m;
      EXPECT_NE(m.find("cleaner hours ahead"), std::string::npos) << m;
      EXPECT_NE(conds[conds.size() - 3].message.find("from this checkpoint"), std::string::npos);
    }
    EXPECT_EQ(k.recovery_count, 0) << "a change uses no restart";
  }
  EXPECT_EQ(core.metric("greenshard_job_resizes_total{direction=\"shrink\"}"), c.resizes_shrink);
  EXPECT_EQ(core.metric("greenshard_job_resizes_total{direction=\"grow\"}"), c.resizes_grow);
  EXPECT_EQ(core.metric("greenshard_job_migrations_total{from=\"DE\",to=\"FR\"}"), c.migrations);
  EXPECT_DOUBLE_EQ(core.metric("greenshard_job_change_avoided_grams_total"), c.avoided);
  // While the second gang runs, its nodes are held in its own region.
  const auto snap = core.sched->regions_now();
  for (const auto& r : snap)
    EXPECT_EQ(r.free_nodes, 2 - (r.name == c.second.region ? c.second.nodes : 0)) << r.name;
}

INSTANTIATE_TEST_SUITE_P(ControllerElastic, ChangeTable, ::testing::ValuesIn(kChangeCases),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerElastic, TheNextWindowNeverStartsBeforeThePreviousGangIsDown) {
  Core core;
  const std::string id = core.submit_with(plan({"FR", 1}));
  core.sched->cycle();
  ASSERT_EQ(core.job(id).state(), JobState::kRunning);
  // The DE gang takes its time to checkpoint: it still runs after stop().
  core.de.after_stop(FakeExecutor::status(GangPhase::kRunning));
  core.clock.set_ms(kT0 + 2 * kHour);
  for (int i = 0; i < 5; ++i) {
    core.sched->cycle();
    core.clock.advance_ms(60 * 1000);
    EXPECT_EQ(core.job(id).state(), JobState::kRunning) << "still the DE gang, checkpointing";
    EXPECT_TRUE(core.fr.starts().empty()) << "FR must not start while the DE gang is up (cycle " << i << ")";
  }
  EXPECT_EQ(core.de.stops().size(), 1u) << "asked once";
  // Its nodes stay held in DE meanwhile.
  for (const auto& r : core.sched->regions_now()) EXPECT_EQ(r.free_nodes, r.name == "DE" ? 0 : 2) << r.name;
  core.de.after_stop(FakeExecutor::status(GangPhase::kPreempted, "checkpointed", json{{"state", "preempted"}}));
  core.sched->cycle();
  const Job j = core.job(id);
  ASSERT_EQ(j.state(), JobState::kRunning) << j.conditions().back().message;
  ASSERT_EQ(core.fr.starts().size(), 1u);
  EXPECT_EQ(core.fr.starts()[0].width(), 1);
  EXPECT_EQ(j.conditions()[j.conditions().size() - 2].reason, "Migrated");
  for (const auto& r : core.sched->regions_now()) EXPECT_EQ(r.free_nodes, r.name == "FR" ? 1 : 2) << r.name;
}

TEST(ControllerElastic, ASuspendedJobWhoseWindowsAreAllOverResumesInItsLastPlace) {
  Core core;
  const std::string id = core.submit_with(plan({"FR", 1}, 3));
  core.sched->cycle();
  core.de.after_stop(FakeExecutor::status(GangPhase::kRunning));
  core.clock.set_ms(kT0 + 2 * kHour);
  core.sched->cycle();
  // The checkpoint took until after the second window: resume it now anyway.
  core.de.after_stop(FakeExecutor::status(GangPhase::kPreempted));
  core.clock.set_ms(kT0 + 6 * kHour);
  core.sched->cycle();
  const Job j = core.job(id);
  EXPECT_EQ(j.state(), JobState::kRunning);
  ASSERT_EQ(core.fr.starts().size(), 1u);
  EXPECT_EQ(j.gang, (GangPlace{"FR", 1, 1}));
}

TEST(ControllerElastic, PlacementGetsTheDeclaredElseTheMeasuredCurve) {
  // The view of the plan (GET) carries each window's region and width and
  // the planned changes.
  Core core;
  const std::string id = core.submit_with(plan({"FR", 1}));
  const json v = job_view(core.job(id));
  ASSERT_EQ(v["placement"]["windows"].size(), 2u);
  EXPECT_EQ(v["placement"]["windows"][1]["region"], "FR");
  EXPECT_EQ(v["placement"]["windows"][1]["nodes"], 1);
  ASSERT_EQ(v["placement"]["changes"].size(), 1u);
  EXPECT_EQ(v["placement"]["changes"][0]["move"], true);
  EXPECT_EQ(v["placement"]["changes"][0]["resize"], true);
  EXPECT_EQ(v["placement"]["changes"][0]["saved_grams"], 12.5);
  // A document round trip keeps them.
  const Job back = Job::from_document(core.job(id).to_document());
  EXPECT_EQ(back.placement->places, core.job(id).placement->places);
  EXPECT_EQ(back.placement->changes, core.job(id).placement->changes);
}

// A job placed by the real carbon planner gets an elastic carbon::Job: at
// least it is placed feasibly within its widths and allowed regions, and its
// reservations follow its windows.
TEST(ControllerElastic, TheRealPlannerPlacesAnElasticJobWithinItsWidthsAndRegions) {
  Core core;
  json s = elastic_spec();
  s["max_delay_s"] = 12 * 3600;
  const std::string id = core.registry->submit("team-a", parse_job_spec(s), "").job.id();
  core.sched->cycle();
  const Job j = core.job(id);
  ASSERT_TRUE(j.placement) << j.conditions().back().message;
  const auto& w = j.placement->windows;
  ASSERT_FALSE(w.empty());
  std::vector<Reservation> want;
  for (size_t i = 0; i < w.size(); ++i) {
    const WindowPlace at = window_place(j, i);
    EXPECT_TRUE(at.region == "DE" || at.region == "FR") << at.region;
    EXPECT_GE(at.nodes, 1);
    EXPECT_LE(at.nodes, 2);
    want.push_back({id, at.region, w[i].first, w[i].second, at.nodes});
  }
  if (j.state() == JobState::kScheduled) {
    EXPECT_EQ(core.store->load_reservations(), want);
  }
  // What the planner produced, for the report.
  std::printf("planner: %s\n", j.placement->explanation.c_str());
  for (size_t i = 0; i < w.size(); ++i)
    std::printf("  window %zu: %s .. %s in %s on %d nodes\n", i, format_rfc3339(w[i].first).c_str(),
                format_rfc3339(w[i].second).c_str(), window_place(j, i).region.c_str(), window_place(j, i).nodes);
}

// ---------------------------------------------------------------------------
// The simulation's gangs: width, speed, region and change overhead.

TEST(ControllerElastic, ASimulatedGangRunsAtItsWindowsWidthAndRegion) {
  ManualClock clock(kT0);
  SimExecutorOptions o;
  o.resume_overhead_s = 600;
  SimExecutor ex(clock, o);
  GangSpec g;
  g.job_id = "j1";
  g.spec = parse_job_spec(elastic_spec());  // 4 h of work at 2 nodes; 1 node does 75 % of 2's speed
  g.region = "DE";
  g.nodes = 2;
  ex.start(g);
  clock.set_ms(kT0 + 2 * kHour);  // half the work done
  ex.stop("j1", std::chrono::milliseconds(0));
  EXPECT_EQ(ex.poll("j1").phase, GangPhase::kPreempted);
  g.region = "FR";
  g.nodes = 1;
  clock.set_ms(kT0 + 3 * kHour);
  ex.start(g);
  // A move: 600 s resume overhead + 12.5 GB at 1.25 GB/s; then 2 h of work
  // at 0.75 speed = 9600 s.
  const int64_t end = kT0 + 3 * kHour + (600 + 10) * 1000 + 9600 * 1000;
  clock.set_ms(end - 1);
  EXPECT_EQ(ex.poll("j1").phase, GangPhase::kRunning);
  clock.set_ms(end);
  EXPECT_EQ(ex.poll("j1").phase, GangPhase::kSucceeded);
  const auto runs = ex.runs("j1");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].region, "DE");
  EXPECT_EQ(runs[0].nodes, 2);
  EXPECT_EQ(runs[0].end_ms, kT0 + 2 * kHour);
  EXPECT_EQ(runs[1].region, "FR");
  EXPECT_EQ(runs[1].nodes, 1);
  EXPECT_EQ(runs[1].start_ms, kT0 + 3 * kHour);
  EXPECT_EQ(runs[1].end_ms, end);
}

}  // namespace
