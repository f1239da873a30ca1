#include "controller/store/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

namespace controller {
namespace {

// Migration i (1-based) brings the schema from version i-1 to i. Never edit
// a shipped migration: append a new one.
const char* const kMigrations[] = {
    // 1: jobs
    "CREATE TABLE jobs ("
    "  id TEXT PRIMARY KEY,"
    "  seq INTEGER NOT NULL UNIQUE,"
    "  tenant TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  doc TEXT NOT NULL);"
    "CREATE INDEX jobs_tenant ON jobs(tenant, seq);",
    // 2: idempotency keys
    "ALTER TABLE jobs ADD COLUMN idem_key TEXT;"
    "CREATE UNIQUE INDEX jobs_idem ON jobs(tenant, idem_key) WHERE idem_key IS NOT NULL;",
    // 3: decision log
    "CREATE TABLE decisions ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  cycle INTEGER NOT NULL,"
    "  job_id TEXT NOT NULL,"
    "  time_ms INTEGER NOT NULL,"
    "  outcome TEXT NOT NULL,"
    "  region TEXT, policy TEXT, explanation TEXT);"
    "CREATE INDEX decisions_job ON decisions(job_id, id);",
    // 4: capacity reservations and the realized load per hour
    "CREATE TABLE reservations ("
    "  job_id TEXT NOT NULL,"
    "  region TEXT NOT NULL,"
    "  start_ms INTEGER NOT NULL,"
    "  end_ms INTEGER NOT NULL,"
    "  nodes INTEGER NOT NULL,"
    "  CHECK (end_ms > start_ms AND nodes > 0));"
    "CREATE INDEX reservations_job ON reservations(job_id, start_ms);"
    "CREATE TABLE load_history ("
    "  hour_ms INTEGER PRIMARY KEY,"
    "  busy_nodes REAL NOT NULL,"
    "  capacity_nodes REAL NOT NULL);",
    // 5: elastic and migratable jobs, declared and measured scaling curves
    "ALTER TABLE jobs ADD COLUMN min_nodes INTEGER CHECK (min_nodes IS NULL OR min_nodes >= 1);"
    "ALTER TABLE jobs ADD COLUMN max_nodes INTEGER CHECK (max_nodes IS NULL OR max_nodes >= 1);"
    "ALTER TABLE jobs ADD COLUMN migratable INTEGER NOT NULL DEFAULT 0 CHECK (migratable IN (0, 1));"
    "CREATE TABLE job_scaling ("
    "  job_id TEXT NOT NULL,"
    "  source TEXT NOT NULL CHECK (source IN ('declared', 'measured')),"
    "  nodes INTEGER NOT NULL CHECK (nodes >= 1),"
    "  tokens_per_second REAL NOT NULL CHECK (tokens_per_second > 0),"
    "  samples INTEGER NOT NULL DEFAULT 1,"
    "  updated_ms INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (job_id, source, nodes));",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == Store::kSchemaVersion);

// The last error on db says the file is no database, or a damaged one.
bool corrupt(sqlite3* db) {
  const int rc = sqlite3_errcode(db) & 0xff;
  return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

// Throws the last error on db: StoreCorrupt (naming the file) when the file
// is damaged, else StoreError(what: message).
[[noreturn]] void throw_sqlite(sqlite3* db, const std::string& what) {
  if (corrupt(db)) {
    const char* file = sqlite3_db_filename(db, "main");
    throw StoreCorrupt(file && *file ? file : "?", sqlite3_errmsg(db));
  }
  throw StoreError(what + ": " + sqlite3_errmsg(db));
}

// Throws a failed write step: the SQLite message, and for a full disk
// (SQLITE_FULL: the unix VFS's ENOSPC or short write) or an I/O error the
// system's word for it, so that the message says what to fix.
[[noreturn]] void throw_write(sqlite3* db, int rc) {
  if (corrupt(db)) throw_sqlite(db, "sqlite step");
  std::string why = std::string("sqlite step: ") + sqlite3_errmsg(db);
  if ((rc & 0xff) == SQLITE_FULL) {
    why += std::string(" (SQLITE_FULL: ") + std::strerror(ENOSPC) + ")";
  } else if ((rc & 0xff) == SQLITE_IOERR) {
    if (const int e = sqlite3_system_errno(db); e != 0) why += std::string(" (") + std::strerror(e) + ")";
  }
  throw StoreError(why);
}

// A statement: prepared here and finalized at the end of the scope, or
// borrowed from the store's cache (Store::prepared) and reset, with its
// bindings cleared, at the end of the scope.
struct Stmt {
  sqlite3_stmt* s = nullptr;
  bool owned = true;
  Stmt(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) throw_sqlite(db, "sqlite prepare");
  }
  explicit Stmt(sqlite3_stmt* cached) : s(cached), owned(false) {}
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() {
    if (owned) {
      sqlite3_finalize(s);
    } else {
      sqlite3_reset(s);
      sqlite3_clear_bindings(s);
    }
  }
  void text(int i, const std::string& v) {
    sqlite3_bind_text(s, i, v.data(), int(v.size()), SQLITE_TRANSIENT);
  }
  void text_or_null(int i, const std::string& v) {
    if (v.empty()) sqlite3_bind_null(s, i); else text(i, v);
  }
  void i64(int i, int64_t v) { sqlite3_bind_int64(s, i, v); }
  void f64(int i, double v) { sqlite3_bind_double(s, i, v); }
  std::string col_text(int i) {
    auto p = sqlite3_column_text(s, i);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(s, i)) : "";
  }
  void run(sqlite3* db) {
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) throw_write(db, rc);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
  }
};

