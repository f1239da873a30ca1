// Job state machine and the SQLite store: real files in a temp dir.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <set>
#include <thread>

#include "common/spawn.h"
#include "controller/store/registry.h"
#include "controller/store/store.h"

using namespace controller;

namespace {

JobSpec spec(const std::string& name = "demo") {
  return parse_job_spec(nlohmann::json{{"name", name},
                                       {"worker", {{"data", {{"train", "x.bin"}}}}},
                                       {"regions", {"DE", "FR"}},
                                       {"nodes", 2}});
}

// The legal edges, written out by hand (not derived from the code).
const std::set<std::pair<JobState, JobState>> kLegal = {
    {JobState::kPending, JobState::kScheduled},     {JobState::kPending, JobState::kFailed},
    {JobState::kPending, JobState::kCancelled},     {JobState::kScheduled, JobState::kStarting},
    {JobState::kScheduled, JobState::kPending},     {JobState::kScheduled, JobState::kFailed},
    {JobState::kScheduled, JobState::kCancelled},   {JobState::kStarting, JobState::kRunning},
    {JobState::kStarting, JobState::kRecovering},   {JobState::kStarting, JobState::kFailed},
    {JobState::kStarting, JobState::kCancelled},    {JobState::kRunning, JobState::kSucceeded},
    {JobState::kRunning, JobState::kRecovering},    {JobState::kRunning, JobState::kSuspended},
    {JobState::kRunning, JobState::kFailed},        {JobState::kRunning, JobState::kCancelled},
    {JobState::kRunning, JobState::kPending},  // preempted: checkpointed and requeued
    {JobState::kRecovering, JobState::kStarting},   {JobState::kRecovering, JobState::kFailed},
    {JobState::kRecovering, JobState::kCancelled},  {JobState::kSuspended, JobState::kStarting},
    {JobState::kSuspended, JobState::kFailed},      {JobState::kSuspended, JobState::kCancelled},
};

// Drives a fresh job to `target` along legal edges.
Job job_in(JobState target) {
  Job j("j1", "team-a", spec(), 1000);
  auto go = [&](JobState s) { ASSERT_TRUE(j.transition(s, "T", "t", 2000)); };
  using S = JobState;
  std::map<S, std::vector<S>> path = {
      {S::kPending, {}},
      {S::kScheduled, {S::kScheduled}},
      {S::kStarting, {S::kScheduled, S::kStarting}},
      {S::kRunning, {S::kScheduled, S::kStarting, S::kRunning}},
      {S::kRecovering, {S::kScheduled, S::kStarting, S::kRunning, S::kRecovering}},
      {S::kSuspended, {S::kScheduled, S::kStarting, S::kRunning, S::kSuspended}},
      {S::kSucceeded, {S::kScheduled, S::kStarting, S::kRunning, S::kSucceeded}},
      {S::kFailed, {S::kFailed}},
      {S::kCancelled, {S::kCancelled}}};
  for (S s : path.at(target)) go(s);
  return j;
}

}  // namespace

TEST(ControllerJob, EveryTransitionIsAllowedExactlyWhenListed) {
  for (JobState from : kAllStates)
    for (JobState to : kAllStates) {
      Job j = job_in(from);
      ASSERT_EQ(j.state(), from);
      const bool legal = kLegal.count({from, to}) > 0;
      EXPECT_EQ(allowed_transition(from, to), legal) << to_string(from) << "->" << to_string(to);
      size_t conds = j.conditions().size();
      EXPECT_EQ(j.transition(to, "Test", "", 5000), legal) << to_string(from) << "->" << to_string(to);
      // A refused transition changes nothing.
      EXPECT_EQ(j.state(), legal ? to : from);
      EXPECT_EQ(j.conditions().size(), conds + (legal ? 1 : 0));
    }
}

TEST(ControllerJob, TerminalStatesHaveNoWayOut) {
  for (JobState s : {JobState::kSucceeded, JobState::kFailed, JobState::kCancelled}) {
    EXPECT_TRUE(is_terminal(s));
    for (JobState to : kAllStates) EXPECT_FALSE(allowed_transition(s, to));
  }
}

TEST(ControllerJob, StateNamesRoundTripAndUnknownNamesAreRejected) {
  for (JobState s : kAllStates) EXPECT_EQ(parse_state(to_string(s)), s);
  EXPECT_FALSE(parse_state("running").has_value());
  EXPECT_FALSE(parse_state("").has_value());
}

