// Tenant quotas and preemption (controller/config/quota.h, Scheduler::preempt), as
// a table of sentences: quota x priority x interruptible -> outcome. The
// scheduler runs its real cycle on an injected clock; gangs are a
// FakeExecutor's (a stopped gang reports it checkpointed, as the worker
// does on SIGTERM). The real worker resuming from its preemption checkpoint
// is controller_e2e_test's E2EPreemption.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "common/spawn.h"
#include "controller/config/config_files.h"
#include "controller/scheduling/scheduler.h"
#include "fake_executor.h"

using namespace controller;
using ctltest::FakeExecutor;

namespace {

constexpr int64_t kT0 = 1764633600000;  // 2025-12-02T00:00:00Z

struct JobOf {
  std::string tenant;
  int priority = 0;
  bool interruptible = false;
  int nodes = 1;
};

struct QuotaCase {
  const char* sentence;
  int region_nodes;             // DE's capacity
  std::string quotas;           // quotas YAML ("" = none)
  std::vector<JobOf> running;   // started first, in this order
  JobOf incoming;
  std::string incoming_state;   // after the cycles
  std::string incoming_why;     // PENDING: start of its deferral reason
  std::vector<std::string> running_states;  // of `running`, same order
};

void PrintTo(const QuotaCase& c, std::ostream* os) { *os << c.sentence; }

std::string name_of(const ::testing::TestParamInfo<QuotaCase>& info) {
  std::string n;
  for (const char* p = info.param.sentence; *p; ++p) n += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  return n;
}

const JobOf A0{"team-a", 0, false}, A0i{"team-a", 0, true}, A5{"team-a", 5, false}, A5i{"team-a", 5, true};
const JobOf B0{"team-b", 0, false}, B0i{"team-b", 0, true}, B1i{"team-b", 1, true}, B9i{"team-b", 9, true};

std::vector<QuotaCase> quota_cases() {
  const std::string a1 = "tenants:\n  team-a: {DE: {nodes: 1}}\n";
  return {
      {"a job within its tenant's quota runs beside another tenant's job", 2, a1, {B0i}, A0, "RUNNING", "", {"RUNNING"}},
      {"a job over its tenant's quota waits saying so", 2, a1, {A0}, A0, "PENDING", "QuotaExceeded: team-a uses 1 of 1 nodes, 8 GPUs in DE; the job needs 1 node",
       {"RUNNING"}},
      {"over quota a higher-priority job preempts its tenant's lower-priority interruptible job", 2, a1, {A0i}, A5,
       "RUNNING", "", {"PENDING"}},
      {"over quota a job never preempts a non-interruptible job", 2, a1, {A0}, A5, "PENDING", "QuotaExceeded", {"RUNNING"}},
      {"over quota a job never preempts one of equal priority", 2, a1, {A5i}, A5, "PENDING", "QuotaExceeded", {"RUNNING"}},
      {"over quota a job never preempts another tenant's job", 3, a1, {A0, B0i}, A5, "PENDING", "QuotaExceeded",
       {"RUNNING", "RUNNING"}},
      {"a tenant without quota in the region waits and preempts nobody", 1, "tenants:\n  team-a: {}\n", {B0i}, A5,
       "PENDING", "QuotaExceeded: team-a has no quota in DE", {"RUNNING"}},
      {"a tenant not listed gets the default quota", 2, "default: {DE: {nodes: 1}}\ntenants:\n  team-b: {DE: {nodes: 2}}\n",
       {A0}, A0, "PENDING", "QuotaExceeded: team-a uses 1 of 1 nodes, 8 GPUs in DE; the job needs 1 node", {"RUNNING"}},
      {"a gpu quota counts nodes times gpus per node", 2, "tenants:\n  team-a: {DE: {gpus: 8}}\n", {A0}, A0, "PENDING",
       "QuotaExceeded: team-a uses 1 nodes, 8 of 8 GPUs in DE", {"RUNNING"}},
      {"in a full region a higher-priority job preempts another tenant's lower-priority interruptible job", 1, "", {B0i},
       A5, "RUNNING", "", {"PENDING"}},
      {"in a full region a job never preempts a non-interruptible job", 1, "", {B0}, A5, "PENDING", "waiting for capacity",
       {"RUNNING"}},
      {"in a full region a job never preempts a higher-priority job", 1, "", {B9i}, A5, "PENDING", "waiting for capacity",
       {"RUNNING"}},
      {"a job that would not fit even after preempting preempts nobody", 2, "", {B0i, B9i}, {"team-a", 5, false, 2},
       "PENDING", "waiting for capacity", {"RUNNING", "RUNNING"}},
      {"the lowest priority goes first", 2, "", {B0i, B1i}, A5, "RUNNING", "", {"PENDING", "RUNNING"}},
      {"among equal priorities the most recently started goes first", 2, "", {B0i, B0i}, A5, "RUNNING", "",
       {"RUNNING", "PENDING"}},
      {"a preemptor takes only as many victims as it needs", 3, "", {B0i, B0i, B0i}, {"team-a", 5, false, 2}, "RUNNING",
       "", {"RUNNING", "PENDING", "PENDING"}},
  };
}

class QuotaTable : public ::testing::TestWithParam<QuotaCase> {
 protected:
  void open(const QuotaCase& c) {
    store = std::make_unique<Store>(dir.file("c.db"));
    registry = std::make_unique<Registry>(*store, clock);
    registry->load();
    regions = parse_regions_yaml(
        "regions:\n  - {name: DE, nodes: " + std::to_string(c.region_nodes) + ", gpus_per_node: 8, intensity: 300}\n",
        "test");
    SchedulerOptions so;
    if (!c.quotas.empty()) so.quotas = parse_quota_yaml(c.quotas, "quotas.yaml", regions);
    sched = std::make_unique<Scheduler>(*registry, clock, regions, std::map<std::string, Executor*>{{"DE", &fake}},
                                        &metrics, so);
  }
  std::string submit(const JobOf& j) {
    nlohmann::json s = {{"name", "q"},
                        {"worker", {{"data", {{"train", "t.bin"}}}}},
                        {"regions", {"DE"}},
                        {"nodes", j.nodes},
                        {"gpus_per_node", 8},
                        {"priority", j.priority},
                        {"interruptible", j.interruptible}};
    return registry->submit(j.tenant, parse_job_spec(s), "").job.id();
  }
  Job job(const std::string& id) const { return *registry->get(id); }

