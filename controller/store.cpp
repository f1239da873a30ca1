#include "controller/store.h"

#include <sqlite3.h>

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
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == Store::kSchemaVersion);

struct Stmt {
  sqlite3_stmt* s = nullptr;
  Stmt(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK)
      throw StoreError(std::string("sqlite prepare: ") + sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(s); }
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
    if (rc != SQLITE_DONE) throw StoreError(std::string("sqlite step: ") + sqlite3_errmsg(db));
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
  if (rc != SQLITE_DONE) throw StoreError(std::string("job store read: ") + sqlite3_errmsg(db));
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
    exec("PRAGMA journal_mode=WAL;");
    exec("PRAGMA synchronous=FULL;");
    exec("PRAGMA foreign_keys=ON;");
    migrate();
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
  writer_ = std::thread([this] { writer_loop(); });
}

Store::~Store() {
  {
    std::lock_guard<std::mutex> l(q_mu_);
    stop_ = true;
  }
  q_cv_.notify_all();
  writer_.join();
  sqlite3_close(db_);
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
  for (const Job* j : jobs)
    b.rows.push_back({j->id(), j->tenant(), std::string(to_string(j->state())),
                      j->idempotency_key, j->to_document().dump(), j->seq, reservations_of(*j)});
  b.deletes = deleted_ids;
  b.decisions = decisions;
  submit(b);
}

void Store::record_load(const LoadSample& sample) {
  Batch b;
  b.loads.push_back(sample);
  submit(b);
}

void Store::submit(Batch& b) {
  std::unique_lock<std::mutex> l(q_mu_);
  if (stop_) throw StoreError("job store is closed");
  queue_.push_back(&b);
  q_cv_.notify_one();
  done_cv_.wait(l, [&] { return b.done; });
  if (!b.error.empty()) throw StoreError(b.error);
}

void Store::writer_loop() {
  std::unique_lock<std::mutex> l(q_mu_);
  for (;;) {
    q_cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) return;
    std::vector<Batch*> batches(queue_.begin(), queue_.end());
    queue_.clear();
    l.unlock();
    commit(batches);
    l.lock();
    ++commits_;
    for (Batch* b : batches) b->done = true;
    done_cv_.notify_all();
  }
}