// Every row of a prepared query, each turned into a T by row(st); throws
// StoreError when the read stops on an error.
template <class T, class F>
std::vector<T> read_rows(sqlite3* db, Stmt& st, F row) {
  std::vector<T> out;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) out.push_back(row(st));
  if (rc != SQLITE_DONE) throw_sqlite(db, "job store read");
  return out;
}

}  // namespace

Store::Store(const std::string& path) : path_(path) {
  if (sqlite3_open_v2(path.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw StoreError("cannot open job store '" + path + "': " + msg);
  }
  try {
    sqlite3_busy_timeout(db_, 5000);
    {
      Stmt st(db_, "PRAGMA journal_mode=WAL;");
      wal_ = sqlite3_step(st.s) == SQLITE_ROW && st.col_text(0) == "wal";
    }
    // WAL: commits go to the WAL file and a leader fsyncs it before
    // anyone is answered (NORMAL syncs around checkpoints and when the WAL
    // restarts); without WAL (a file system without shared memory),
    // SQLite's own fsync at every commit.
    exec(wal_ ? "PRAGMA synchronous=NORMAL;" : "PRAGMA synchronous=FULL;");
    exec("PRAGMA foreign_keys=ON;");
    migrate();
    if (wal_) {
      // The migrations, and the files' directory entries, durable now.
      if (wal_fd() < 0 || ::fdatasync(wal_fd_) != 0)
        throw StoreError("job store '" + path + "': cannot fsync its WAL: " + std::strerror(errno));
      const std::string dir = std::filesystem::absolute(path).parent_path().string();
      const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dfd >= 0) {
        (void)::fsync(dfd);
        ::close(dfd);
      }
    }
  } catch (const StoreCorrupt&) {
    if (wal_fd_ >= 0) ::close(wal_fd_);
    sqlite3_close(db_);
    throw;
  } catch (...) {
    // exec() and migrate() throw plain StoreErrors: a damaged file is
    // still StoreCorrupt, naming it.
    const bool bad = corrupt(db_);
    const std::string msg = sqlite3_errmsg(db_);
    if (wal_fd_ >= 0) ::close(wal_fd_);
    sqlite3_close(db_);
    if (bad) throw StoreCorrupt(path, msg);
    throw;
  }
}

