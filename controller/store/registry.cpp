#include "controller/store/registry.h"

#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>

namespace controller {

namespace {
std::string random_chars(size_t n, const char* alphabet, size_t alen) {
  std::string out(n, '0');
  std::vector<unsigned char> buf(n);
  if (RAND_bytes(buf.data(), int(n)) != 1) throw std::runtime_error("RAND_bytes failed");
  for (size_t i = 0; i < n; ++i) out[i] = alphabet[buf[i] % alen];
  return out;
}
}  // namespace

std::string new_job_id() {
  static const char a[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  return "j" + random_chars(15, a, 36);
}

std::string new_secret() {
  static const char a[] = "0123456789abcdef";
  return random_chars(32, a, 16);
}

Registry::Registry(Store& store, const Clock& clock, RegistryOptions options)
    : store_(store), clock_(clock), options_(options) {}

void Registry::load() {
  auto all = store_.load_all();
  std::lock_guard<std::mutex> l(mu_);
  for (auto& j : all) {
    next_seq_ = std::max(next_seq_, j.seq + 1);
    by_seq_[j.seq] = j.id();
    if (!j.idempotency_key.empty()) idem_[{j.tenant(), j.idempotency_key}] = j.id();
    if (!is_terminal(j.state())) live_per_tenant_[j.tenant()]++;
    reindex(nullptr, &j);
    std::string id = j.id();
    jobs_.emplace(id, std::move(j));
  }
  for (auto& r : store_.load_reservations()) reservations_[r.job_id].push_back(std::move(r));
}

std::array<Registry::FilterKey, 4> Registry::filter_keys(const Job& j) {
  const int state = static_cast<int>(j.state());
  return {FilterKey{j.tenant(), state, j.seq}, FilterKey{j.tenant(), kAnyState, j.seq},
          FilterKey{kAllTenants, state, j.seq}, FilterKey{kAllTenants, kAnyState, j.seq}};
}

void Registry::reindex(const Job* before, const Job* after) {
  if (before) {
    for (const FilterKey& k : filter_keys(*before)) by_filter_.erase(k);
    state_count_[before->state()]--;
    if (before->state() == JobState::kPending) pending_.erase({-before->spec().priority, before->seq});
    else if (!is_terminal(before->state())) active_seq_.erase(before->seq);
  }
  if (after) {
    for (const FilterKey& k : filter_keys(*after)) by_filter_.insert(k);
    state_count_[after->state()]++;
    if (after->state() == JobState::kPending) pending_.insert({-after->spec().priority, after->seq});
    else if (!is_terminal(after->state())) active_seq_.insert(after->seq);
  }
}

void Registry::index_reservations(const Job& j) {
  auto rs = reservations_of(j);
  if (rs.empty()) reservations_.erase(j.id());
  else reservations_[j.id()] = std::move(rs);
}

std::vector<Reservation> Registry::reservations() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<Reservation> out;
  for (const auto& [id, rs] : reservations_) out.insert(out.end(), rs.begin(), rs.end());
  return out;
}

Registry::Submitted Registry::submit(const std::string& tenant, JobSpec spec,
                                     const std::string& key) {
  const std::string hash = sha256_hex(spec.to_json().dump());
  const auto ikey = std::make_pair(tenant, key);
  std::optional<Job> job;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!key.empty()) {
      auto it = idem_.find(ikey);
      if (it != idem_.end()) {
        auto jt = jobs_.find(it->second);
        if (jt != jobs_.end()) {
          if (jt->second.body_hash != hash)
            throw ApiError(409, "idempotency_conflict",
                           "Idempotency-Key '" + key + "' was used with a different body",
                           "Idempotency-Key");
          return {jt->second, false};
        }
        idem_.erase(it);  // the job was deleted: the key is free again
      }
      if (idem_inflight_.count(ikey))
        throw ApiError(409, "idempotency_in_progress",
                       "a request with Idempotency-Key '" + key + "' is still in progress",
                       "Idempotency-Key");
    }
    if (live_per_tenant_[tenant] >= options_.max_live_per_tenant)
      throw ApiError(429, "quota_exceeded",
                     "tenant '" + tenant + "' already has " +
                         std::to_string(options_.max_live_per_tenant) + " unfinished jobs");
    job.emplace(new_job_id(), tenant, std::move(spec), clock_.now_ms());
    job->seq = next_seq_++;
    job->idempotency_key = key;
    job->body_hash = hash;
    job->worker_token = new_secret();
    live_per_tenant_[tenant]++;  // reserve the quota slot
    if (!key.empty()) idem_inflight_.insert(ikey);
  }
  try {
    store_.write_one(*job);  // durable before visible and before the reply
  } catch (...) {
    std::lock_guard<std::mutex> l(mu_);
    live_per_tenant_[tenant]--;
    idem_inflight_.erase(ikey);
    throw;
  }
  std::lock_guard<std::mutex> l(mu_);
  idem_inflight_.erase(ikey);
  if (!key.empty()) idem_[ikey] = job->id();
  by_seq_[job->seq] = job->id();
  reindex(nullptr, &*job);
  jobs_.emplace(job->id(), *job);
  return {*job, true};
}

