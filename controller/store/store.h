// Durable job store on SQLite.
//
// Contract:
//   - one file (default <data-dir>/controller.db), journal_mode=WAL,
//     synchronous=FULL: write() returns only after its transaction is
//     committed and fsync'd, so an acknowledged submission survives SIGKILL
//     and power loss (of the OS page cache);
//   - concurrent write() calls are group-committed in the callers' own
//     threads (no hand-off to a store thread: on small VMs a thread
//     wake-up costs about as much as the SQL), in two stages that overlap:
//     (1) a caller whose batch is queued and finds no commit running leads
//     one: every queued batch, its own and others', in one transaction
//     (WAL, synchronous=NORMAL: into the WAL file, not yet fsync'd and not
//     yet acknowledged); (2) a caller whose batch is committed and finds no
//     fsync running leads one fdatasync of the WAL for every transaction
//     committed so far. Everyone else waits for the stage in flight. So the
//     next group's SQL runs while the previous group's fsync does, and one
//     fsync covers everything committed while the one before it ran. A
//     write is durable exactly as with synchronous=FULL (which adds nothing
//     in WAL mode but that fsync at each commit; NORMAL already syncs
//     around checkpoints), and no read returns a write before it is durable
//     (a read first syncs, or waits for, every committed transaction);
//   - the schema version is PRAGMA user_version; opening applies every
//     migration above it in order, each in its own transaction; a database
//     newer than this binary (user_version > kSchemaVersion) is refused;
//   - a job is stored as its whole document (Job::to_document) plus indexed
//     columns (tenant, state, seq, idempotency key); the texts of its spec,
//     conditions and placement are made once per value and reused while
//     the job lives (a job is written at every state change; those parts
//     change now and then, and are replaced whole when they do);
//   - a job's capacity reservations (reservations_of(job)) are a table of
//     their own, replaced in the same transaction whenever the job is
//     written, so they are exactly as durable as its state (schema 4);
//   - the realized load per hour (LoadSample) is a table too: capacity
//     pricing learns from it, also across controller restarts (schema 4);
//   - a job's elastic fields are typed columns, not keys of its document:
//     jobs.min_nodes / jobs.max_nodes (NULL: not elastic), jobs.migratable,
//     and its declared scaling curve rows of job_scaling (source
//     'declared'); job_scaling also holds the measured curve (source
//     'measured': the mean tokens/s its running gangs pushed at each width).
//     Rows written before schema 5 read as not elastic (schema 5);
//   - a write that fails (a full disk: SQLITE_FULL, or an I/O error) is
//     rolled back whole and throws StoreError naming the file and the cause
//     ("job store '<file>': cannot write: ... (SQLITE_FULL: No space left on
//     device)"); the API answers it 503 store_unavailable. The connection
//     stays usable: the next write is a new transaction, so writes succeed
//     again as soon as the disk has room, with no restart;
//   - one controller per store: DataDirLock is an exclusive flock(2) on
//     <data-dir>/controller.lock, taken before the store is opened and held
//     for the process's life; a second taker fails naming the holder's pid;
//   - a file SQLite cannot read as a database, or whose pages are damaged
//     (SQLITE_NOTADB, SQLITE_CORRUPT), is StoreCorrupt naming the file, at
//     open and at every read; Store::check is the offline integrity check
//     (greenshard-controller --check-store).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "controller/core/decision_outcome.h"
#include "controller/core/job.h"

struct sqlite3;
struct sqlite3_stmt;