StoreCheck Store::check(const std::string& path) {
  StoreCheck r;
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) {
    r.problems.push_back("cannot open '" + path + "': " + std::strerror(errno));
    return r;
  }
  if (!S_ISREG(sb.st_mode)) {
    r.problems.push_back("'" + path + "' is not a regular file");
    return r;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    r.problems.push_back("cannot open '" + path + "': " + (db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return r;
  }
  sqlite3_busy_timeout(db, 1000);
  try {
    {
      Stmt st(db, "PRAGMA user_version;");
      if (sqlite3_step(st.s) != SQLITE_ROW) throw_sqlite(db, "PRAGMA user_version");
      r.schema_version = sqlite3_column_int(st.s, 0);
    }
    if (r.schema_version > kSchemaVersion)
      r.problems.push_back("schema version " + std::to_string(r.schema_version) + " is newer than this controller (" +
                           std::to_string(kSchemaVersion) + ")");
    {
      Stmt st(db, "PRAGMA integrity_check;");
      int rc;
      while ((rc = sqlite3_step(st.s)) == SQLITE_ROW)
        if (std::string line = st.col_text(0); line != "ok") r.problems.push_back("integrity_check: " + line);
      if (rc != SQLITE_DONE) throw_sqlite(db, "PRAGMA integrity_check");
    }
    if (r.schema_version >= 1) {
      Stmt st(db, "SELECT count(*) FROM jobs;");
      if (sqlite3_step(st.s) != SQLITE_ROW) throw_sqlite(db, "counting jobs");
      r.jobs = sqlite3_column_int64(st.s, 0);
    }
  } catch (const StoreError& e) {
    r.problems.push_back(e.what());
  }
  sqlite3_close(db);
  r.ok = r.problems.empty();
  return r;
}

namespace {

// The pid a holder wrote into its lock file: decimal digits and an optional
// newline, nothing else (the file is outside input); 0 when not that.
int read_lock_pid(int fd) {
  char buf[24];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  if (n <= 0 || n >= ssize_t(sizeof buf)) return 0;
  long pid = 0;
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] == '\n' && i == n - 1 && i > 0) break;
    if (buf[i] < '0' || buf[i] > '9') return 0;
    pid = pid * 10 + (buf[i] - '0');
    if (pid > (1L << 22)) return 0;  // above Linux's pid_max
  }
  return int(pid);
}

}  // namespace

DataDirLock::DataDirLock(const std::string& dir) : path_(dir + "/" + kFileName) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw StoreError("cannot open lock file '" + path_ + "': " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const int holder = err == EWOULDBLOCK ? read_lock_pid(fd_) : 0;
    ::close(fd_);
    if (err == EWOULDBLOCK) throw DataDirBusy(path_, holder);
    throw StoreError("cannot lock '" + path_ + "': " + std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
    const int err = errno;
    ::close(fd_);
    throw StoreError("cannot write the pid into '" + path_ + "': " + std::strerror(err));
  }
}

DataDirLock::~DataDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock; the file (and its pid) stays: only the lock counts
}

Store::~Store() {
  {
    std::lock_guard<std::mutex> l(sync_mu_);
    closed_ = true;
  }
  if (wal_fd_ >= 0) ::close(wal_fd_);
  for (auto& [sql, st] : stmts_) sqlite3_finalize(st);
  sqlite3_close(db_);
}

int Store::wal_fd() {
  if (wal_fd_ >= 0) return wal_fd_;
  const char* wal = sqlite3_filename_wal(sqlite3_db_filename(db_, "main"));
  if (!wal || !*wal) return -1;
  wal_fd_ = ::open(wal, O_RDWR | O_CLOEXEC);
  return wal_fd_;
}

void Store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw StoreError("job store '" + path_ + "': " + msg);
  }
}