// A job that suspends and resumes for months keeps a bounded history: its
// first condition and the 63 newest, in order; the copy taken before keeps
// its own.
TEST(ControllerJob, TheConditionHistoryKeepsTheFirstAndTheNewest) {
  Job j = job_in(JobState::kRunning);
  const Job before = j;
  int64_t t = 3000;
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(j.transition(JobState::kSuspended, "WindowClosed", "w" + std::to_string(i), ++t));
    ASSERT_TRUE(j.transition(JobState::kStarting, "Resumed", "s" + std::to_string(i), ++t));
    ASSERT_TRUE(j.transition(JobState::kRunning, "GangRunning", "r" + std::to_string(i), ++t));
  }
  const auto& cs = j.conditions();
  ASSERT_EQ(cs.size(), 64u);
  EXPECT_EQ(cs.front().reason, "Submitted");
  EXPECT_EQ(cs.back().message, "r39");
  EXPECT_EQ(cs[1].message, "w19");   // 120 after the 4 of job_in: the 63 newest are the 58th on
  for (size_t i = 2; i < cs.size(); ++i) EXPECT_EQ(cs[i].time_ms, cs[i - 1].time_ms + 1);
  EXPECT_EQ(before.conditions().size(), 4u);
}

TEST(ControllerJob, DocumentRoundTripKeepsEverything) {
  Job j = job_in(JobState::kRecovering);
  j.placement = PlacementView{"FR", "carbon-region", 5, {{5, 10}, {20, 30}}, 1.5, 2.5, "why", 7};
  j.progress.step = 42;
  j.progress.operational_grams = 3.25;
  j.recovery_count = 2;
  j.failure_reason = "rank 1 died";
  j.runtime = {{"pgid", 123}};
  j.stop = {StopIntent::kPreempted, "preempted by jb", "jb"};
  j.waiting_reason = "waiting for capacity";
  Job k = Job::from_document(j.to_document());
  EXPECT_EQ(k.to_document(), j.to_document());
  EXPECT_EQ(k.state(), JobState::kRecovering);
  EXPECT_EQ(k.stop, j.stop);
  EXPECT_EQ(k.waiting_reason, j.waiting_reason);
}

TEST(ControllerJob, StopAndWaitingStateStoredInTheRuntimeByEarlierVersionsIsCarriedOver) {
  // Before they were typed, the scheduler kept these in the executor's blob.
  auto d = job_in(JobState::kRunning).to_document();
  d["runtime"] = {{"pgid", 7}, {"suspending", true}, {"suspend_message", "preempted by jb"},
                  {"preempted_by", "jb"}, {"deferred", "waiting for capacity"}};
  Job k = Job::from_document(d);
  EXPECT_EQ(k.stop, (StopRequest{StopIntent::kPreempted, "preempted by jb", "jb"}));
  EXPECT_EQ(k.waiting_reason, "waiting for capacity");
  EXPECT_EQ(k.runtime, nlohmann::json({{"pgid", 7}}));
  // A window-end stop had no preempted_by; a finished stop was "suspending": false.
  d["runtime"] = {{"suspending", true}, {"suspend_message", "checkpointed at the end of its window"}};
  EXPECT_EQ(Job::from_document(d).stop,
            (StopRequest{StopIntent::kWindowEnd, "checkpointed at the end of its window", ""}));
  d["runtime"] = {{"suspending", false}};
  EXPECT_FALSE(Job::from_document(d).stop.requested());
  d["runtime"] = nlohmann::json::object();
  d["stop"] = {{"intent", "exploded"}};
  EXPECT_THROW(Job::from_document(d), std::runtime_error);
}

TEST(ControllerJob, ADocumentWithAnUnknownStateIsRefused) {
  auto d = job_in(JobState::kPending).to_document();
  d["state"] = "EXPLODED";
  EXPECT_THROW(Job::from_document(d), std::runtime_error);
}

