// Rendezvous: torchrun environment -> c10d TCPStore -> gloo contexts.
//
// Rank 0 hosts a c10d::TCPStore on MASTER_ADDR:MASTER_PORT; every rank
// connects as a client. Every rank announces itself ("gs/arrive/<rank>") and
// polls until all have, so a missing rank is named in the error. Groups
// connect a gloo::rendezvous::Context through an adapter exposing the TCP
// store (under a per-group key prefix) as a gloo::rendezvous::Store. All
// store waits are polls with a deadline: a blocking c10d wait that times out
// leaves the client socket out of sync, a poll never does.
#include "shard/rendezvous.h"

// GREENSHARD_NO_GLOO (GPU-only builds without Gloo, e.g. bench/gpu on an
// image with nothing but a CUDA LibTorch): every group, world() included,
// is an NCCL group; host tensors are staged through the device.
#if defined(GREENSHARD_NO_GLOO) && !defined(GREENSHARD_CUDA)
#error "GREENSHARD_NO_GLOO needs GREENSHARD_CUDA"
#endif
#ifndef GREENSHARD_NO_GLOO
#include "communicator_gloo.h"
#endif
#include "communicator_nccl.h"  // no CUDA includes; used with GREENSHARD_CUDA only

#include <arpa/inet.h>
#ifndef GREENSHARD_NO_GLOO
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#endif
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace shard {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;


int parse_int(const char* name, const std::string& value) {
  const char* b = value.data();
  const char* e = b + value.size();
  while (b < e && (*b == ' ' || *b == '\t')) ++b;
  while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n')) --e;
  if (b < e && *b == '+') ++b;
  long long v = 0;
  auto [p, ec] = std::from_chars(b, e, v);
  if (b == e || ec != std::errc() || p != e || v < INT32_MIN || v > INT32_MAX) {
    throw std::invalid_argument(std::string("rendezvous: environment variable ") +
                                name + "='" + value + "' is not an integer");
  }
  return static_cast<int>(v);
}

// Polls `store` until every key exists or the deadline passes; returns the
// keys still missing (empty on success).
std::vector<std::string> poll_keys(c10d::Store& store,
                                   const std::vector<std::string>& keys,
                                   Clock::time_point deadline) {
  auto sleep = milliseconds(1);
  for (;;) {
    if (store.check(keys)) return {};
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::min(sleep, std::chrono::ceil<milliseconds>(
                                                    deadline - Clock::now())));
    sleep = std::min(sleep * 2, milliseconds(50));
  }
  std::vector<std::string> missing;
  for (const auto& k : keys) {
    if (!store.check({k})) missing.push_back(k);
  }
  return missing;
}

#ifndef GREENSHARD_NO_GLOO
// gloo's view of the TCP store: keys under `prefix`, waits that poll with a
// deadline and name the group members that did not show up.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(c10d::Store& store, std::string prefix, std::string group,
                   std::vector<int> members, milliseconds timeout)
      : store_(store), prefix_(std::move(prefix)), group_(std::move(group)),
        members_(std::move(members)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, std::vector<uint8_t>(data.begin(), data.end()));
  }

  std::vector<char> get(const std::string& key) override {
    wait({key}, timeout_);
    auto v = store_.get(prefix_ + key);
    return std::vector<char>(v.begin(), v.end());
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys,
            const milliseconds& timeout) override {
    const auto t = timeout.count() > 0 ? std::min(timeout, timeout_) : timeout_;
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    auto missing = poll_keys(store_, full, Clock::now() + t);
    if (missing.empty()) return;
    // gloo's keys are group ranks; translate to global ranks.
    std::vector<int> who;
    std::string raw;
    for (const auto& m : missing) {
      const std::string k = m.substr(prefix_.size());
      int gr = -1;
      auto [p, ec] = std::from_chars(k.data(), k.data() + k.size(), gr);
      if (ec == std::errc() && p == k.data() + k.size() && gr >= 0 &&
          gr < static_cast<int>(members_.size())) {
        who.push_back(members_[gr]);
      } else {
        raw += (raw.empty() ? "" : ", ") + k;
      }
    }
    std::ostringstream os;
    os << "timed out after " << t.count() << " ms waiting for group '" << group_
       << "' members";
    if (!who.empty()) os << ": global ranks " << format_ranks(who) << " did not join";
    if (!raw.empty()) os << " (store keys " << raw << ")";
    throw CommError(os.str());
  }

 private:
  c10d::Store& store_;
  const std::string prefix_;
  const std::string group_;
  const std::vector<int> members_;
  const milliseconds timeout_;
};
#endif  // GREENSHARD_NO_GLOO