void Store::migrate() {
  {
    Stmt st(db_, "PRAGMA user_version;");
    if (sqlite3_step(st.s) == SQLITE_ROW) version_ = sqlite3_column_int(st.s, 0);
  }
  if (version_ > kSchemaVersion)
    throw StoreError("job store '" + path_ + "' has schema version " + std::to_string(version_) +
                     ", newer than this controller (" + std::to_string(kSchemaVersion) +
                     "); refusing to open it");
  for (int v = version_ + 1; v <= kSchemaVersion; ++v) {
    exec("BEGIN IMMEDIATE;");
    try {
      exec(kMigrations[v - 1]);
      exec(("PRAGMA user_version=" + std::to_string(v) + ";").c_str());
      exec("COMMIT;");
    } catch (const StoreError& e) {
      sqlite3_exec(db_, "ROLLBACK;", nullptr, nullptr, nullptr);
      throw StoreError("migration to schema version " + std::to_string(v) + " failed: " + e.what());
    }
    version_ = v;
  }
}

void Store::write(const std::vector<const Job*>& jobs, const std::vector<std::string>& deleted_ids,
                  const std::vector<DecisionRecord>& decisions) {
  Batch b;
  b.rows.reserve(jobs.size());
  for (const Job* j : jobs) {
    const JobSpec& s = j->spec();
    b.rows.push_back({j->id(), j->tenant(), std::string(to_string(j->state())), j->idempotency_key, document_text(*j),
                      j->seq, reservations_of(*j), s.min_nodes, s.max_nodes, s.migratable, s.scaling});
  }
  if (!deleted_ids.empty()) {
    std::lock_guard<std::mutex> l(text_mu_);
    for (const auto& id : deleted_ids) texts_.erase(id);
  }
  b.deletes = deleted_ids;
  b.decisions = decisions;
  submit(b);
}

std::string Store::document_text(const Job& j) {
  std::string text = j.document_core().dump();
  text.pop_back();   // the object's closing brace: the other keys follow (their order means nothing to a reader)
  std::lock_guard<std::mutex> l(text_mu_);
  DocumentTexts& t = texts_[j.id()];
  if (t.spec != j.shared_spec()) {
    // The elastic fields go to their columns and rows, not the document.
    nlohmann::json spec = j.spec().to_json();
    for (const char* k : {"elastic", "migratable", "scaling"}) spec.erase(k);
    t.spec = j.shared_spec();
    t.spec_text = spec.dump();
  }
  if (!t.conditions.same(j.shared_conditions())) {   // a new entry holds none: never the same
    t.conditions = j.shared_conditions();
    t.conditions_text = conditions_document(j.conditions()).dump();
  }
  text += ",\"spec\":";
  text += t.spec_text;
  text += ",\"conditions\":";
  text += t.conditions_text;
  if (j.placement) {
    if (!t.placement.same(j.placement)) {
      t.placement = j.placement;
      t.placement_text = placement_document(*j.placement).dump();
    }
    text += ",\"placement\":";
    text += t.placement_text;
  }
  text += '}';
  // An ended job is written again only to be deleted, if ever.
  if (is_terminal(j.state())) texts_.erase(j.id());
  return text;
}

void Store::record_load(const LoadSample& sample) {
  Batch b;
  b.loads.push_back(sample);
  submit(b);
}

void Store::record_throughput(const std::string& job_id, int nodes, double tps, int64_t now_ms) {
  if (nodes < 1 || !(std::isfinite(tps) && tps > 0)) return;
  Batch b;
  b.throughputs.push_back({job_id, nodes, tps, now_ms});
  submit(b);
}