  gstest::TempDir dir;
  ManualClock clock{kT0};
  Metrics metrics;
  FakeExecutor fake;
  std::unique_ptr<Store> store;
  std::unique_ptr<Registry> registry;
  std::vector<RegionConfig> regions;
  std::unique_ptr<Scheduler> sched;
};

TEST_P(QuotaTable, Outcome) {
  const QuotaCase& c = GetParam();
  open(c);
  std::vector<std::string> running;
  for (const JobOf& r : c.running) {
    running.push_back(submit(r));
    sched->cycle();  // placed and started
    sched->cycle();  // RUNNING
    ASSERT_EQ(to_string(job(running.back()).state()), "RUNNING") << job(running.back()).to_document().dump(1);
    clock.advance_ms(1000);  // later starts are "more recent"
  }
  const std::string id = submit(c.incoming);
  for (int k = 0; k < 4; ++k) {
    sched->cycle();
    clock.advance_ms(1000);
  }
  const Job in = job(id);
  EXPECT_EQ(to_string(in.state()), c.incoming_state) << in.to_document().dump(1);
  if (!c.incoming_why.empty()) {
    const std::string& why = in.waiting_reason;
    EXPECT_EQ(why.rfind(c.incoming_why, 0), 0u) << "deferred: " << why;
    // The API says so too (GET /v1/jobs/{id}: "waiting").
    const nlohmann::json w = job_view(in).at("waiting");
    ASSERT_TRUE(w.is_object()) << job_view(in).dump(1);
    EXPECT_EQ(w.at("reason"), c.incoming_why.rfind("QuotaExceeded", 0) == 0 ? "QuotaExceeded" : "WaitingForCapacity");
  } else {
    EXPECT_TRUE(job_view(in).at("waiting").is_null());
  }
  std::set<std::string> expect_stopped;
  for (size_t i = 0; i < running.size(); ++i) {
    const Job r = job(running[i]);
    EXPECT_EQ(to_string(r.state()), c.running_states[i]) << "running job " << i << ": " << r.to_document().dump(1);
    if (c.running_states[i] == "PENDING") {
      expect_stopped.insert(running[i]);
      EXPECT_EQ(r.conditions().back().reason, "Preempted") << r.to_document().dump(1);
      EXPECT_NE(r.conditions().back().message.find("preempted by " + id), std::string::npos)
          << r.conditions().back().message;
    }
  }
  std::set<std::string> stopped;
  for (const auto& [jid, grace] : fake.stops()) stopped.insert(jid);
  EXPECT_EQ(stopped, expect_stopped);
  // Every victim is counted once, by its tenant.
  const std::string m = metrics.render();
  if (!expect_stopped.empty()) {
    const std::string line = "greenshard_preemptions_total{region=\"DE\",tenant=\"team-" +
                             std::string(c.running[0].tenant == "team-a" ? "a" : "b") + "\"} " +
                             std::to_string(expect_stopped.size());
    EXPECT_NE(m.find(line), std::string::npos) << line << "\n" << m;
  } else {
    EXPECT_FALSE(std::regex_search(m, std::regex("greenshard_preemptions_total\\{[^}]*\\} [1-9]"))) << m;
  }
}

INSTANTIATE_TEST_SUITE_P(QuotaAndPreemption, QuotaTable, ::testing::ValuesIn(quota_cases()), name_of);

// The stop a preemption asks is the job's typed state (Job::stop), stored
// with it: a controller that restarts before the gang is down adopts the
// gang as one asked to stop, and its end still puts the job back in line.
TEST_F(QuotaTable, AControllerRestartedMidPreemptionAdoptsTheVictimAsAskedToStop) {
  const QuotaCase c{"restart mid-preemption", 1, "", {B0i}, A5, "RUNNING", "", {"PENDING"}};
  open(c);
  const std::string victim = submit(B0i);
  sched->cycle();
  sched->cycle();
  ASSERT_EQ(to_string(job(victim).state()), "RUNNING");
  const std::string id = submit(A5);
  fake.after_stop(std::nullopt);  // the victim checkpoints slowly: still running when the controller restarts
  for (int k = 0; k < 4 && !job(victim).stop.requested(); ++k) sched->cycle();
  const Job asked = job(victim);
  ASSERT_EQ(asked.stop.intent, StopIntent::kPreempted) << asked.to_document().dump(1);
  EXPECT_EQ(asked.stop.preempted_by, id);
  EXPECT_FALSE(asked.runtime.contains("suspending")) << "typed state, not the executor's blob";

  // The restart: a new store handle, registry and scheduler on the same file.
  sched.reset();
  registry.reset();
  store = std::make_unique<Store>(dir.file("c.db"));
  registry = std::make_unique<Registry>(*store, clock);
  registry->load();
  EXPECT_EQ(job(victim).stop, asked.stop);
  sched = std::make_unique<Scheduler>(*registry, clock, regions, std::map<std::string, Executor*>{{"DE", &fake}},
                                      &metrics, SchedulerOptions{});
  sched->recover();
  const auto adopts = fake.adopts();
  ASSERT_EQ(adopts.size(), 1u);
  EXPECT_EQ(adopts[0].job_id, victim);
  EXPECT_TRUE(adopts[0].stop_requested);
  fake.after_stop(FakeExecutor::status(GangPhase::kPreempted, "stopped as asked"));
  for (int k = 0; k < 4 && to_string(job(id).state()) != "RUNNING"; ++k) sched->cycle();
  EXPECT_EQ(to_string(job(victim).state()), "PENDING");
  EXPECT_EQ(job(victim).conditions().back().reason, "Preempted");
  EXPECT_FALSE(job(victim).stop.requested());
  EXPECT_EQ(to_string(job(id).state()), "RUNNING");
}

TEST(QuotaMetrics, UsageAndQuotaPerTenantAndRegion) {
  gstest::TempDir dir;
  ManualClock clock{kT0};
  Metrics metrics;
  FakeExecutor fake;
  Store store(dir.file("c.db"));
  Registry registry(store, clock);
  registry.load();
  auto regions = parse_regions_yaml("regions:\n  - {name: DE, nodes: 4, gpus_per_node: 8, intensity: 300}\n", "t");
  SchedulerOptions so;
  so.quotas = parse_quota_yaml("tenants:\n  team-a: {DE: {nodes: 3, gpus: 16}}\n", "quotas.yaml", regions);
  Scheduler sched(registry, clock, regions, {{"DE", &fake}}, &metrics, so);
  auto spec = [](int nodes) {
    return parse_job_spec({{"name", "q"}, {"worker", {{"data", {{"train", "t.bin"}}}}}, {"regions", {"DE"}},
                           {"nodes", nodes}, {"gpus_per_node", 8}});
  };
  registry.submit("team-a", spec(2), "");
  registry.submit("team-a", spec(1), "");  // 3 nodes = 24 GPUs > 16: waits
  sched.cycle();
  sched.cycle();
  const std::string m = metrics.render();
  for (const char* line : {"greenshard_tenant_quota_nodes{region=\"DE\",tenant=\"team-a\"} 3",
                           "greenshard_tenant_quota_gpus{region=\"DE\",tenant=\"team-a\"} 16",
                           "greenshard_tenant_usage_nodes{region=\"DE\",tenant=\"team-a\"} 2",
                           "greenshard_tenant_usage_gpus{region=\"DE\",tenant=\"team-a\"} 16",
                           "greenshard_quota_waiting_jobs{tenant=\"team-a\"} 1"})
    EXPECT_NE(m.find(line), std::string::npos) << line << "\n" << m;
}

struct BadQuota {
  const char* sentence;
  const char* yaml;
  const char* error;
};

TEST(QuotaFile, BadInputIsRefusedNamingTheKey) {
  const auto regions = parse_regions_yaml("regions:\n  - {name: DE, nodes: 4}\n", "t");
  const BadQuota cases[] = {
      {"a negative quota", "tenants:\n  team-a: {DE: {nodes: -1}}\n",
       "quotas.yaml: tenants.team-a.DE.nodes: must be in [0, 1000000], got -1"},
      {"an unknown region", "tenants:\n  team-a: {FR: {nodes: 1}}\n",
       "quotas.yaml: tenants.team-a.FR: no such region in the regions file (regions: DE)"},
      {"an unknown field", "tenants:\n  team-a: {DE: {cpus: 1}}\n",
       "quotas.yaml: tenants.team-a.DE: unknown key 'cpus' (known: nodes, gpus)"},
      {"an unknown top-level key", "tenant:\n  team-a: {}\n", "quotas.yaml: unknown key 'tenant' (known: default, tenants)"},
      {"a bad tenant name", "tenants:\n  Team_A: {DE: {nodes: 1}}\n",
       "quotas.yaml: tenants.Team_A: a tenant is 1..63 of [a-z0-9-]"},
      {"a quota that is not a number", "tenants:\n  team-a: {DE: {gpus: many}}\n",
       "quotas.yaml: tenants.team-a.DE.gpus: expected an integer"},
      {"a list instead of a map", "- team-a\n", "quotas.yaml: expected a map at the top level"},
  };
  for (const auto& c : cases) {
    try {
      parse_quota_yaml(c.yaml, "quotas.yaml", regions);
      ADD_FAILURE() << c.sentence << ": accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), c.error) << c.sentence;
    }
  }
  // An empty file is no quotas; a listed tenant without a region has none there.
  EXPECT_TRUE(parse_quota_yaml("", "quotas.yaml", regions).empty());
  const QuotaConfig q = parse_quota_yaml("tenants:\n  team-a: {}\n", "quotas.yaml", regions);
  QuotaLedger l(q, regions);
  EXPECT_EQ(l.room("team-a", "DE"), 0);
  EXPECT_EQ(l.room("team-b", "DE"), INT_MAX);
}

}  // namespace
