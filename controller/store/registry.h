// Registry: every live job in memory, written through to the Store.
//
// Contract:
//   - submit() returns only after the new job is durable; a job becomes
//     visible to get/list only once durable;
//   - an Idempotency-Key is scoped to the tenant: the same key with the same
//     canonical body returns the original job (created=false); with another
//     body, 409 "idempotency_conflict";
//   - every state change goes through Job::transition and is persisted
//     before it becomes visible (update/update_many), and updates are
//     serialised, so the store never holds an order of states that memory
//     did not;
//   - tenant scoping: a job of another tenant is "not found" (404), never
//     "forbidden", so ids do not leak; admins (tenant "*") see every job;
//   - a tenant may have at most max_live_per_tenant non-terminal jobs
//     (429 "quota_exceeded").
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "controller/core/clock.h"
#include "controller/core/job.h"
#include "controller/store/store.h"

namespace controller {

inline const std::string kAllTenants = "*";

struct RegistryOptions {
  int max_live_per_tenant = 100000;
};

struct ListFilter {
  std::string tenant = kAllTenants;
  std::optional<JobState> state;
  int64_t after_seq = 0;
  int limit = 100;
};

struct ListPage {
  std::vector<Job> jobs;
  int64_t next_after_seq = 0;  // 0 when this is the last page
  // Jobs the list looked at: at most the page and one more, whatever the
  // filter and however many jobs the store holds (each filter has its index).
  int64_t examined = 0;
};

class Registry {
 public:
  Registry(Store& store, const Clock& clock, RegistryOptions options = {});

  // Loads every stored job. Call once before serving.
  void load();

  struct Submitted {
    Job job;
    bool created;
  };
  // Throws ApiError (409, 429) or StoreError.
  Submitted submit(const std::string& tenant, JobSpec spec, const std::string& idempotency_key);

  // nullopt when absent or not visible to `tenant`.
  std::optional<Job> get(const std::string& id, const std::string& tenant = kAllTenants) const;
  ListPage list(const ListFilter& filter) const;

  // Runs fn on the job under the lock; when fn returns true the job is
  // persisted (with `decisions`) before returning. Returns the job after fn,
  // or nullopt when absent/not visible. fn may throw ApiError (nothing changes).
  std::optional<Job> update(const std::string& id, const std::string& tenant,
                            const std::function<bool(Job&)>& fn,
                            std::vector<DecisionRecord> decisions = {});
  // Same for a set of jobs (one transaction): fn(job) for each listed id still
  // present; returns the ids that changed.
  std::vector<std::string> update_many(const std::vector<std::string>& ids,
                                       const std::function<bool(Job&)>& fn,
                                       const std::vector<DecisionRecord>& decisions = {});

  // Deletes a finished job (409 "not_finished" otherwise). Returns false when
  // absent/not visible.
  bool remove(const std::string& id, const std::string& tenant);

  // Copies of every non-terminal job that is not PENDING, plus the first
  // `max_pending` PENDING jobs in scheduling order (priority desc, then
  // age), all in that order: what one scheduling cycle looks at.
  std::vector<Job> live_jobs(size_t max_pending = SIZE_MAX) const;
  std::map<JobState, int> count_by_state() const;
  // Every job's capacity reservations (reservations_of), as stored: loaded
  // from the store's reservations table, then kept in step with each write.
  std::vector<Reservation> reservations() const;
  int64_t size() const;
  // Jobs not in an ended state (O(1)).
  int64_t live_count() const;

  const Clock& clock() const { return clock_; }
  Store& store() const { return store_; }

 private:
  static bool visible(const Job& j, const std::string& tenant) {
    return tenant == kAllTenants || j.tenant() == tenant;
  }
  Store& store_;
  const Clock& clock_;
  RegistryOptions options_;
  // mu_ guards the maps and is held only briefly (never across an fsync);
  // write_mu_ serialises read-modify-write updates of existing jobs with
  // their store writes, so two updates of one job cannot reach the store in
  // the other order. Submissions take only mu_ (they touch no existing job).
  mutable std::mutex mu_;
  std::mutex write_mu_;
  void index_reservations(const Job& j);  // under mu_
  std::unordered_map<std::string, Job> jobs_;
  std::map<std::string, std::vector<Reservation>> reservations_;  // by job id
  std::map<int64_t, std::string> by_seq_;
  // State indexes, kept in step with jobs_ by reindex() so that a cycle's
  // snapshot (live_jobs), live_count and count_by_state cost what they
  // return, not the whole queue: a scan of tens of thousands of pending
  // jobs under mu_ at every cycle held up every submission.
  void reindex(const Job* before, const Job* after);  // under mu_; nullptr: absent
  std::set<std::pair<int, int64_t>> pending_;  // (-priority, seq) of PENDING jobs: scheduling order
  std::set<int64_t> active_seq_;               // seq of non-terminal jobs that are not PENDING
  // Every job under each list filter it matches, (tenant or kAllTenants,
  // state or kAnyState, seq): a list walks its own filter's entries, so it
  // costs its page, not the store (a tenant's or a state's jobs among a long
  // history, scanned under mu_, held up every submission).
  static constexpr int kAnyState = -1;
  using FilterKey = std::tuple<std::string, int, int64_t>;
  static std::array<FilterKey, 4> filter_keys(const Job& j);
  std::set<FilterKey> by_filter_;
  std::map<JobState, int64_t> state_count_;
  std::map<std::pair<std::string, std::string>, std::string> idem_;  // (tenant,key) -> id
  std::set<std::pair<std::string, std::string>> idem_inflight_;
  std::unordered_map<std::string, int> live_per_tenant_;
  int64_t next_seq_ = 1;
};

// A random id: "j" + 15 lowercase base-36 characters (a DNS-1123 label).
std::string new_job_id();
// A random 32-hex-character secret.
std::string new_secret();

}  // namespace controller