std::vector<MeasuredScaling> Store::measured_scaling(const std::string& job_id) {
  std::lock_guard<std::mutex> dl(db_mu_);
  wait_durable();  // no read sees a write before it is durable
  Stmt st(db_,
          "SELECT nodes, tokens_per_second, samples, updated_ms FROM job_scaling "
          "WHERE job_id=? AND source='measured' ORDER BY nodes;");
  st.text(1, job_id);
  return read_rows<MeasuredScaling>(db_, st, [](Stmt& r) {
    return MeasuredScaling{sqlite3_column_int(r.s, 0), sqlite3_column_double(r.s, 1), sqlite3_column_int64(r.s, 2),
                           sqlite3_column_int64(r.s, 3)};
  });
}

void Store::submit(Batch& b) {
  std::unique_lock<std::mutex> l(sync_mu_);
  if (closed_) throw StoreError("job store is closed");
  queue_.push_back(&b);
  for (;;) {
    if (b.stage == Batch::Stage::kDone) break;
    if (b.stage == Batch::Stage::kQueued && !committing_) {
      commit_queued(l);  // ours, and every batch queued with it
    } else if (b.stage == Batch::Stage::kCommitted && !syncing_) {
      sync_once(l);
    } else {
      b.cv.wait(l);
    }
  }
  if (!b.error.empty()) throw StoreError(b.error);
}

// Wakes one caller to lead each stage that has work and no leader (the
// others sleep on: with 32 callers, waking all at every stage's end costs
// more than the stage).
void Store::wake_leaders() {  // under sync_mu_
  if (!committing_ && !queue_.empty()) queue_.front()->cv.notify_one();
  if (!syncing_ && !unsynced_.empty()) unsynced_.front()->cv.notify_one();
}

void Store::commit_queued(std::unique_lock<std::mutex>& l) {
  committing_ = true;
  std::vector<Batch*> group;
  group.swap(queue_);
  l.unlock();
  {
    std::lock_guard<std::mutex> dl(db_mu_);
    commit(group);
    // db_mu_ until the transaction is counted (txn_committed_ below): a
    // reader (wait_durable, under db_mu_) then waits for its fsync.
    l.lock();
  }
  committing_ = false;
  bool committed = false;
  for (Batch* g : group) {
    if (!g->error.empty() || !wal_) {  // failed (nothing written), or fsync'd by SQLite itself
      g->stage = Batch::Stage::kDone;
      g->cv.notify_one();
    } else {
      g->stage = Batch::Stage::kCommitted;
      unsynced_.push_back(g);
      committed = true;
    }
  }
  if (committed) ++txn_committed_;
  if (!wal_) ++commits_;
  wake_leaders();
}

void Store::sync_once(std::unique_lock<std::mutex>& l) {
  syncing_ = true;
  std::vector<Batch*> group;
  group.swap(unsynced_);
  const int64_t upto = txn_committed_;
  l.unlock();
  std::string err;
  const auto t0 = std::chrono::steady_clock::now();
  if (wal_fd_ < 0) err = "job store '" + path_ + "': cannot open its WAL";
  else if (::fdatasync(wal_fd_) != 0)
    err = "job store '" + path_ + "': fsync of its WAL failed: " + std::strerror(errno);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  l.lock();
  syncing_ = false;
  txn_synced_ = upto;
  ++commits_;
  sync_ns_ += ns;
  for (Batch* g : group) {
    g->error = err;
    g->stage = Batch::Stage::kDone;
    g->cv.notify_one();
  }
  readers_cv_.notify_all();
  wake_leaders();
}

void Store::wait_durable() {  // under db_mu_
  if (!wal_) return;
  std::unique_lock<std::mutex> l(sync_mu_);
  const int64_t upto = txn_committed_;  // a failed fsync is its writers' error; the read goes on
  while (txn_synced_ < upto) {
    if (!syncing_) sync_once(l);
    else readers_cv_.wait(l);
  }
}

sqlite3_stmt* Store::prepared(const char* sql) {  // under db_mu_
  auto it = stmts_.find(sql);
  if (it != stmts_.end()) return it->second;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr) != SQLITE_OK)
    throw StoreError(std::string("sqlite prepare: ") + sqlite3_errmsg(db_));
  stmts_.emplace(sql, st);
  return st;
}