// A job is written at every state change; its spec never changes, and its
// conditions and placement are replaced whole: the store makes each one's
// text once. What it stores is still each write's own (a new placement, a
// copy of the job that kept the old placement and conditions, none, another
// job's spec under the same id), read back whole after reopening.
TEST(ControllerStore, EachWriteStoresTheJobsOwnSpecConditionsAndPlacement) {
  gstest::TempDir dir;
  const std::string path = dir.file("c.db");
  Job j = job_in(JobState::kScheduled);
  j.seq = 1;
  const PlacementView first{"FR", "carbon-region", 5, {{5, 10}}, 1.5, 2.5, "first plan", 7};
  const PlacementView second{"DE", "carbon-window", 20, {{20, 30}, {40, 50}}, 2.5, 3.5, "second plan", 8};
  auto stored = [&](Store& s) {
    auto all = s.load_all();
    EXPECT_EQ(all.size(), 1u);
    return all.empty() ? Job::from_document(j.to_document()) : all[0];
  };
  Store s(path);
  j.placement = first;
  s.write_one(j);
  const Job kept = j;   // shares the first placement
  ASSERT_TRUE(j.transition(JobState::kStarting, "T", "t", 3000));
  s.write_one(j);
  EXPECT_EQ(stored(s).to_document(), j.to_document());
  j.placement = second;   // re-planned: a new placement, same job
  s.write_one(j);
  EXPECT_EQ(stored(s).placement->explanation, "second plan");
  EXPECT_EQ(stored(s).to_document(), j.to_document());
  s.write_one(kept);   // an older copy: its own (first) placement, its own conditions
  EXPECT_EQ(stored(s).placement->explanation, "first plan");
  EXPECT_EQ(stored(s).to_document(), kept.to_document());
  JobSpec other_spec = j.spec();
  other_spec.name = "another-name";
  Job other("j1", "team-a", other_spec, 1000);
  other.seq = 1;
  s.write_one(other);
  EXPECT_EQ(stored(s).spec().name, "another-name");
  EXPECT_EQ(stored(s).to_document(), other.to_document());
  j.placement = std::nullopt;
  s.write_one(j);
  EXPECT_FALSE(stored(s).placement.has_value());
  j.placement = second;
  ASSERT_TRUE(j.transition(JobState::kRunning, "T", "t", 4000));
  ASSERT_TRUE(j.transition(JobState::kSucceeded, "T", "t", 5000));
  s.write_one(j);
  s.write_one(j);   // an ended job's text is not kept: made again
  Store reopened(path);
  EXPECT_EQ(stored(reopened).to_document(), j.to_document());
}

TEST(ControllerStore, JobsSurviveReopening) {
  gstest::TempDir dir;
  const std::string path = dir.file("c.db");
  Job j = job_in(JobState::kRunning);
  j.seq = 1;
  {
    Store s(path);
    EXPECT_EQ(s.schema_version(), Store::kSchemaVersion);
    s.write_one(j);
    s.write({}, {}, {{3, "j1", 99, controller::DecisionOutcome::kAdmitted, "DE", "run-now-home", "because"}});
  }
  Store s(path);
  auto all = s.load_all();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].to_document(), j.to_document());
  auto d = s.decisions("j1");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].explanation, "because");
  EXPECT_EQ(d[0].outcome, controller::DecisionOutcome::kAdmitted);
  EXPECT_EQ(d[0].cycle, 3);
}