namespace controller {

struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The database file is not a SQLite database, or is damaged.
struct StoreCorrupt : StoreError {
  StoreCorrupt(const std::string& file, const std::string& sqlite_message)
      : StoreError("job store '" + file + "' is corrupt: " + sqlite_message), file(file) {}
  std::string file;
};

// Another process holds the data directory's lock.
struct DataDirBusy : StoreError {
  DataDirBusy(const std::string& lock_path, int holder_pid)
      : StoreError(lock_path + " is held by " +
                   (holder_pid > 0 ? "pid " + std::to_string(holder_pid) : std::string("another process"))),
        lock_path(lock_path), holder_pid(holder_pid) {}
  std::string lock_path;
  int holder_pid;  // 0: unknown (the holder has not written it yet)
};

// An exclusive, non-blocking flock(2) on <dir>/controller.lock (created
// 0644, O_CLOEXEC so no child inherits it), with this process's pid written
// into it once held. Released when destroyed, or when the process dies
// however it dies (the kernel drops it with the last descriptor). Throws
// DataDirBusy when another process holds it, StoreError when the file cannot
// be opened (naming it and errno). The directory must exist.
class DataDirLock {
 public:
  static constexpr const char* kFileName = "controller.lock";
  explicit DataDirLock(const std::string& dir);
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// What Store::check found.
struct StoreCheck {
  bool ok = false;
  int schema_version = 0;            // PRAGMA user_version (0 when unreadable)
  int64_t jobs = -1;                 // rows of jobs (-1 when unreadable)
  std::vector<std::string> problems; // empty when ok: each one line
};

// One scheduling decision, appended to the decision log.
struct DecisionRecord {
  int64_t cycle = 0;
  std::string job_id;
  int64_t time_ms = 0;
  DecisionOutcome outcome = DecisionOutcome::kDeferred;  // stored as its to_string spelling
  std::string region, policy, explanation;
};

// Realized load of one UTC hour: nodes busy (running gangs and reservations)
// out of all regions' capacity, as the scheduler saw it after placing.
struct LoadSample {
  int64_t hour_ms = 0;
  double busy_nodes = 0, capacity_nodes = 0;
};

// The measured throughput of one job at one width: the mean of the
// tokens_per_s its running gangs of that width pushed.
struct MeasuredScaling {
  int nodes = 0;
  double tokens_per_second = 0;
  int64_t samples = 0;
  int64_t updated_ms = 0;
};

class Store {
 public:
  static constexpr int kSchemaVersion = 5;