namespace {
// The writer's statements (Store::prepared keeps each prepared).
const char kBegin[] = "BEGIN IMMEDIATE;";
const char kCommit[] = "COMMIT;";
const char kUpsertJob[] =
    "INSERT INTO jobs(id, seq, tenant, state, idem_key, doc, min_nodes, max_nodes, migratable) "
    "VALUES(?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT(id) DO UPDATE SET state=excluded.state, doc=excluded.doc;";
const char kInsertDeclared[] =
    "INSERT OR IGNORE INTO job_scaling(job_id, source, nodes, tokens_per_second) VALUES(?, 'declared', ?, ?);";
const char kDeleteReservations[] = "DELETE FROM reservations WHERE job_id=?;";
const char kInsertReservation[] =
    "INSERT INTO reservations(job_id, region, start_ms, end_ms, nodes) VALUES(?,?,?,?,?);";
const char kDeleteJob[] = "DELETE FROM jobs WHERE id=?;";
const char kDeleteDecisions[] = "DELETE FROM decisions WHERE job_id=?;";
const char kDeleteScaling[] = "DELETE FROM job_scaling WHERE job_id=?;";
const char kUpsertLoad[] =
    "INSERT INTO load_history(hour_ms, busy_nodes, capacity_nodes) VALUES(?,?,?) "
    "ON CONFLICT(hour_ms) DO UPDATE SET busy_nodes=excluded.busy_nodes, capacity_nodes=excluded.capacity_nodes;";
// A running mean per (job, width).
const char kUpsertMeasured[] =
    "INSERT INTO job_scaling(job_id, source, nodes, tokens_per_second, samples, updated_ms) "
    "VALUES(?, 'measured', ?, ?, 1, ?) "
    "ON CONFLICT(job_id, source, nodes) DO UPDATE SET "
    "tokens_per_second=(tokens_per_second*samples + excluded.tokens_per_second)/(samples + 1), "
    "samples=samples + 1, updated_ms=excluded.updated_ms;";
const char kInsertDecision[] =
    "INSERT INTO decisions(cycle, job_id, time_ms, outcome, region, policy, explanation) VALUES(?,?,?,?,?,?,?);";
}  // namespace