void Store::commit(std::vector<Batch*>& batches) {
  std::lock_guard<std::mutex> dl(db_mu_);
  auto apply = [&](Batch* b) {
    Stmt up(db_,
            "INSERT INTO jobs(id, seq, tenant, state, idem_key, doc) VALUES(?,?,?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET state=excluded.state, doc=excluded.doc;");
    Stmt delr(db_, "DELETE FROM reservations WHERE job_id=?;");
    Stmt insr(db_, "INSERT INTO reservations(job_id, region, start_ms, end_ms, nodes) VALUES(?,?,?,?,?);");
    for (const Row& r : b->rows) {
      up.text(1, r.id);
      up.i64(2, r.seq);
      up.text(3, r.tenant);
      up.text(4, r.state);
      up.text_or_null(5, r.idem_key);
      up.text(6, r.doc);
      up.run(db_);
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
      Stmt del(db_, "DELETE FROM jobs WHERE id=?;");
      Stmt deld(db_, "DELETE FROM decisions WHERE job_id=?;");
      for (const auto& id : b->deletes) {
        del.text(1, id);
        del.run(db_);
        deld.text(1, id);
        deld.run(db_);
        delr.text(1, id);
        delr.run(db_);
      }
    }
    if (!b->loads.empty()) {
      Stmt ld(db_,
              "INSERT INTO load_history(hour_ms, busy_nodes, capacity_nodes) VALUES(?,?,?) "
              "ON CONFLICT(hour_ms) DO UPDATE SET busy_nodes=excluded.busy_nodes, "
              "capacity_nodes=excluded.capacity_nodes;");
      for (const auto& x : b->loads) {
        ld.i64(1, x.hour_ms);
        ld.f64(2, x.busy_nodes);
        ld.f64(3, x.capacity_nodes);
        ld.run(db_);
      }
    }
    if (!b->decisions.empty()) {
      Stmt ins(db_,
               "INSERT INTO decisions(cycle, job_id, time_ms, outcome, region, policy, explanation)"
               " VALUES(?,?,?,?,?,?,?);");
      for (const auto& d : b->decisions) {
        ins.i64(1, d.cycle);
        ins.text(2, d.job_id);
        ins.i64(3, d.time_ms);
        ins.text(4, d.outcome);
        ins.text(5, d.region);
        ins.text(6, d.policy);
        ins.text(7, d.explanation);
        ins.run(db_);
      }
    }
  };
  auto run_txn = [&](const std::vector<Batch*>& group) -> std::string {
    try {
      exec("BEGIN IMMEDIATE;");
      for (Batch* b : group) apply(b);
      exec("COMMIT;");
      return "";
    } catch (const StoreError& e) {
      sqlite3_exec(db_, "ROLLBACK;", nullptr, nullptr, nullptr);
      return e.what();
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
  Stmt st(db_, "SELECT id, doc, seq FROM jobs ORDER BY seq;");
  std::vector<Job> out;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    std::string id = st.col_text(0);
    try {
      auto doc = nlohmann::json::parse(st.col_text(1));
      Job j = Job::from_document(doc);
      j.seq = sqlite3_column_int64(st.s, 2);
      out.push_back(std::move(j));
    } catch (const std::exception& e) {
      throw StoreError("job store: job '" + id + "' is corrupt: " + e.what());
    }
  }
  if (rc != SQLITE_DONE) throw StoreError(std::string("job store read: ") + sqlite3_errmsg(db_));
  return out;
}

std::vector<DecisionRecord> Store::decisions(const std::string& job_id, size_t newest) {
  std::lock_guard<std::mutex> dl(db_mu_);
  Stmt st(db_,
          "SELECT cycle, job_id, time_ms, outcome, region, policy, explanation FROM ("
          "SELECT id, cycle, job_id, time_ms, outcome, region, policy, explanation FROM decisions "
          "WHERE job_id=? ORDER BY id DESC LIMIT ?) ORDER BY id;");
  st.text(1, job_id);
  st.i64(2, newest >= size_t(INT64_MAX) ? int64_t(-1) : int64_t(newest));  // -1: no limit
  return read_rows<DecisionRecord>(db_, st, [](Stmt& r) {
    return DecisionRecord{sqlite3_column_int64(r.s, 0), r.col_text(1), sqlite3_column_int64(r.s, 2),
                          r.col_text(3), r.col_text(4), r.col_text(5), r.col_text(6)};
  });
}

std::vector<Reservation> Store::load_reservations() {
  std::lock_guard<std::mutex> dl(db_mu_);
  Stmt st(db_, "SELECT job_id, region, start_ms, end_ms, nodes FROM reservations ORDER BY job_id, start_ms;");
  return read_rows<Reservation>(db_, st, [](Stmt& r) {
    return Reservation{r.col_text(0), r.col_text(1), sqlite3_column_int64(r.s, 2), sqlite3_column_int64(r.s, 3),
                       sqlite3_column_int(r.s, 4)};
  });
}

std::vector<LoadSample> Store::load_history() {
  std::lock_guard<std::mutex> dl(db_mu_);
  Stmt st(db_, "SELECT hour_ms, busy_nodes, capacity_nodes FROM load_history ORDER BY hour_ms;");
  return read_rows<LoadSample>(db_, st, [](Stmt& r) {
    return LoadSample{sqlite3_column_int64(r.s, 0), sqlite3_column_double(r.s, 1), sqlite3_column_double(r.s, 2)};
  });
}

int64_t Store::commits() const {
  std::lock_guard<std::mutex> l(const_cast<std::mutex&>(q_mu_));
  return commits_;
}

}  // namespace controller