// The local address used to reach host:port (a connected UDP socket sends
// nothing). 127.0.0.1 for a loopback master.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &res) != 0 || !res) {
    return "";
  }
  std::string out;
  for (addrinfo* ai = res; ai && out.empty(); ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
        char buf[INET6_ADDRSTRLEN] = {0};
        if (ss.ss_family == AF_INET) {
          inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
        } else if (ss.ss_family == AF_INET6) {
          inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
        }
        out = buf;
      }
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return out;
}

class RendezvousImpl final : public Rendezvous {
 public:
  RendezvousImpl(const RendezvousInfo& info, const CommunicatorOptions& options)
      : info_(info), options_(options) {
    const auto timeout = options_.timeout;
    const auto deadline = Clock::now() + timeout;
    const std::string where = info_.master_addr + ":" + std::to_string(info_.master_port);
    c10d::TCPStoreOptions o;
    o.port = static_cast<std::uint16_t>(info_.master_port);
    o.isServer = info_.rank == 0;
    o.numWorkers = static_cast<std::size_t>(info_.world_size);
    o.waitWorkers = false;
    o.timeout = timeout;
    try {
      store_ = c10::make_intrusive<c10d::TCPStore>(info_.master_addr, o);
    } catch (const std::exception& e) {
      if (info_.rank == 0) {
        throw CommError("rendezvous: rank 0 could not host the TCP store at " + where +
                        " (MASTER_ADDR/MASTER_PORT): " + e.what());
      }
      throw CommError("rendezvous: rank " + std::to_string(info_.rank) +
                      " could not reach the TCP store at " + where +
                      " hosted by rank 0 within " + std::to_string(timeout.count()) +
                      " ms (did rank 0 start?): " + e.what());
    }
    // Arrival: every rank announces itself and polls for the others. The
    // host (rank 0) that gives up first publishes why under kAbortKey, so
    // the ranks that did arrive report the missing ones too, rather than
    // just "store gone"; it waits briefly for them to read it.
    std::vector<std::string> keys;
    for (int r = 0; r < info_.world_size; ++r) keys.push_back(arrive_key(r));
    std::string failure;
    try {
      store_->set(arrive_key(info_.rank), std::vector<uint8_t>{'1'});
      auto sleep = milliseconds(1);
      for (;;) {
        if (store_->check(keys)) break;
        if (info_.rank != 0 && store_->check({kAbortKey})) {
          auto v = store_->get(kAbortKey);
          store_->set(abort_ack_key(info_.rank), std::vector<uint8_t>{'1'});
          failure = std::string(v.begin(), v.end()) + " (reported by rank 0)";
          break;
        }
        if (Clock::now() >= deadline) {
          std::vector<int> who, arrived;
          for (int r = 0; r < info_.world_size; ++r) {
            (store_->check({arrive_key(r)}) ? arrived : who).push_back(r);
          }
          failure = "rendezvous at " + where + " timed out after " +
                    std::to_string(timeout.count()) + " ms at rank " +
                    std::to_string(info_.rank) + ": ranks " + format_ranks(who) +
                    " of world size " + std::to_string(info_.world_size) +
                    " did not arrive";
          if (info_.rank == 0) {
            store_->set(kAbortKey, std::vector<uint8_t>(failure.begin(), failure.end()));
            std::vector<std::string> acks;
            for (int r : arrived) {
              if (r != 0) acks.push_back(abort_ack_key(r));
            }
            if (!acks.empty()) {
              poll_keys(*store_, acks, Clock::now() + std::chrono::seconds(3));
            }
          }
          break;
        }
        std::this_thread::sleep_for(sleep);
        sleep = std::min(sleep * 2, milliseconds(50));
      }
    } catch (const std::exception& e) {
      throw CommError("rendezvous at " + where + ": rank " + std::to_string(info_.rank) +
                      " lost the TCP store (rank 0 gone?): " + e.what());
    }
    if (!failure.empty()) throw CommError(failure);
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
      iface_ = ifname;
    } else {
      local_ip_ = local_address_towards(info_.master_addr, info_.master_port);
      if (local_ip_.empty()) local_ip_ = info_.master_addr;
    }
  }

  ~RendezvousImpl() override {
    bool aborted = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [key, g] : groups_) {
        if (g.future.valid() &&
            g.future.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
          try {
#ifndef GREENSHARD_NO_GLOO
            if (auto c = g.future.get(); c && detail::gloo_is_aborted(*c)) aborted = true;
#endif
#ifdef GREENSHARD_CUDA
            if (auto c = g.future.get(); c && detail::nccl_is_aborted(*c)) aborted = true;
#endif
          } catch (...) {
            aborted = true;
          }
        }
      }
    }
    {
      // Communicators first: abort in-flight work, join workers, close pairs.
      std::lock_guard<std::mutex> lock(mu_);
      groups_.clear();
    }
    // Rank 0 hosts the store: let the others finish with it first (bounded;
    // skipped after a communication error, when peers may be dead).
    try {
      store_->set(exit_key(info_.rank), std::vector<uint8_t>{'1'});
      if (info_.rank == 0 && info_.world_size > 1 && !aborted) {
        std::vector<std::string> keys;
        for (int r = 0; r < info_.world_size; ++r) keys.push_back(exit_key(r));
        const auto cap = std::min<milliseconds>(options_.timeout, std::chrono::seconds(30));
        poll_keys(*store_, keys, Clock::now() + cap);
      }
    } catch (...) {
    }
  }

  const RendezvousInfo& info() const override { return info_; }

  CommunicatorPtr world() override {
    std::vector<int> all(info_.world_size);
    for (int r = 0; r < info_.world_size; ++r) all[r] = r;
#ifdef GREENSHARD_NO_GLOO
    return get_or_create("\x01world", "world", "gs/nccl-world/", all, Backend::kNccl);
#else
    return get_or_create("\x01world", "world", "gs/world/", all);
#endif
  }

  void depart() override {
    if (departed_) return;
    std::vector<std::string> keys;
    for (int r = 0; r < info_.world_size; ++r) keys.push_back(depart_key(r));
    std::vector<std::string> missing;
    try {
      store_->set(depart_key(info_.rank), std::vector<uint8_t>{'1'});
      missing = poll_keys(*store_, keys, Clock::now() + options_.timeout);
    } catch (const std::exception& e) {
      throw CommError("depart: rank " + std::to_string(info_.rank) + " lost the TCP store at " +
                      info_.master_addr + ":" + std::to_string(info_.master_port) +
                      " (rank 0 gone?): " + e.what());
    }
    if (!missing.empty()) {
      std::vector<int> who;
      for (int r = 0; r < info_.world_size; ++r) {
        if (std::find(missing.begin(), missing.end(), depart_key(r)) != missing.end()) {
          who.push_back(r);
        }
      }
      throw CommError("depart: timed out after " + std::to_string(options_.timeout.count()) +
                      " ms at rank " + std::to_string(info_.rank) + ": ranks " +
                      format_ranks(who) + " did not finish their run");
    }
    departed_ = true;
  }

  using Rendezvous::new_group;

  CommunicatorPtr new_group(const std::string& name,
                            const std::vector<int>& ranks) override {
#ifdef GREENSHARD_NO_GLOO
    return new_group_with_backend(name, ranks, Backend::kNccl);
#else
    check_group(name, ranks);
    const std::string prefix =
        "gs/g/" + std::to_string(name.size()) + ":" + name + "/";
    return get_or_create(name, name, prefix, ranks);
#endif
  }

 protected:
  CommunicatorPtr new_group_with_backend(const std::string& name, const std::vector<int>& ranks,
                                         Backend backend) override {
#ifndef GREENSHARD_NO_GLOO
    if (backend == Backend::kGloo) return new_group(name, ranks);
#endif
#ifdef GREENSHARD_NO_GLOO
    backend = Backend::kNccl;  // the only backend of this build
#endif
#ifdef GREENSHARD_CUDA
    check_group(name, ranks);
    const std::string prefix =
        "gs/nccl/" + std::to_string(name.size()) + ":" + name + "/";
    return get_or_create(name, name, prefix, ranks, backend);
#else
    return Rendezvous::new_group_with_backend(name, ranks, backend);
#endif
  }

 private:
  void check_group(const std::string& name, const std::vector<int>& ranks) const {
    if (name.empty()) throw std::invalid_argument("new_group: empty group name");
    if (ranks.empty()) {
      throw std::invalid_argument("new_group '" + name + "': empty rank list");
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] < 0 || ranks[i] >= info_.world_size) {
        throw std::invalid_argument("new_group '" + name + "': rank " +
                                    std::to_string(ranks[i]) + " outside world size " +
                                    std::to_string(info_.world_size));
      }
      if (i > 0 && ranks[i] <= ranks[i - 1]) {
        throw std::invalid_argument("new_group '" + name + "': ranks " + format_ranks(ranks) +
                                    " must be ascending and unique");
      }
    }
    if (!std::binary_search(ranks.begin(), ranks.end(), info_.rank)) {
      throw std::invalid_argument("new_group '" + name + "': this rank " +
                                  std::to_string(info_.rank) + " is not a member of " +
                                  format_ranks(ranks));
    }
  }

  struct Group {
    std::vector<int> ranks;
    std::shared_future<CommunicatorPtr> future;
    Backend backend = Backend::kGloo;
  };

  static std::string arrive_key(int r) { return "gs/arrive/" + std::to_string(r); }
  static std::string exit_key(int r) { return "gs/exit/" + std::to_string(r); }
  static std::string depart_key(int r) { return "gs/depart/" + std::to_string(r); }
  static std::string abort_ack_key(int r) { return "gs/abort_ack/" + std::to_string(r); }
  static constexpr const char* kAbortKey = "gs/abort";

  CommunicatorPtr get_or_create(const std::string& key, const std::string& name,
                                const std::string& prefix,
                                const std::vector<int>& ranks,
                                Backend backend = Backend::kGloo) {
    std::shared_future<CommunicatorPtr> fut;
    std::promise<CommunicatorPtr> promise;
    bool creator = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = groups_.find(key);
      if (it != groups_.end()) {
        if (it->second.ranks != ranks) {
          throw std::invalid_argument("new_group '" + name + "': already created with ranks " +
                                      format_ranks(it->second.ranks) + ", now asked for " +
                                      format_ranks(ranks));
        }
        if (it->second.backend != backend) {
          throw std::invalid_argument("new_group '" + name + "': already created with backend " +
                                      to_string(it->second.backend) + ", now asked for " +
                                      to_string(backend));
        }
        fut = it->second.future;
      } else {
        fut = promise.get_future().share();
        groups_.emplace(key, Group{ranks, fut, backend});
        creator = true;
      }
    }
    if (creator) {
      try {
        promise.set_value(backend == Backend::kGloo ? connect_group(name, prefix, ranks)
                                                    : connect_nccl_group(name, prefix, ranks));
      } catch (...) {
        promise.set_exception(std::current_exception());
      }
    }
    return fut.get();
  }

  CommunicatorPtr connect_group(const std::string& name, const std::string& prefix,
                                const std::vector<int>& ranks) {
#ifdef GREENSHARD_NO_GLOO
    return connect_nccl_group(name, prefix, ranks);
#else
    const int n = static_cast<int>(ranks.size());
    detail::GlooGroupSpec spec;
    static_cast<detail::GroupSpec&>(spec) = detail::group_spec(name, ranks, info_.rank, options_.timeout);
    const int grank = spec.rank;
    if (n == 1) return detail::make_gloo_communicator(spec, nullptr);

    auto ctx = std::make_shared<gloo::rendezvous::Context>(grank, n);
    ctx->setTimeout(options_.timeout);
    try {
      gloo::transport::tcp::attr attr;
      if (!iface_.empty()) {
        attr.iface = iface_;
      } else {
        attr.hostname = local_ip_;
      }
      // The device's event-loop thread (which writes to the sockets too)
      // inherits this thread's signal mask: create it with SIGPIPE blocked
      // so a dead peer gives EPIPE, not a fatal SIGPIPE.
      sigset_t set, old;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &set, &old);
      std::shared_ptr<gloo::transport::Device> device;
      try {
        device = gloo::transport::tcp::CreateDevice(attr);
      } catch (...) {
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        throw;
      }
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      GlooStoreAdapter adapter(*store_, prefix, name, ranks, options_.timeout);
      ctx->connectFullMesh(adapter, device);
    } catch (const std::exception& e) {
      throw CommError("new_group '" + name + "' (global ranks " + format_ranks(ranks) +
                      ") failed to connect at global rank " + std::to_string(info_.rank) +
                      ": " + e.what());
    }
    auto comm = detail::make_gloo_communicator(spec, ctx);
    // Every member connected and is done with the store once this returns.
    CollectiveOptions o;
    o.tag = "connect check";
    comm->barrier(o)->wait();
    return comm;