void Store::commit(std::vector<Batch*>& batches) {  // under db_mu_
  // The jobs whose declared curve this transaction writes: known to be
  // stored once it commits.
  std::vector<std::string> declared;
  auto apply = [&](const Batch* b) {
    Stmt up(prepared(kUpsertJob));
    Stmt insc(prepared(kInsertDeclared));
    Stmt delr(prepared(kDeleteReservations));
    Stmt insr(prepared(kInsertReservation));
    for (const Row& r : b->rows) {
      up.text(1, r.id);
      up.i64(2, r.seq);
      up.text(3, r.tenant);
      up.text(4, r.state);
      up.text_or_null(5, r.idem_key);
      up.text(6, r.doc);
      if (r.min_nodes > 0) up.i64(7, r.min_nodes);
      if (r.max_nodes > 0) up.i64(8, r.max_nodes);
      up.i64(9, r.migratable ? 1 : 0);
      up.run(db_);
      // The spec never changes after submission: its declared curve is
      // written once (a later write of the job ignores it, and one that
      // this store wrote before is not even tried).
      if (!r.scaling.empty() && !declared_.count(r.id)) {
        for (const auto& p : r.scaling) {
          insc.text(1, r.id);
          insc.i64(2, p.nodes);
          insc.f64(3, p.tokens_per_second);
          insc.run(db_);
        }
        declared.push_back(r.id);
      }
      delr.text(1, r.id);
      delr.run(db_);
      for (const Reservation& v : r.reservations) {
        insr.text(1, v.job_id);
        insr.text(2, v.region);
        insr.i64(3, v.start_ms);
        insr.i64(4, v.end_ms);
        insr.i64(5, v.nodes);
        insr.run(db_);
      }
    }
    if (!b->deletes.empty()) {
      Stmt del(prepared(kDeleteJob));
      Stmt deld(prepared(kDeleteDecisions));
      Stmt dels(prepared(kDeleteScaling));
      for (const auto& id : b->deletes) {
        declared_.erase(id);
        del.text(1, id);
        del.run(db_);
        deld.text(1, id);
        deld.run(db_);
        dels.text(1, id);
        dels.run(db_);
        delr.text(1, id);
        delr.run(db_);
      }
    }
    if (!b->loads.empty()) {
      Stmt ld(prepared(kUpsertLoad));
      for (const auto& x : b->loads) {
        ld.i64(1, x.hour_ms);
        ld.f64(2, x.busy_nodes);
        ld.f64(3, x.capacity_nodes);
        ld.run(db_);
      }
    }
    if (!b->throughputs.empty()) {
      Stmt tp(prepared(kUpsertMeasured));
      for (const auto& t : b->throughputs) {
        tp.text(1, t.job_id);
        tp.i64(2, t.nodes);
        tp.f64(3, t.tokens_per_second);
        tp.i64(4, t.time_ms);
        tp.run(db_);
      }
    }
    if (!b->decisions.empty()) {
      Stmt ins(prepared(kInsertDecision));
      for (const auto& d : b->decisions) {
        ins.i64(1, d.cycle);
        ins.text(2, d.job_id);
        ins.i64(3, d.time_ms);
        ins.text(4, std::string(to_string(d.outcome)));
        ins.text(5, d.region);
        ins.text(6, d.policy);
        ins.text(7, d.explanation);
        ins.run(db_);
      }
    }
  };
  auto run_txn = [&](const std::vector<Batch*>& group) -> std::string {
    declared.clear();
    try {
      Stmt(prepared(kBegin)).run(db_);
      for (Batch* b : group) apply(b);
      Stmt(prepared(kCommit)).run(db_);
      declared_.insert(declared.begin(), declared.end());
      return "";
    } catch (const StoreError& e) {
      // Rolled back (SQLite may have done so itself after a full disk or
      // an I/O error: then this ROLLBACK fails harmlessly), so that the
      // connection takes the next transaction: a write after the disk has
      // room again commits with no restart.
      sqlite3_exec(db_, "ROLLBACK;", nullptr, nullptr, nullptr);
      const std::string what = e.what();
      if (dynamic_cast<const StoreCorrupt*>(&e)) return what;
      return "job store '" + path_ + "': cannot write: " + what;
    }
  };
  std::string err = run_txn(batches);
  if (err.empty()) return;
  if (batches.size() == 1) {
    batches[0]->error = err;
    return;
  }
  // One batch broke the group: commit each alone so only it fails.
  for (Batch* b : batches) b->error = run_txn({b});
}