TEST(ControllerStore, UsesWalAndFullSync) {
  gstest::TempDir dir;
  Store s(dir.file("c.db"));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.file("c.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode;", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST(ControllerStore, AVersionOneDatabaseIsMigratedAndKeepsItsJobs) {
  gstest::TempDir dir;
  const std::string path = dir.file("old.db");
  Job j = job_in(JobState::kPending);
  j.seq = 5;
  {
    // Build a schema-1 database by hand, as the first release wrote it.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    std::string sql =
        "CREATE TABLE jobs (id TEXT PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, tenant TEXT NOT NULL,"
        " state TEXT NOT NULL, doc TEXT NOT NULL);"
        "CREATE INDEX jobs_tenant ON jobs(tenant, seq);"
        "PRAGMA user_version=1;";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    std::string doc = j.to_document().dump();
    std::string ins = "INSERT INTO jobs VALUES('j1', 5, 'team-a', 'PENDING', '" + doc + "');";
    ASSERT_EQ(sqlite3_exec(db, ins.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  Store s(path);
  EXPECT_EQ(s.schema_version(), Store::kSchemaVersion);
  auto all = s.load_all();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id(), "j1");
  // The migrated columns work: a decision can be logged, an idempotency key stored.
  all[0].idempotency_key = "k1";
  s.write({&all[0]}, {}, {{1, "j1", 1, controller::DecisionOutcome::kAdmitted, "DE", "p", "e"}});
  EXPECT_EQ(s.decisions("j1").size(), 1u);
}

TEST(ControllerStore, ADatabaseFromANewerControllerIsRefused) {
  gstest::TempDir dir;
  const std::string path = dir.file("new.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "PRAGMA user_version=99;", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  try {
    Store s(path);
    FAIL() << "opened a newer database";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("newer than this controller"), std::string::npos) << e.what();
  }
}

TEST(ControllerStore, ACorruptRowNamesTheJob) {
  gstest::TempDir dir;
  const std::string path = dir.file("c.db");
  { Store s(path); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "INSERT INTO jobs(id, seq, tenant, state, doc) VALUES('jbad', 1, 't', 'PENDING', '{oops');",
               nullptr, nullptr, nullptr);
  sqlite3_close(db);
  Store s(path);
  try {
    s.load_all();
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("jbad"), std::string::npos);
  }
}

TEST(ControllerStore, ConcurrentWritersAreGroupCommitted) {
  gstest::TempDir dir;
  Store s(dir.file("c.db"));
  constexpr int kThreads = 8, kEach = 50;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        Job j("j" + std::to_string(t) + "x" + std::to_string(i), "t", spec(), 1);
        j.seq = t * 1000 + i + 1;
        s.write_one(j);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(s.load_all().size(), size_t(kThreads * kEach));
  // Fewer transactions than writes: batches were shared.
  EXPECT_LT(s.commits(), kThreads * kEach);
}

TEST(ControllerStore, EveryFsyncOfTheWalIsCountedAndTimed) {
  gstest::TempDir dir;
  Store s(dir.file("t.db"));
  EXPECT_EQ(s.commits(), 0);
  EXPECT_EQ(s.sync_seconds(), 0.0);
  Job a("ja", "t", spec(), 1);
  a.seq = 1;
  s.write_one(a);
  EXPECT_EQ(s.commits(), 1);
  const double first = s.sync_seconds();
  EXPECT_GT(first, 0.0);
  Job b("jb", "t", spec(), 1);
  b.seq = 2;
  s.write_one(b);
  EXPECT_EQ(s.commits(), 2);
  EXPECT_GT(s.sync_seconds(), first);
}

TEST(ControllerStore, ABadWriteAmongConcurrentWritersFailsAloneAndNothingOfItIsStored) {
  gstest::TempDir dir;
  Store s(dir.file("c.db"));
  Job first("first", "t", spec(), 1);
  first.seq = 1;
  s.write_one(first);
  // 8 writers; one of writer 0's jobs reuses seq 1 (UNIQUE), so its
  // transaction fails, whichever group it was committed with.
  constexpr int kThreads = 8, kEach = 20;
  std::atomic<int> failures{0}, others_failed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const bool bad = t == 0 && i == kEach / 2;
        Job j(bad ? "bad" : "j" + std::to_string(t) + "x" + std::to_string(i), "t", spec(), 1);
        j.seq = bad ? 1 : 10 + t * 1000 + i;
        try {
          s.write_one(j);
        } catch (const StoreError&) {
          (bad ? failures : others_failed)++;
        }
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 1);
  EXPECT_EQ(others_failed.load(), 0);
  const auto all = s.load_all();
  EXPECT_EQ(all.size(), size_t(1 + kThreads * kEach - 1));
  for (const Job& j : all) EXPECT_NE(j.id(), "bad");
}

TEST(ControllerRegistry, IdempotencyKeyReturnsTheSameJobAndRefusesAnotherBody) {
  gstest::TempDir dir;
  Store s(dir.file("c.db"));
  ManualClock clock(1000);
  Registry r(s, clock);
  auto a = r.submit("team-a", spec("one"), "key-1");
  auto b = r.submit("team-a", spec("one"), "key-1");
  EXPECT_TRUE(a.created);
  EXPECT_FALSE(b.created);
  EXPECT_EQ(a.job.id(), b.job.id());
  try {
    r.submit("team-a", spec("two"), "key-1");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 409);
  }
  // Keys are per tenant.
  EXPECT_TRUE(r.submit("team-b", spec("two"), "key-1").created);
  // And survive a restart.
  Registry r2(s, clock);
  r2.load();
  EXPECT_EQ(r2.submit("team-a", spec("one"), "key-1").job.id(), a.job.id());
}