#endif  // GREENSHARD_NO_GLOO
  }

  // An NCCL communicator on the current CUDA device; group rank 0 publishes
  // the unique id under `prefix`.
  CommunicatorPtr connect_nccl_group(const std::string& name, const std::string& prefix,
                                     const std::vector<int>& ranks) {
#ifdef GREENSHARD_CUDA
    detail::NcclGroupSpec spec;
    static_cast<detail::GroupSpec&>(spec) = detail::group_spec(name, ranks, info_.rank, options_.timeout);
    spec.global_rank = info_.rank;
    spec.device = -1;  // the current device (the worker sets LOCAL_RANK's)
    auto env_flag = [](const char* var, bool dflt) {
      const char* v = std::getenv(var);
      if (!v || !*v) return dflt;
      return std::string(v) != "0";
    };
    spec.low_precision_reduce_in_fp32 = env_flag("GREENSHARD_NCCL_REDUCE_IN_FP32", true);
    spec.blocking_wait = env_flag("GREENSHARD_NCCL_BLOCKING_WAIT", false);
    detail::NcclStore st;
    st.set = [this, prefix](const std::string& key, const std::vector<uint8_t>& value) {
      store_->set(prefix + key, value);
    };
    st.get = [this, prefix, name, ranks](const std::string& key, milliseconds timeout) {
      auto missing = poll_keys(*store_, {prefix + key}, Clock::now() + timeout);
      if (!missing.empty()) {
        throw CommError("timed out after " + std::to_string(timeout.count()) +
                        " ms waiting for group '" + name + "' rank 0 (global rank " +
                        std::to_string(ranks.front()) +
                        ") to publish the NCCL unique id: global ranks " +
                        format_ranks({ranks.front()}) + " did not join");
      }
      return store_->get(prefix + key);
    };
    auto comm = detail::make_nccl_communicator(std::move(spec), st);
    // Every member connected once this returns.
    CollectiveOptions o;
    o.tag = "connect check";
    comm->barrier(o)->wait();
    return comm;
#else
    throw CommError("new_group '" + name + "': backend nccl is not available in this build "
                    "(configure with GREENSHARD_CUDA=ON)");
#endif
  }

  RendezvousInfo info_;
  CommunicatorOptions options_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::string local_ip_, iface_;
  std::mutex mu_;
  std::map<std::string, Group> groups_;
  bool departed_ = false;
};

}  // namespace