std::vector<Job> Store::load_all() {
  std::lock_guard<std::mutex> dl(db_mu_);
  wait_durable();  // no read sees a write before it is durable
  // Declared curves of every job, then the jobs with their columns.
  std::map<std::string, nlohmann::json> curves;
  {
    Stmt sc(db_,
            "SELECT job_id, nodes, tokens_per_second FROM job_scaling WHERE source='declared' "
            "ORDER BY job_id, nodes;");
    int rc;
    while ((rc = sqlite3_step(sc.s)) == SQLITE_ROW)
      curves[sc.col_text(0)].push_back(
          {{"nodes", sqlite3_column_int(sc.s, 1)}, {"tokens_per_second", sqlite3_column_double(sc.s, 2)}});
    if (rc != SQLITE_DONE) throw_sqlite(db_, "job store read");
  }
  Stmt st(db_, "SELECT id, doc, seq, min_nodes, max_nodes, migratable FROM jobs ORDER BY seq;");
  std::vector<Job> out;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    std::string id = st.col_text(0);
    try {
      auto doc = nlohmann::json::parse(st.col_text(1));
      nlohmann::json& spec = doc.at("spec");
      if (sqlite3_column_type(st.s, 3) != SQLITE_NULL || sqlite3_column_type(st.s, 4) != SQLITE_NULL) {
        const int n = spec.value("nodes", 1);
        spec["elastic"] = {
            {"min_nodes", sqlite3_column_type(st.s, 3) == SQLITE_NULL ? n : sqlite3_column_int(st.s, 3)},
            {"max_nodes", sqlite3_column_type(st.s, 4) == SQLITE_NULL ? n : sqlite3_column_int(st.s, 4)}};
      }
      if (sqlite3_column_int(st.s, 5)) spec["migratable"] = true;
      if (auto c = curves.find(id); c != curves.end()) spec["scaling"] = c->second;
      Job j = Job::from_document(doc);
      j.seq = sqlite3_column_int64(st.s, 2);
      out.push_back(std::move(j));
    } catch (const std::exception& e) {
      throw StoreError("job store: job '" + id + "' is corrupt: " + e.what());
    }
  }
  if (rc != SQLITE_DONE) throw_sqlite(db_, "job store read");
  return out;
}

std::vector<DecisionRecord> Store::decisions(const std::string& job_id, size_t newest) {
  std::lock_guard<std::mutex> dl(db_mu_);
  wait_durable();  // no read sees a write before it is durable
  Stmt st(db_,
          "SELECT cycle, job_id, time_ms, outcome, region, policy, explanation FROM ("
          "SELECT id, cycle, job_id, time_ms, outcome, region, policy, explanation FROM decisions "
          "WHERE job_id=? ORDER BY id DESC LIMIT ?) ORDER BY id;");
  st.text(1, job_id);
  st.i64(2, newest >= size_t(INT64_MAX) ? int64_t(-1) : int64_t(newest));  // -1: no limit
  return read_rows<DecisionRecord>(db_, st, [this](Stmt& r) {
    const std::string outcome = r.col_text(3);
    const auto o = parse_decision_outcome(outcome);
    if (!o) throw StoreCorrupt(path_, "decisions: unknown outcome '" + outcome + "'");
    return DecisionRecord{sqlite3_column_int64(r.s, 0), r.col_text(1), sqlite3_column_int64(r.s, 2), *o,
                          r.col_text(4), r.col_text(5), r.col_text(6)};
  });
}

std::vector<Reservation> Store::load_reservations() {
  std::lock_guard<std::mutex> dl(db_mu_);
  wait_durable();  // no read sees a write before it is durable
  Stmt st(db_, "SELECT job_id, region, start_ms, end_ms, nodes FROM reservations ORDER BY job_id, start_ms;");
  return read_rows<Reservation>(db_, st, [](Stmt& r) {
    return Reservation{r.col_text(0), r.col_text(1), sqlite3_column_int64(r.s, 2), sqlite3_column_int64(r.s, 3),
                       sqlite3_column_int(r.s, 4)};
  });
}

std::vector<LoadSample> Store::load_history() {
  std::lock_guard<std::mutex> dl(db_mu_);
  wait_durable();  // no read sees a write before it is durable
  Stmt st(db_, "SELECT hour_ms, busy_nodes, capacity_nodes FROM load_history ORDER BY hour_ms;");
  return read_rows<LoadSample>(db_, st, [](Stmt& r) {
    return LoadSample{sqlite3_column_int64(r.s, 0), sqlite3_column_double(r.s, 1), sqlite3_column_double(r.s, 2)};
  });
}

int64_t Store::commits() const {
  std::lock_guard<std::mutex> l(sync_mu_);
  return commits_;
}

double Store::sync_seconds() const {
  std::lock_guard<std::mutex> l(sync_mu_);
  return double(sync_ns_) * 1e-9;
}

}  // namespace controller