TEST(ControllerRegistry, QuotaCountsOnlyUnfinishedJobs) {
  gstest::TempDir dir;
  Store s(dir.file("c.db"));
  ManualClock clock(1000);
  Registry r(s, clock, RegistryOptions{2});
  auto a = r.submit("t", spec(), "");
  r.submit("t", spec(), "");
  EXPECT_THROW(
      try { r.submit("t", spec(), ""); } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 429);
        throw;
      },
      ApiError);
  r.update(a.job.id(), kAllTenants, [&](Job& j) { return j.transition(JobState::kCancelled, "C", "", 2); });
  EXPECT_TRUE(r.submit("t", spec(), "").created);
}

// live_jobs, live_count and count_by_state come from indexes kept in step
// with every write (not a scan of every job): they must agree with the jobs
// through submit, a placement, a requeue, an end, a delete and a reload.
TEST(ControllerRegistry, StateIndexesFollowEveryChangeAndSurviveAReload) {
  gstest::TempDir dir;
  ManualClock clock(1000);
  std::vector<std::string> ids;
  {
    Store s(dir.file("c.db"));
    Registry r(s, clock);
    for (int i = 0; i < 4; ++i) {
      JobSpec sp = spec("j" + std::to_string(i));
      sp.priority = i == 2 ? 5 : 0;
      ids.push_back(r.submit("t", sp, "").job.id());
    }
    // Pending order: priority first (j2), then age.
    auto live = r.live_jobs();
    ASSERT_EQ(live.size(), 4u);
    EXPECT_EQ(live[0].id(), ids[2]);
    EXPECT_EQ(live[1].id(), ids[0]);
    EXPECT_EQ(r.live_jobs(1).size(), 1u);
    r.update(ids[0], kAllTenants, [&](Job& j) { return j.transition(JobState::kScheduled, "P", "", 2); });
    r.update(ids[1], kAllTenants, [&](Job& j) { return j.transition(JobState::kCancelled, "C", "", 2); });
    auto counts = r.count_by_state();
    EXPECT_EQ(counts[JobState::kPending], 2);
    EXPECT_EQ(counts[JobState::kScheduled], 1);
    EXPECT_EQ(counts[JobState::kCancelled], 1);
    EXPECT_EQ(r.live_count(), 3);
    // Not pending: listed before the pending ones, even with max_pending 0.
    live = r.live_jobs(0);
    ASSERT_EQ(live.size(), 1u);
    EXPECT_EQ(live[0].id(), ids[0]);
    // Requeued: pending again, in its place by age.
    r.update_many({ids[0]}, [&](Job& j) { return j.transition(JobState::kPending, "R", "", 3); });
    live = r.live_jobs();
    ASSERT_EQ(live.size(), 3u);
    EXPECT_EQ(live[0].id(), ids[2]);
    EXPECT_EQ(live[1].id(), ids[0]);
    EXPECT_EQ(live[2].id(), ids[3]);
    EXPECT_TRUE(r.remove(ids[1], kAllTenants));
    EXPECT_EQ(r.count_by_state()[JobState::kCancelled], 0);
    EXPECT_EQ(r.size(), 3);
  }
  Store s(dir.file("c.db"));
  Registry r(s, clock);
  r.load();
  EXPECT_EQ(r.live_count(), 3);
  EXPECT_EQ(r.count_by_state()[JobState::kPending], 3);
  auto live = r.live_jobs();
  ASSERT_EQ(live.size(), 3u);
  EXPECT_EQ(live[0].id(), ids[2]);
  EXPECT_EQ(live[2].id(), ids[3]);
}

TEST(ControllerRegistry, OtherTenantsJobsAreInvisible) {
  gstest::TempDir dir;
  Store s(dir.file("c.db"));
  ManualClock clock(1000);
  Registry r(s, clock);
  auto a = r.submit("team-a", spec(), "");
  EXPECT_TRUE(r.get(a.job.id(), "team-a"));
  EXPECT_FALSE(r.get(a.job.id(), "team-b"));
  EXPECT_TRUE(r.get(a.job.id(), kAllTenants));
  EXPECT_FALSE(r.update(a.job.id(), "team-b", [](Job&) { return true; }));
}