RendezvousInfo rendezvous_info_from_env(
    const std::function<const char*(const char*)>& getenv) {
  auto get = [&](const char* name) -> std::string {
    const char* v = getenv ? getenv(name) : std::getenv(name);
    if (v == nullptr) {
      throw std::invalid_argument(std::string("rendezvous: environment variable ") +
                                  name + " is not set (expected a torchrun-style launch)");
    }
    return v;
  };
  RendezvousInfo info;
  info.master_addr = get(kMasterAddrVar);
  info.master_port = parse_int(kMasterPortVar, get(kMasterPortVar));
  info.rank = parse_int(kRankVar, get(kRankVar));
  info.world_size = parse_int(kWorldSizeVar, get(kWorldSizeVar));
  info.local_rank = parse_int(kLocalRankVar, get(kLocalRankVar));
  info.local_world_size = parse_int(kLocalWorldSizeVar, get(kLocalWorldSizeVar));
  validate(info);
  return info;
}

void validate(const RendezvousInfo& info) {
  auto fail = [](const std::string& msg) {
    throw std::invalid_argument("rendezvous: " + msg);
  };
  if (info.master_addr.empty()) fail("MASTER_ADDR is empty");
  if (info.master_port < 1 || info.master_port > 65535) {
    fail("MASTER_PORT=" + std::to_string(info.master_port) + " is out of range 1..65535");
  }
  if (info.world_size <= 0) {
    fail("WORLD_SIZE=" + std::to_string(info.world_size) + " must be at least 1");
  }
  if (info.rank < 0 || info.rank >= info.world_size) {
    fail("RANK=" + std::to_string(info.rank) + " must be in [0, WORLD_SIZE=" +
         std::to_string(info.world_size) + ")");
  }
  if (info.local_world_size <= 0) {
    fail("LOCAL_WORLD_SIZE=" + std::to_string(info.local_world_size) +
         " must be at least 1");
  }
  if (info.local_rank < 0 || info.local_rank >= info.local_world_size) {
    fail("LOCAL_RANK=" + std::to_string(info.local_rank) +
         " must be in [0, LOCAL_WORLD_SIZE=" + std::to_string(info.local_world_size) + ")");
  }
  if (info.world_size % info.local_world_size != 0) {
    fail("WORLD_SIZE=" + std::to_string(info.world_size) +
         " is not a multiple of LOCAL_WORLD_SIZE=" + std::to_string(info.local_world_size));
  }
}

const char* to_string(Backend backend) { return backend == Backend::kGloo ? "gloo" : "nccl"; }

Backend backend_for(const c10::Device& compute_device) {
#ifdef GREENSHARD_CUDA
  if (compute_device.is_cuda()) return Backend::kNccl;
#endif
  return Backend::kGloo;
}

CommunicatorPtr Rendezvous::new_group(const std::string& name, const std::vector<int>& ranks,
                                      Backend backend) {
  if (backend == Backend::kGloo) return new_group(name, ranks);
  return new_group_with_backend(name, ranks, backend);
}

CommunicatorPtr Rendezvous::new_group_with_backend(const std::string& name,
                                                   const std::vector<int>& ranks,
                                                   Backend backend) {
  if (backend == Backend::kGloo) return new_group(name, ranks);
  throw CommError("new_group '" + name + "': backend " + std::string(to_string(backend)) +
                  " is not available in this build (configure with GREENSHARD_CUDA=ON)");
}

std::shared_ptr<Rendezvous> Rendezvous::connect(const RendezvousInfo& info,
                                                const CommunicatorOptions& options) {
  validate(info);
  return std::make_shared<RendezvousImpl>(info, options);
}

}  // namespace shard