  // Opens or creates the database and migrates it. Throws StoreError;
  // StoreCorrupt when the file is not a readable database.
  explicit Store(const std::string& path);
  // Offline check of an existing database file (no controller may have it
  // open: take DataDirLock first): opens it without creating it, reads its
  // schema version (newer than this binary is a problem), runs PRAGMA
  // integrity_check and counts the jobs. Writes nothing but what opening
  // a WAL database does (its WAL is checkpointed on close). Never throws.
  static StoreCheck check(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  int schema_version() const { return version_; }
  const std::string& path() const { return path_; }

  // Upserts `jobs`, deletes `deleted_ids`, appends `decisions`, all in one
  // transaction. Returns when durable. Throws StoreError (nothing written).
  void write(const std::vector<const Job*>& jobs, const std::vector<std::string>& deleted_ids = {},
             const std::vector<DecisionRecord>& decisions = {});
  void write_one(const Job& job) { write({&job}); }
  // Upserts the load of an hour (durable on return).
  void record_load(const LoadSample& sample);
  // Adds one throughput sample of `job_id` at width `nodes` to its measured
  // curve (durable on return). Ignored unless tokens_per_second > 0 and
  // finite and nodes >= 1.
  void record_throughput(const std::string& job_id, int nodes, double tokens_per_second, int64_t now_ms);
  // The measured curve of a job, by width (empty when none).
  std::vector<MeasuredScaling> measured_scaling(const std::string& job_id);

  // Every stored reservation, by job id then start.
  std::vector<Reservation> load_reservations();
  // The load history, oldest hour first.
  std::vector<LoadSample> load_history();

  // Every stored job, in seq order. Throws StoreError on a corrupt row
  // (naming the job id), StoreCorrupt on a damaged page.
  std::vector<Job> load_all();

  // The decision log of one job, oldest first; at most the `newest` most
  // recent records.
  std::vector<DecisionRecord> decisions(const std::string& job_id, size_t newest = SIZE_MAX);

  // Number of committed transactions (for tests and the bench: group commit).
  int64_t commits() const;
  // Seconds spent in the WAL's fdatasync so far, over commits() of them
  // (WAL mode; 0 otherwise, where SQLite syncs inside the commit). For the
  // bench: what the disk costs for what a commit writes.
  double sync_seconds() const;

 private:
  struct Row {
    std::string id, tenant, state, idem_key, doc;
    int64_t seq;
    std::vector<Reservation> reservations;
    int min_nodes = 0, max_nodes = 0;  // 0: NULL
    bool migratable = false;
    std::vector<ScalingPointSpec> scaling;
  };
  struct Throughput {
    std::string job_id;
    int nodes = 0;
    double tokens_per_second = 0;
    int64_t time_ms = 0;
  };
  struct Batch {
    enum class Stage { kQueued, kCommitted, kDone };  // kDone: durable, or failed (error)
    Stage stage = Stage::kQueued;
    std::condition_variable cv;  // its caller waits here (under sync_mu_)
    std::vector<Row> rows;
    std::vector<LoadSample> loads;
    std::vector<Throughput> throughputs;
    std::vector<std::string> deletes;
    std::vector<DecisionRecord> decisions;
    std::string error;  // its transaction failed (nothing of it written)
  };
  void migrate();
  void exec(const char* sql);
  // Queues b and returns once it is committed and fsync'd, leading the
  // commit or the fsync when none is running; throws StoreError (b's
  // transaction failed: nothing of it written; or its fsync failed).
  void submit(Batch& b);
  void commit_queued(std::unique_lock<std::mutex>& l);  // under sync_mu_ (released meanwhile)
  void sync_once(std::unique_lock<std::mutex>& l);      // under sync_mu_ (released meanwhile)
  void wake_leaders();                                  // under sync_mu_
  // Under db_mu_: every batch in one transaction; when that fails, each
  // alone, so that only the bad one fails (its error set, rolled back).
  void commit(std::vector<Batch*>& batches);
  void wait_durable();  // under db_mu_: until every committed transaction is fsync'd
  int wal_fd();         // the WAL file (opened on first use), -1 when it cannot be
  // The writer's statements, prepared once (SQLITE_PREPARE_PERSISTENT) and
  // kept until the store closes; keyed by the address of their static SQL
  // text. Under db_mu_.
  sqlite3_stmt* prepared(const char* sql);

  std::string path_;
  sqlite3* db_ = nullptr;
  int version_ = 0;
  std::mutex db_mu_;  // serialises reads with the writer's transactions
  std::map<const char*, sqlite3_stmt*> stmts_;  // prepared(); under db_mu_
  // Jobs whose declared curve is in job_scaling (written by this store
  // since it opened; not every stored one). Under db_mu_.
  std::unordered_set<std::string> declared_;
  // A job's stored document (Job::to_document, less the spec's elastic
  // fields): written at every state change, while its spec never changes
  // and its conditions and placement are replaced whole, now and then. So
  // the text of each of those three is made once per value and kept, with
  // the value it was made from, for each live job (under text_mu_).
  std::string document_text(const Job& j);
  struct DocumentTexts {
    std::shared_ptr<const JobSpec> spec;
    std::string spec_text;
    SharedValue<std::vector<Condition>> conditions;
    std::string conditions_text;
    SharedValue<PlacementView> placement;
    std::string placement_text;
  };
  std::mutex text_mu_;
  std::unordered_map<std::string, DocumentTexts> texts_;

  // Group commit (under sync_mu_).
  mutable std::mutex sync_mu_;  // mutable: the const counters read under it
  bool closed_ = false;
  std::vector<Batch*> queue_;     // not committed yet
  std::vector<Batch*> unsynced_;  // committed, waiting for an fsync
  bool committing_ = false;       // a leader's transaction is running
  bool syncing_ = false;          // a leader's fdatasync is running
  int64_t txn_committed_ = 0, txn_synced_ = 0;  // commit generations (WAL mode)
  int64_t commits_ = 0;           // fsyncs (WAL mode), else transactions
  int64_t sync_ns_ = 0;           // time in those fsyncs (WAL mode)
  std::condition_variable readers_cv_;  // an fsync ended (wait_durable)
  int wal_fd_ = -1;      // opened by the constructor; read-only afterwards
  bool wal_ = false;     // journal_mode is WAL
};

}  // namespace controller