// list() through its indexes: a store of 300 jobs, 100 each of team-a,
// team-b and team-c in turn (seq 1, 2, 3, 4 ...), every fourth of them
// cancelled. Each row: the filter, then the page's first and last seq, its
// size, the next page's start, and how many jobs the list looked at -- at
// most the page and one more, however many jobs the store holds.
struct ListCase {
  const char* sentence;
  const char* tenant;  // "" = all
  std::optional<JobState> state;
  int64_t after_seq;
  int limit;
  int64_t first, last;
  size_t size;
  int64_t next_after_seq;
};
class ControllerRegistryList : public ::testing::TestWithParam<ListCase> {};

const ListCase kListCases[] = {
    {"every job, first page", "", std::nullopt, 0, 10, 1, 10, 10, 10},
    {"every job, a later page", "", std::nullopt, 295, 10, 296, 300, 5, 0},
    {"one tenant skips the others' jobs", "team-b", std::nullopt, 0, 5, 2, 14, 5, 14},
    {"one tenant's last page", "team-c", std::nullopt, 290, 10, 291, 300, 4, 0},
    {"one state among all tenants", "", JobState::kCancelled, 0, 3, 4, 12, 3, 12},
    {"one tenant in one state", "team-a", JobState::kCancelled, 0, 2, 4, 16, 2, 16},
    {"one tenant in one state, to the end", "team-a", JobState::kCancelled, 280, 100, 292, 292, 1, 0},
    {"a state nobody is in", "team-b", JobState::kRunning, 0, 100, 0, 0, 0, 0},
    {"a tenant with no jobs", "team-z", std::nullopt, 0, 100, 0, 0, 0, 0},
};

TEST_P(ControllerRegistryList, PagesComeFromTheFilterIndexAndCostThePage) {
  const ListCase& c = GetParam();
  gstest::TempDir dir;
  Store s(dir.file("c.db"));
  ManualClock clock(1000);
  Registry r(s, clock);
  const char* tenants[] = {"team-a", "team-b", "team-c"};
  for (int i = 0; i < 300; ++i) {
    const std::string id = r.submit(tenants[i % 3], spec(), "").job.id();
    if ((i + 1) % 4 == 0)
      r.update(id, kAllTenants, [&](Job& j) { return j.transition(JobState::kCancelled, "C", "", 2); });
  }
  ListFilter f;
  f.tenant = *c.tenant ? c.tenant : kAllTenants;
  f.state = c.state;
  f.after_seq = c.after_seq;
  f.limit = c.limit;
  const ListPage page = r.list(f);
  ASSERT_EQ(page.jobs.size(), c.size);
  if (c.size > 0) {
    EXPECT_EQ(page.jobs.front().seq, c.first);
    EXPECT_EQ(page.jobs.back().seq, c.last);
  }
  for (const Job& j : page.jobs) {
    if (*c.tenant) EXPECT_EQ(j.tenant(), c.tenant);
    if (c.state) EXPECT_EQ(j.state(), *c.state);
    EXPECT_GT(j.seq, c.after_seq);
  }
  EXPECT_EQ(page.next_after_seq, c.next_after_seq);
  EXPECT_LE(page.examined, static_cast<int64_t>(c.size) + 1);
}

INSTANTIATE_TEST_SUITE_P(Table, ControllerRegistryList, ::testing::ValuesIn(kListCases),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerStore, ADecisionWithAnOutcomeNoControllerWritesIsACorruptStoreNamingIt) {
  gstest::TempDir dir;
  const std::string path = dir.file("c.db");
  {
    Store s(path);
    s.write({}, {}, {{1, "j1", 1, controller::DecisionOutcome::kDeferred, "", "p", "e"}});
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE decisions SET outcome='maybe';", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  Store s(path);
  try {
    s.decisions("j1");
    FAIL() << "a decision with outcome 'maybe' was read";
  } catch (const controller::StoreCorrupt& e) {
    EXPECT_NE(std::string(e.what()).find("unknown outcome 'maybe'"), std::string::npos) << e.what();
  }
}