std::optional<Job> Registry::get(const std::string& id, const std::string& tenant) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !visible(it->second, tenant)) return std::nullopt;
  return it->second;
}

ListPage Registry::list(const ListFilter& f) const {
  ListPage page;
  std::lock_guard<std::mutex> l(mu_);
  // Every entry of the filter's own range matches it: the page is its first
  // `limit` jobs, and one more says there is a next page.
  const int state = f.state ? static_cast<int>(*f.state) : kAnyState;
  for (auto it = by_filter_.upper_bound({f.tenant, state, f.after_seq});
       it != by_filter_.end() && std::get<0>(*it) == f.tenant && std::get<1>(*it) == state; ++it) {
    ++page.examined;
    if (int(page.jobs.size()) == f.limit) {
      page.next_after_seq = page.jobs.back().seq;
      break;
    }
    page.jobs.push_back(jobs_.at(by_seq_.at(std::get<2>(*it))));
  }
  return page;
}

std::optional<Job> Registry::update(const std::string& id, const std::string& tenant,
                                    const std::function<bool(Job&)>& fn,
                                    std::vector<DecisionRecord> decisions) {
  std::lock_guard<std::mutex> w(write_mu_);
  std::optional<Job> copy;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !visible(it->second, tenant)) return std::nullopt;
    copy = it->second;
  }
  const bool was_live = !is_terminal(copy->state());
  if (!fn(*copy)) return copy;
  store_.write({&*copy}, {}, decisions);  // throws: memory unchanged
  std::lock_guard<std::mutex> l(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return copy;  // cannot happen: remove() takes write_mu_ too
  if (was_live && is_terminal(copy->state())) live_per_tenant_[copy->tenant()]--;
  reindex(&it->second, &*copy);
  it->second = *copy;
  index_reservations(*copy);
  return copy;
}

std::vector<std::string> Registry::update_many(const std::vector<std::string>& ids,
                                               const std::function<bool(Job&)>& fn,
                                               const std::vector<DecisionRecord>& decisions) {
  std::lock_guard<std::mutex> w(write_mu_);
  std::vector<Job> copies;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& id : ids) {
      auto it = jobs_.find(id);
      if (it != jobs_.end()) copies.push_back(it->second);
    }
  }
  std::vector<Job> changed;
  std::vector<bool> was_live;
  for (auto& j : copies) {
    bool live = !is_terminal(j.state());
    if (fn(j)) {
      changed.push_back(std::move(j));
      was_live.push_back(live);
    }
  }
  if (changed.empty() && decisions.empty()) return {};
  std::vector<const Job*> ptrs;
  for (const auto& j : changed) ptrs.push_back(&j);
  store_.write(ptrs, {}, decisions);
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  for (size_t i = 0; i < changed.size(); ++i) {
    Job& j = changed[i];
    auto it = jobs_.find(j.id());
    if (it == jobs_.end()) continue;
    if (was_live[i] && is_terminal(j.state())) live_per_tenant_[j.tenant()]--;
    out.push_back(j.id());
    index_reservations(j);
    reindex(&it->second, &j);
    it->second = std::move(j);
  }
  return out;
}

bool Registry::remove(const std::string& id, const std::string& tenant) {
  std::lock_guard<std::mutex> w(write_mu_);
  std::optional<Job> found;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !visible(it->second, tenant)) return false;
    found = it->second;
  }
  const Job& victim = *found;
  if (!is_terminal(victim.state()))
    throw ApiError(409, "not_finished",
                   "job " + id + " is " + std::string(to_string(victim.state())) +
                       "; cancel it first, only finished jobs can be deleted");
  store_.write({}, {id});
  std::lock_guard<std::mutex> l(mu_);
  if (!victim.idempotency_key.empty()) idem_.erase({victim.tenant(), victim.idempotency_key});
  by_seq_.erase(victim.seq);
  reservations_.erase(id);
  if (auto it = jobs_.find(id); it != jobs_.end()) {
    reindex(&it->second, nullptr);
    jobs_.erase(it);
  }
  return true;
}

std::vector<Job> Registry::live_jobs(size_t max_pending) const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<Job> out;
  out.reserve(active_seq_.size() + std::min(max_pending, pending_.size()));
  for (int64_t seq : active_seq_) out.push_back(jobs_.at(by_seq_.at(seq)));
  size_t k = 0;
  for (auto it = pending_.begin(); it != pending_.end() && k < max_pending; ++it, ++k)
    out.push_back(jobs_.at(by_seq_.at(it->second)));
  return out;
}

std::map<JobState, int> Registry::count_by_state() const {
  std::lock_guard<std::mutex> l(mu_);
  std::map<JobState, int> out;
  for (JobState s : kAllStates) {
    auto it = state_count_.find(s);
    out[s] = it == state_count_.end() ? 0 : int(it->second);
  }
  return out;
}

int64_t Registry::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return int64_t(jobs_.size());
}

int64_t Registry::live_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return int64_t(active_seq_.size() + pending_.size());
}

}  // namespace controller
