// Communicator / rendezvous tests.
//
// Multi-rank tests re-execute this binary as every rank (gstest::run_ranks):
// with GS_RANK_SCENARIO set, main() runs that scenario as one rank and exits
// 0 (printing SCENARIO_OK) or 1 (printing what failed); otherwise it runs
// gtest. Every spawn has a deadline; a hang shows up as timed_out.
#include "common/spawn.h"
#include "shard/communicator.h"
#include "shard/rendezvous.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}


bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// ===========================================================================
// Rank-side scenarios
// ===========================================================================

int g_rank = -1;
std::atomic<int> g_failures{0};
std::mutex g_print_mu;

void say(const std::string& msg) {
  std::lock_guard<std::mutex> lock(g_print_mu);
  std::cout << "[rank " << g_rank << "] " << msg << std::endl;
}

#define SCHECK(cond, msg)                                                   \
  do {                                                                      \
    if (!(cond)) {                                                          \
      ++g_failures;                                                         \
      std::ostringstream os_;                                               \
      os_ << "FAIL " << __FILE__ << ":" << __LINE__ << ": " #cond << " -- " \
          << msg;                                                           \
      say(os_.str());                                                       \
    }                                                                       \
  } while (0)

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : dflt;
}

// File-based sync between the ranks of one spawn (GS_SYNC_DIR, a TempDir of
// the test): keeps process start-up skew on a loaded machine out of short
// deadlines, and orders "peer goes away" after "survivor saw the error".
void touch(const std::string& name) {
  const char* dir = std::getenv("GS_SYNC_DIR");
  if (!dir) return;
  std::FILE* f = std::fopen((std::string(dir) + "/" + name).c_str(), "w");
  if (f) std::fclose(f);
}

bool wait_files(const std::vector<std::string>& names, std::chrono::seconds timeout) {
  const char* dir = std::getenv("GS_SYNC_DIR");
  if (!dir) return false;
  const auto deadline = Clock::now() + timeout;
  for (const auto& n : names) {
    const std::string path = std::string(dir) + "/" + n;
    for (;;) {
      if (std::FILE* f = std::fopen(path.c_str(), "r")) {
        std::fclose(f);
        break;
      }
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(10ms);
    }
  }
  return true;
}

std::string rank_file(const std::string& tag, int rank) {
  return tag + "." + std::to_string(rank);
}

// Touches tag.<rank> and waits for tag.<r> of every r in ranks.
void file_barrier(const std::string& tag, int rank, const std::vector<int>& ranks) {
  touch(rank_file(tag, rank));
  std::vector<std::string> names;
  for (int r : ranks) names.push_back(rank_file(tag, r));
  SCHECK(wait_files(names, 120s), "file barrier '" << tag << "' timed out");
}

std::vector<int> range_except(int n, int skip) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    if (i != skip) out.push_back(i);
  }
  return out;
}

shard::CommunicatorOptions comm_options(int timeout_ms) {
  shard::CommunicatorOptions o;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  return o;
}

// Deterministic per-rank data.
// Small integers: exact in every dtype and under any summation order.
at::Tensor int_data(int rank, int64_t count, int64_t offset, at::ScalarType dt) {
  auto i = at::arange(offset, offset + count, at::kLong);
  auto v = ((i * 3 + rank * 7) % 17) - 8;
  return v.to(dt).contiguous();
}

// Fractional values in [-1, 1], rounded to dt.
at::Tensor real_data(int rank, int64_t count, int64_t offset, at::ScalarType dt) {
  auto i = at::arange(offset, offset + count, at::kDouble);
  return at::sin(i * 0.37 + rank * 1.3 + 0.11).to(dt).contiguous();
}

using DataFn = at::Tensor (*)(int, int64_t, int64_t, at::ScalarType);

void check_close(const at::Tensor& got, const at::Tensor& ref, double rtol, double atol,
                 const std::string& what) {
  auto g = got.to(at::kDouble);
  auto err = (g - ref).abs();
  auto bound = ref.abs() * rtol + atol;
  bool ok = (err <= bound).all().item<bool>();
  if (!ok) {
    auto idx = (err - bound).argmax().item<int64_t>();
    std::ostringstream os;
    os << what << ": max violation at " << idx << " got " << g[idx].item<double>()
       << " ref " << ref[idx].item<double>();
    SCHECK(ok, os.str());
  }
}

void tolerances(at::ScalarType dt, bool exact, double& rtol, double& atol) {
  if (exact) {
    rtol = 0;
    atol = 0;
    return;
  }
  switch (dt) {
    case at::kBFloat16:
      rtol = 1.0 / 256;  // one rounding of an (fp32-accumulated) sum
      atol = 1e-6;
      break;
    case at::kHalf:
      rtol = 1.0 / 2048;
      atol = 1e-6;
      break;
    case at::kFloat:
      rtol = 1e-6;
      atol = 1e-6;
      break;
    default:
      rtol = 1e-12;
      atol = 1e-12;
  }
}

std::string dt_name(at::ScalarType dt) { return c10::toString(dt); }

void test_all_gather(shard::Communicator& c, at::ScalarType dt, int64_t count) {
  const int n = c.size(), r = c.rank();
  const auto& g = c.global_ranks();
  auto expected = at::empty({n * count}, at::TensorOptions().dtype(dt));
  for (int q = 0; q < n; ++q) expected.narrow(0, q * count, count).copy_(real_data(g[q], count, 0, dt));
  const std::string what = "all_gather " + dt_name(dt) + " count " + std::to_string(count);
  // Separate output.
  {
    auto in = real_data(g[r], count, 0, dt);
    auto in_copy = in.clone();
    auto out = at::full({n * count}, 77, at::TensorOptions().dtype(dt));
    const uint64_t before = c.bytes_sent();
    c.all_gather_into(out, in, {0ms, what})->wait();
    const uint64_t sent = c.bytes_sent() - before;
    // Exact bytes, any dtype.
    SCHECK(at::equal(out, expected), what);
    SCHECK(at::equal(in, in_copy), what << ": input modified");
    // A ring moves (n-1)/n of the output per rank, no more.
    const uint64_t total = static_cast<uint64_t>(n * count) * out.element_size();
    SCHECK(sent == total / n * (n - 1), what << ": sent " << sent << " bytes, total " << total);
  }
  // In place: input is this rank's chunk of the output.
  {
    auto out = at::full({n * count}, 77, at::TensorOptions().dtype(dt));
    auto in = out.narrow(0, r * count, count);
    in.copy_(real_data(g[r], count, 0, dt));
    c.all_gather_into(out, in, {0ms, what + " in place"})->wait();
    SCHECK(at::equal(out, expected), what << " in place");
  }
}

void test_reduce_scatter(shard::Communicator& c, at::ScalarType dt, int64_t count,
                         shard::ReduceOp op, DataFn data, bool exact) {
  const int n = c.size(), r = c.rank();
  const auto& g = c.global_ranks();
  const std::string what = std::string("reduce_scatter ") + shard::to_string(op) + " " +
                           dt_name(dt) + " count " + std::to_string(count) +
                           (exact ? " int" : " real");
  auto in = data(g[r], n * count, 0, dt);
  auto in_copy = in.clone();
  auto out = at::full({count}, 77, at::TensorOptions().dtype(dt));
  // Reference from the same (rounded) inputs, in double.
  auto ref = at::zeros({count}, at::kDouble);
  for (int q = 0; q < n; ++q) ref += data(g[q], count, r * count, dt).to(at::kDouble);
  if (op == shard::ReduceOp::kAvg) ref /= n;
  const uint64_t before = c.bytes_sent();
  auto w = c.reduce_scatter(out, in, op, {0ms, what});
  w->wait();
  const uint64_t sent = c.bytes_sent() - before;
  double rtol, atol;
  tolerances(dt, exact, rtol, atol);
  check_close(out, ref, rtol, atol, what);
  SCHECK(at::equal(in, in_copy), what << ": input modified");
  // Ring: n-1 hops of one block. The first hop carries the input dtype, later
  // ones fp32 partial sums for bf16/fp16 (fp32 accumulation).
  const uint64_t esize = in.element_size();
  const uint64_t acc = (dt == at::kBFloat16 || dt == at::kHalf) ? 4 : esize;
  const uint64_t expect = n == 1 ? 0 : count * (esize + (n - 2) * acc);
  SCHECK(sent == expect, what << ": sent " << sent << " bytes, expected " << expect);
}

void test_all_reduce(shard::Communicator& c, at::ScalarType dt, int64_t count,
                     shard::ReduceOp op, DataFn data, bool exact) {
  const int n = c.size(), r = c.rank();
  const auto& g = c.global_ranks();
  const std::string what = std::string("all_reduce ") + shard::to_string(op) + " " +
                           dt_name(dt) + " count " + std::to_string(count) +
                           (exact ? " int" : " real");
  auto t = data(g[r], count, 0, dt);
  auto ref = at::zeros({count}, at::kDouble);
  for (int q = 0; q < n; ++q) ref += data(g[q], count, 0, dt).to(at::kDouble);
  if (op == shard::ReduceOp::kAvg) ref /= n;
  c.all_reduce(t, op, {0ms, what})->wait();
  double rtol, atol;
  tolerances(dt, exact, rtol, atol);
  check_close(t, ref, rtol, atol, what);
}

void test_broadcast(shard::Communicator& c, at::ScalarType dt, int64_t count) {
  const int n = c.size(), r = c.rank();
  const auto& g = c.global_ranks();
  for (int root = 0; root < n; ++root) {
    const std::string what =
        "broadcast root " + std::to_string(root) + " " + dt_name(dt) + " count " + std::to_string(count);
    auto t = r == root ? real_data(g[root], count, 5, dt)
                       : at::full({count}, 77, at::TensorOptions().dtype(dt));
    c.broadcast(t, root, {0ms, what})->wait();
    SCHECK(at::equal(t, real_data(g[root], count, 5, dt)), what);
  }
}

// Every collective, several dtypes and odd sizes, sum and avg.
void run_collective_suite(shard::Communicator& c, const std::vector<int64_t>& counts) {
  for (auto dt : {at::kFloat, at::kBFloat16, at::kDouble, at::kHalf}) {
    for (int64_t count : counts) {
      test_all_gather(c, dt, count);
      for (auto op : {shard::ReduceOp::kSum, shard::ReduceOp::kAvg}) {
        test_reduce_scatter(c, dt, count, op, int_data, true);
        test_reduce_scatter(c, dt, count, op, real_data, false);
        test_all_reduce(c, dt, count, op, int_data, true);
        test_all_reduce(c, dt, count + 1, op, real_data, false);  // not a multiple of n
      }
      test_broadcast(c, dt, count);
    }
  }
}

int scenario_collectives() {
  auto info = shard::rendezvous_info_from_env();
  auto rdv = shard::Rendezvous::connect(info, comm_options(60000));
  auto world = rdv->world();
  const int n = world->size();
  SCHECK(n == info.world_size, "size " << n);
  SCHECK(world->rank() == info.rank, "rank " << world->rank());
  SCHECK(world->backend_name() == "gloo", world->backend_name());
  std::vector<int> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  SCHECK(world->global_ranks() == all, shard::format_ranks(world->global_ranks()));
  SCHECK(rdv->world() == world, "world() twice returns a different communicator");

  // 300001 fp32 elements per rank exceeds the 1 MiB pipelining chunk.
  run_collective_suite(*world, {1, 7, 1000, 4097, 300001});

  // Many collectives in flight at once complete in issue order.
  {
    std::vector<at::Tensor> ts;
    std::vector<shard::WorkPtr> ws;
    for (int k = 0; k < 16; ++k) {
      ts.push_back(at::full({1000 + k}, static_cast<float>(info.rank + k)));
      ws.push_back(world->all_reduce(ts.back(), shard::ReduceOp::kSum));
    }
    for (int k = 0; k < 16; ++k) {
      ws[k]->wait();
      const float expect = static_cast<float>(n * (n - 1) / 2 + n * k);
      SCHECK(at::equal(ts[k], at::full({1000 + k}, expect)), "queued all_reduce " << k);
    }
  }

  // Work semantics.
  {
    auto t = at::ones({10});
    auto w = world->all_reduce(t, shard::ReduceOp::kSum);
    w->wait();
    w->wait();  // twice is fine
    SCHECK(w->is_completed(), "not completed after wait");
    SCHECK(w->error() == nullptr, "error after success");
    SCHECK(at::equal(t, at::full({10}, static_cast<float>(n))), "ones sum");
    world->barrier()->wait();
  }

  // Refusals.
  {
    bool threw = false;
    try {
      world->all_reduce(at::ones({4}, at::kInt), shard::ReduceOp::kSum);
    } catch (const shard::CommError& e) {
      threw = contains(e.what(), "backend gloo does not support") && contains(e.what(), "Int");
      if (!threw) say(std::string("unexpected message: ") + e.what());
    }
    SCHECK(threw, "int all_reduce not refused");
    threw = false;
    try {
      world->all_gather_into(at::empty({n * 3 + 1}), at::empty({3}));
    } catch (const shard::CommError& e) {
      threw = contains(e.what(), "all_gather_into");
    }
    SCHECK(threw, "size mismatch not refused");
    threw = false;
    try {
      world->all_gather_into(at::empty({n * 4}), at::empty({4, 2}).select(1, 0));
    } catch (const shard::CommError& e) {
      threw = contains(e.what(), "does not support non-contiguous");
    }
    SCHECK(threw, "non-contiguous not refused");
  }
  // Still usable after refusals (nothing was sent).
  {
    auto t = at::ones({3});
    world->all_reduce(t, shard::ReduceOp::kAvg)->wait();
    SCHECK(at::equal(t, at::ones({3})), "avg of ones");
  }
  return 0;
}

// 4 ranks: shard groups {0,1},{2,3} and replicate groups {0,2},{1,3}, built
// and used concurrently from two threads of every rank.
int scenario_subgroups() {
  auto info = shard::rendezvous_info_from_env();
  auto rdv = shard::Rendezvous::connect(info, comm_options(60000));
  const int r = info.rank;
  if (info.world_size != 4) {
    SCHECK(false, "needs world size 4");
    return 1;
  }
  const std::vector<int> shard_ranks = r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
  const std::vector<int> repl_ranks = r % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
  const std::string shard_name = r < 2 ? "shard01" : "shard23";
  const std::string repl_name = r % 2 == 0 ? "repl02" : "repl13";

  bool threw = false;
  try {
    rdv->new_group("other", r < 2 ? std::vector<int>{2, 3} : std::vector<int>{0, 1});
  } catch (const std::invalid_argument& e) {
    threw = contains(e.what(), "not a member");
  }
  SCHECK(threw, "non-member new_group not refused");

  auto body = [&](const std::string& name, const std::vector<int>& ranks) {
    try {
      auto c = rdv->new_group(name, ranks);
      SCHECK(c->size() == 2, name);
      SCHECK(c->global_ranks() == ranks, name << " " << shard::format_ranks(c->global_ranks()));
      SCHECK(c->global_ranks()[c->rank()] == r, name);
      SCHECK(rdv->new_group(name, ranks) == c, name << " twice");
      for (int it = 0; it < 5; ++it) {
        for (auto dt : {at::kFloat, at::kBFloat16}) {
          test_all_gather(*c, dt, 1001 + it);
          test_reduce_scatter(*c, dt, 1001 + it, shard::ReduceOp::kAvg, real_data, false);
          test_all_reduce(*c, dt, 300003, shard::ReduceOp::kSum, int_data, true);
        }
      }
    } catch (const std::exception& e) {
      SCHECK(false, name << ": " << e.what());
    }
  };
  std::thread a(body, shard_name, shard_ranks);
  std::thread b(body, repl_name, repl_ranks);
  a.join();
  b.join();
  // The world group still works next to them.
  auto world = rdv->world();
  test_all_reduce(*world, at::kFloat, 12345, shard::ReduceOp::kSum, int_data, true);
  return 0;
}

// Two communicators over the same ranks, driven by two threads at once.
int scenario_two_communicators() {
  auto info = shard::rendezvous_info_from_env();
  auto rdv = shard::Rendezvous::connect(info, comm_options(60000));
  auto world = rdv->world();
  std::vector<int> all(info.world_size);
  for (int i = 0; i < info.world_size; ++i) all[i] = i;
  auto second = rdv->new_group("second", all);
  SCHECK(second != world, "same communicator");
  auto body = [&](shard::CommunicatorPtr c, int seed) {
    try {
      for (int it = 0; it < 20; ++it) {
        const int64_t count = 1 + (seed * 7919 + it * 104729) % 200000;
        test_all_reduce(*c, at::kFloat, count, shard::ReduceOp::kSum, int_data, true);
        test_all_gather(*c, at::kBFloat16, count / 3 + 1);
        test_reduce_scatter(*c, at::kFloat, count / 4 + 1, shard::ReduceOp::kSum, int_data, true);
      }
    } catch (const std::exception& e) {
      SCHECK(false, e.what());
    }
  };
  std::thread a(body, world, 1);
  std::thread b(body, second, 2);
  a.join();
  b.join();
  return 0;
}

// One rank exits (no cleanup) after connecting; the others' collective must
// fail with a clear error before its deadline, and so must later calls.
int scenario_peer_exit() {
  auto info = shard::rendezvous_info_from_env();
  const int die = env_int("GS_DIE_RANK", info.world_size - 1);
  auto rdv = shard::Rendezvous::connect(info, comm_options(60000));
  auto world = rdv->world();
  if (info.rank == die) {
    say("exiting before the collective");
    std::fflush(stdout);
    std::_Exit(0);
  }
  const int timeout_ms = 5000;
  auto in = at::ones({1 << 16});
  auto out = at::empty({world->size() << 16});
  const auto t0 = Clock::now();
  auto w = world->all_gather_into(out, in, {std::chrono::milliseconds(timeout_ms), "unit 'h.3'"});
  std::string msg;
  try {
    w->wait();
    SCHECK(false, "all_gather_into succeeded without a peer");
  } catch (const shard::CommError& e) {
    msg = e.what();
  }
  const double took = seconds_since(t0);
  say("error after " + std::to_string(took) + " s: " + msg);
  SCHECK(contains(msg, "all_gather_into"), msg);
  SCHECK(contains(msg, "unit 'h.3'"), msg);
  SCHECK(contains(msg, "global ranks " + shard::format_ranks(world->global_ranks())), msg);
  SCHECK(contains(msg, "at global rank " + std::to_string(info.rank)), msg);
  SCHECK(w->is_completed(), "not completed");
  SCHECK(w->error() != nullptr, "no error()");
  bool again = false;
  try {
    w->wait();
  } catch (const shard::CommError& e) {
    again = std::string(e.what()) == msg;
  }
  SCHECK(again, "second wait did not rethrow the same error");

  // Aborted: later calls fail at once, carrying the first error.
  auto t = at::ones({8});
  auto w2 = world->all_reduce(t, shard::ReduceOp::kSum, {0ms, "later"});
  std::string msg2;
  try {
    w2->wait();
    SCHECK(false, "all_reduce after abort succeeded");
  } catch (const shard::CommError& e) {
    msg2 = e.what();
  }
  SCHECK(contains(msg2, "all_reduce"), msg2);
  SCHECK(contains(msg2, "later"), msg2);
  SCHECK(contains(msg2, msg), msg2);
  return 0;  // destructors must not hang
}

// One rank dies while collectives are moving data: the others fail with a
// CommError (not SIGPIPE, not a wait for the deadline) and can exit.
int scenario_peer_dies_mid() {
  auto info = shard::rendezvous_info_from_env();
  auto rdv = shard::Rendezvous::connect(info, comm_options(60000));
  auto world = rdv->world();
  const int die = info.world_size - 1;
  const int n = world->size();
  const int64_t count = 4 << 20;  // 16 MiB fp32 per rank
  auto in = at::ones({count});
  auto out = at::empty({n * count});
  auto rs_out = at::empty({count});
  std::thread killer;
  if (info.rank == die) {
    killer = std::thread([] {
      std::this_thread::sleep_for(300ms);
      say("exiting in the middle of a collective");
      std::fflush(stdout);
      std::_Exit(0);
    });
  }
  std::string msg;
  auto last_ok = Clock::now();
  for (int it = 0; it < 100000 && msg.empty(); ++it) {
    try {
      world->all_gather_into(out, in, {60000ms, "mid ag"})->wait();
      world->reduce_scatter(rs_out, out, shard::ReduceOp::kSum, {60000ms, "mid rs"})->wait();
      last_ok = Clock::now();
    } catch (const shard::CommError& e) {
      msg = e.what();
    }
  }
  if (killer.joinable()) killer.join();  // not reached on the dying rank
  const double took = seconds_since(last_ok);
  say("error after " + std::to_string(took) + " s (since the last success): " + msg);
  SCHECK(!msg.empty(), "no error");
  // A broken connection fails the collective, also an operation already in
  // flight on it: the error is the connection's, not the 60 s deadline's
  // (asserted on the message, not on a duration: these machines are shared).
  SCHECK(!contains(msg, "timed out"), msg);
  SCHECK(contains(msg, "at global rank " + std::to_string(info.rank)), msg);
  SCHECK(contains(msg, "mid ag") || contains(msg, "mid rs"), msg);
  return 0;
}

// One rank connects but never calls the collective: the others time out.
int scenario_peer_stall() {
  auto info = shard::rendezvous_info_from_env();
  auto rdv = shard::Rendezvous::connect(info, comm_options(30000));
  auto world = rdv->world();
  const int timeout_ms = 2000;
  const int stalled = info.world_size - 1;
  if (info.rank == stalled) {
    // Stay connected, without calling, until every other rank saw its error.
    std::vector<std::string> names;
    for (int r : range_except(info.world_size, stalled)) names.push_back(rank_file("failed", r));
    SCHECK(wait_files(names, 120s), "the others did not report their errors");
    return 0;
  }
  auto t = at::ones({1000});
  const auto t0 = Clock::now();
  std::string msg;
  try {
    world->all_reduce(t, shard::ReduceOp::kSum, {std::chrono::milliseconds(timeout_ms), "stalled"})
        ->wait();
    SCHECK(false, "all_reduce succeeded without a peer");
  } catch (const shard::CommError& e) {
    msg = e.what();
  }
  const double took = seconds_since(t0);
  say("error after " + std::to_string(took) + " s: " + msg);
  touch(rank_file("failed", info.rank));
  SCHECK(contains(msg, "all_reduce"), msg);
  SCHECK(contains(msg, "stalled"), msg);
  SCHECK(contains(msg, "at global rank " + std::to_string(info.rank)), msg);
  if (info.world_size == 2) SCHECK(contains(msg, "timed out"), msg);
  return 0;
}

// Destroying a communicator with a collective in flight (peer absent, long
// timeout) fails the Work and returns promptly.
int scenario_destroy_pending() {
  auto info = shard::rendezvous_info_from_env();
  auto rdv = shard::Rendezvous::connect(info, comm_options(60000));
  auto world = rdv->world();
  if (info.rank != 0) {
    // Stay connected (without calling) until rank 0's work was aborted.
    SCHECK(wait_files({"aborted.0"}, 120s), "rank 0 did not abort its work");
    return 0;
  }
  auto in = at::ones({1000});
  auto out = at::empty({world->size() * 1000});
  auto w = world->all_gather_into(out, in, {60000ms, "pending"});
  std::this_thread::sleep_for(300ms);
  SCHECK(!w->is_completed(), "completed without peers");
  std::thread notifier([w] {
    while (!w->is_completed()) std::this_thread::sleep_for(5ms);
    touch("aborted.0");
  });
  const auto t0 = Clock::now();
  world.reset();
  rdv.reset();
  notifier.join();
  const double took = seconds_since(t0);
  say("destroyed in " + std::to_string(took) + " s");
  SCHECK(w->is_completed(), "work not completed after destruction");
  std::string msg;
  try {
    w->wait();
  } catch (const shard::CommError& e) {
    msg = e.what();
  }
  SCHECK(contains(msg, "destroyed") && contains(msg, "all_gather_into"), msg);
  SCHECK(!contains(msg, "timed out"), "destruction waited for the deadline: " << msg);
  return 0;
}

// A rank never arrives at the rendezvous (GS_ABSENT_RANK exits at once).
int scenario_rendezvous_absent() {
  auto info = shard::rendezvous_info_from_env();
  const int absent = env_int("GS_ABSENT_RANK", 1);
  if (info.rank == absent) return 0;
  file_barrier("started", info.rank, range_except(info.world_size, absent));
  const int timeout_ms = 3000;
  const auto t0 = Clock::now();
  std::string msg;
  try {
    auto rdv = shard::Rendezvous::connect(info, comm_options(timeout_ms));
    rdv->world();
    SCHECK(false, "rendezvous succeeded without rank " << absent);
  } catch (const shard::CommError& e) {
    msg = e.what();
  }
  const double took = seconds_since(t0);
  say("error after " + std::to_string(took) + " s: " + msg);
  if (absent == 0) {
    SCHECK(contains(msg, "could not reach the TCP store"), msg);
    SCHECK(contains(msg, "rank 0"), msg);
    SCHECK(contains(msg, "127.0.0.1:" + std::to_string(info.master_port)), msg);
  } else {
    SCHECK(contains(msg, "did not arrive"), msg);
    SCHECK(contains(msg, "ranks [" + std::to_string(absent) + "]"), msg);
  }
  return 0;
}

// A member never calls new_group: the others fail naming it.
int scenario_group_absent() {
  auto info = shard::rendezvous_info_from_env();
  const int timeout_ms = 3000;
  std::vector<int> all(info.world_size);
  for (int i = 0; i < info.world_size; ++i) all[i] = i;
  file_barrier("started", info.rank, all);
  auto rdv = shard::Rendezvous::connect(info, comm_options(timeout_ms));
  const int absent = info.world_size - 1;
  if (info.rank == absent) {
    std::vector<std::string> names;
    for (int r : range_except(info.world_size, absent)) names.push_back(rank_file("failed", r));
    SCHECK(wait_files(names, 120s), "the others did not report their errors");
    return 0;
  }
  const auto t0 = Clock::now();
  std::string msg;
  try {
    rdv->new_group("late", all);
    SCHECK(false, "new_group succeeded without rank " << absent);
  } catch (const shard::CommError& e) {
    msg = e.what();
  }
  const double took = seconds_since(t0);
  say("error after " + std::to_string(took) + " s: " + msg);
  SCHECK(contains(msg, "new_group 'late'"), msg);
  SCHECK(contains(msg, "at global rank " + std::to_string(info.rank)), msg);
  SCHECK(contains(msg, "global ranks [" + std::to_string(absent) + "] did not join"), msg);
  // The same name again reports the same failure instead of hanging.
  std::string again;
  try {
    rdv->new_group("late", all);
  } catch (const shard::CommError& e) {
    again = e.what();
  }
  SCHECK(again == msg, again);
  touch(rank_file("failed", info.rank));
  return 0;
}

// depart() returns on a rank only once every rank has called it; the last
// rank calls it late. Then each exits at once, and none fails.
int scenario_depart() {
  auto info = shard::rendezvous_info_from_env();
  auto rdv = shard::Rendezvous::connect(info, comm_options(30000));
  auto t = at::ones({1000});
  rdv->world()->all_reduce(t, shard::ReduceOp::kSum, {})->wait();
  SCHECK(t[0].item<float>() == info.world_size, "all_reduce");
  const int last = info.world_size - 1;
  if (info.rank == last) std::this_thread::sleep_for(300ms);
  touch(rank_file("departing", info.rank));
  rdv->depart();
  std::vector<int> all(info.world_size);
  for (int r = 0; r < info.world_size; ++r) all[r] = r;
  for (int r : all) {
    const char* dir = std::getenv("GS_SYNC_DIR");
    const std::string path = std::string(dir ? dir : ".") + "/" + rank_file("departing", r);
    SCHECK(std::filesystem::exists(path), "depart returned before rank " << r << " called it");
  }
  rdv->depart();  // the second call returns at once
  return 0;
}

// One rank never departs: the others fail within their timeout naming it.
int scenario_depart_absent() {
  auto info = shard::rendezvous_info_from_env();
  auto rdv = shard::Rendezvous::connect(info, comm_options(2000));
  rdv->world();
  const int absent = info.world_size - 1;
  if (info.rank == absent) {
    std::vector<std::string> names;
    for (int r : range_except(info.world_size, absent)) names.push_back(rank_file("failed", r));
    SCHECK(wait_files(names, 120s), "the others did not report their errors");
    return 0;
  }
  std::string msg;
  try {
    rdv->depart();
    SCHECK(false, "depart returned without rank " << absent);
  } catch (const shard::CommError& e) {
    msg = e.what();
  }
  say("error after depart: " + msg);
  touch(rank_file("failed", info.rank));
  SCHECK(contains(msg, "depart"), msg);
  SCHECK(contains(msg, "at rank " + std::to_string(info.rank)), msg);
  SCHECK(contains(msg, "ranks [" + std::to_string(absent) + "] did not finish"), msg);
  return 0;
}

int scenario_sleep() {
  std::this_thread::sleep_for(60s);
  return 0;
}

int run_scenario(const std::string& name) {
  g_rank = env_int("RANK", -1);
  at::set_num_threads(1);
  int rc = 0;
  try {
    if (name == "collectives") rc = scenario_collectives();
    else if (name == "subgroups") rc = scenario_subgroups();
    else if (name == "two_communicators") rc = scenario_two_communicators();
    else if (name == "peer_exit") rc = scenario_peer_exit();
    else if (name == "peer_stall") rc = scenario_peer_stall();
    else if (name == "peer_dies_mid") rc = scenario_peer_dies_mid();
    else if (name == "destroy_pending") rc = scenario_destroy_pending();
    else if (name == "rendezvous_absent") rc = scenario_rendezvous_absent();
    else if (name == "group_absent") rc = scenario_group_absent();
    else if (name == "depart") rc = scenario_depart();
    else if (name == "depart_absent") rc = scenario_depart_absent();
    else if (name == "sleep") rc = scenario_sleep();
    else {
      say("unknown scenario " + name);
      return 2;
    }
  } catch (const std::exception& e) {
    say(std::string("FAIL uncaught exception: ") + e.what());
    return 1;
  }
  if (rc != 0 || g_failures > 0) {
    say("SCENARIO_FAILED (" + std::to_string(g_failures.load()) + " failures)");
    return 1;
  }
  say("SCENARIO_OK");
  return 0;
}

// ===========================================================================
// gtest side
// ===========================================================================

std::vector<gstest::RankResult> spawn(const std::string& scenario, int world,
                                      std::chrono::seconds timeout = 180s,
                                      std::map<std::string, std::string> env = {},
                                      std::map<int, std::map<std::string, std::string>> rank_env = {}) {
  gstest::TempDir sync;
  gstest::SpawnOptions o;
  o.world_size = world;
  o.timeout = timeout;
  o.env = std::move(env);
  o.env["GS_RANK_SCENARIO"] = scenario;
  o.env["GS_SYNC_DIR"] = sync.path();
  o.rank_env = std::move(rank_env);
  return gstest::run_ranks({gstest::self_exe()}, o);
}

std::string describe(const gstest::RankResult& r) {
  std::ostringstream os;
  os << "rank " << r.rank << " exit " << r.exit_code << " signal " << r.signal
     << (r.timed_out ? " TIMED OUT" : "") << " after " << r.seconds << " s, output:\n"
     << r.output;
  return os.str();
}

void expect_ok(const std::vector<gstest::RankResult>& results) {
  for (const auto& r : results) {
    EXPECT_FALSE(r.timed_out) << describe(r);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_TRUE(contains(r.output, "SCENARIO_OK")) << describe(r);
  }
}

// --- environment -----------------------------------------------------------

std::function<const char*(const char*)> fake_env(std::map<std::string, std::string> vars) {
  auto store = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [store](const char* name) -> const char* {
    auto it = store->find(name);
    return it == store->end() ? nullptr : it->second.c_str();
  };
}

std::map<std::string, std::string> good_env() {
  return {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "3"},
          {"WORLD_SIZE", "4"},          {"LOCAL_RANK", "1"},      {"LOCAL_WORLD_SIZE", "2"}};
}

// The message of the invalid_argument thrown for `env`, or "" if none.
std::string env_error(std::map<std::string, std::string> env) {
  try {
    shard::rendezvous_info_from_env(fake_env(std::move(env)));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(RendezvousEnv, ParsesTorchrunVariables) {
  auto info = shard::rendezvous_info_from_env(fake_env(good_env()));
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.master_port, 29500);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
}

TEST(RendezvousEnv, MissingVariableIsNamed) {
  for (const char* var : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                          "LOCAL_WORLD_SIZE"}) {
    auto env = good_env();
    env.erase(var);
    const std::string msg = env_error(env);
    EXPECT_TRUE(contains(msg, var)) << var << ": '" << msg << "'";
    EXPECT_TRUE(contains(msg, "not set")) << msg;
  }
}

TEST(RendezvousEnv, UnparsableVariableIsNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"RANK", "abc"}, {"RANK", "1x"},       {"WORLD_SIZE", ""},
      {"MASTER_PORT", "port"}, {"LOCAL_RANK", "0.5"}, {"LOCAL_WORLD_SIZE", "99999999999"}};
  for (const auto& [var, value] : cases) {
    auto env = good_env();
    env[var] = value;
    const std::string msg = env_error(env);
    EXPECT_TRUE(contains(msg, var + "='" + value + "'")) << var << "=" << value << ": '" << msg << "'";
  }
}

TEST(RendezvousEnv, InconsistentVariableIsNamed) {
  struct Case {
    std::map<std::string, std::string> set;
    std::string named;
  };
  const std::vector<Case> cases = {
      {{{"RANK", "4"}}, "RANK=4"},
      {{{"RANK", "-1"}}, "RANK=-1"},
      {{{"LOCAL_RANK", "2"}}, "LOCAL_RANK=2"},
      {{{"WORLD_SIZE", "3"}, {"RANK", "0"}}, "WORLD_SIZE=3 is not a multiple of LOCAL_WORLD_SIZE=2"},
      {{{"MASTER_PORT", "0"}}, "MASTER_PORT=0"},
      {{{"MASTER_PORT", "65536"}}, "MASTER_PORT=65536"},
      {{{"WORLD_SIZE", "0"}, {"RANK", "0"}}, "WORLD_SIZE=0"},
      {{{"WORLD_SIZE", "-2"}, {"RANK", "0"}}, "WORLD_SIZE=-2"},
      {{{"LOCAL_WORLD_SIZE", "0"}, {"LOCAL_RANK", "0"}}, "LOCAL_WORLD_SIZE=0"},
      {{{"MASTER_ADDR", ""}}, "MASTER_ADDR"},
  };
  for (const auto& c : cases) {
    auto env = good_env();
    for (const auto& [k, v] : c.set) env[k] = v;
    const std::string msg = env_error(env);
    EXPECT_TRUE(contains(msg, c.named)) << "expected '" << c.named << "' in '" << msg << "'";
  }
}

TEST(RendezvousEnv, ValidateAndConnectRejectBadInfo) {
  shard::RendezvousInfo info;
  info.master_addr = "127.0.0.1";
  info.master_port = 29500;
  EXPECT_NO_THROW(shard::validate(info));
  info.rank = 1;  // world_size 1
  EXPECT_THROW(shard::validate(info), std::invalid_argument);
  EXPECT_THROW(shard::Rendezvous::connect(info), std::invalid_argument);
}

// --- local pieces -------------------------------------------------------------

TEST(Communicator, ReduceOpNamesAndCompletedWork) {
  EXPECT_STREQ(shard::to_string(shard::ReduceOp::kSum), "sum");
  EXPECT_STREQ(shard::to_string(shard::ReduceOp::kAvg), "avg");
  auto w = shard::completed_work();
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->is_completed());
  EXPECT_NO_THROW(w->wait());
  EXPECT_NO_THROW(w->wait());
  EXPECT_EQ(w->error(), nullptr);
}

// A world of one, in this process: every collective is a local copy.
TEST(Communicator, SingleRankWorldInProcess) {
  shard::RendezvousInfo info;
  info.master_addr = "127.0.0.1";
  info.master_port = gstest::free_port();
  auto rdv = shard::Rendezvous::connect(info, comm_options(10000));
  auto world = rdv->world();
  ASSERT_EQ(world->size(), 1);
  EXPECT_EQ(world->rank(), 0);
  EXPECT_EQ(world->global_ranks(), std::vector<int>{0});
  auto in = real_data(0, 11, 0, at::kBFloat16);
  auto out = at::empty({11}, at::kBFloat16);
  world->all_gather_into(out, in)->wait();
  EXPECT_TRUE(at::equal(out, in));
  auto rs_out = at::empty({11}, at::kBFloat16);
  auto w = world->reduce_scatter(rs_out, in, shard::ReduceOp::kAvg);
  EXPECT_TRUE(w->is_completed());
  w->wait();
  EXPECT_TRUE(at::equal(rs_out, in));
  auto t = in.clone();
  world->all_reduce(t, shard::ReduceOp::kSum)->wait();
  EXPECT_TRUE(at::equal(t, in));
  world->broadcast(t, 0)->wait();
  world->barrier()->wait();
  EXPECT_THROW(world->broadcast(t, 1), shard::CommError);
  auto solo = rdv->new_group("solo", {0});
  EXPECT_EQ(solo->size(), 1);
  EXPECT_THROW(rdv->new_group("bad", {1}), std::invalid_argument);
  EXPECT_THROW(rdv->new_group("solo", {0, 1}), std::invalid_argument);
}

TEST(Spawn, KillsAProcessAtTheDeadline) {
  auto r = gstest::run_process({gstest::self_exe()}, {{"GS_RANK_SCENARIO", "sleep"}}, 2s);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, -1);
}

TEST(Spawn, PassesTorchrunEnvAndCapturesOutput) {
  auto rs = spawn("no_such_scenario", 2, 60s);
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) {
    EXPECT_EQ(r.exit_code, 2) << describe(r);
    EXPECT_TRUE(contains(r.output, "[rank " + std::to_string(r.rank) + "] unknown scenario"))
        << describe(r);
  }
}

// --- multi-rank ------------------------------------------------------------------

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllOpsDtypesSizes) { expect_ok(spawn("collectives", GetParam())); }

INSTANTIATE_TEST_SUITE_P(World, Collectives, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(Subgroups, HybridShardAndReplicateGroupsConcurrently) {
  expect_ok(spawn("subgroups", 4));
}

TEST(Concurrency, TwoCommunicatorsFromTwoThreads) { expect_ok(spawn("two_communicators", 2)); }

TEST(Concurrency, TwoCommunicatorsFromTwoThreadsWorld4) {
  expect_ok(spawn("two_communicators", 4));
}

// The survivors must fail clearly, naming the collective, and exit (the
// spawn deadline only guards against a hang: no duration is asserted).
void expect_peer_exit_scenario(const std::string& scenario, int world, int die) {
  const auto deadline = 120s;
  auto rs = spawn(scenario, world, deadline, {{"GS_DIE_RANK", std::to_string(die)}});
  for (const auto& r : rs) {
    EXPECT_FALSE(r.timed_out) << describe(r);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    if (r.rank != die) {
      EXPECT_TRUE(contains(r.output, "SCENARIO_OK")) << describe(r);
      EXPECT_TRUE(contains(r.output, "error after")) << describe(r);
    }
  }
}

TEST(Failure, PeerExitsBeforeCollectiveWorld2) { expect_peer_exit_scenario("peer_exit", 2, 1); }

TEST(Failure, PeerExitsBeforeCollectiveWorld4) { expect_peer_exit_scenario("peer_exit", 4, 2); }

TEST(Failure, StoreHostExitsBeforeCollectiveWorld4) {
  expect_peer_exit_scenario("peer_exit", 4, 0);
}

TEST(Failure, PeerDiesMidCollectiveWorld2) { expect_peer_exit_scenario("peer_dies_mid", 2, 1); }

TEST(Failure, PeerDiesMidCollectiveWorld4) { expect_peer_exit_scenario("peer_dies_mid", 4, 3); }

TEST(Failure, PeerNeverCallsCollectiveTimesOut) {
  auto rs = spawn("peer_stall", 2, 120s);
  expect_ok(rs);
}

TEST(Failure, PeerNeverCallsCollectiveWorld4) {
  auto rs = spawn("peer_stall", 4, 120s);
  expect_ok(rs);
}

TEST(Failure, DestroyingCommunicatorAbortsPendingWork) {
  auto rs = spawn("destroy_pending", 2, 120s);
  expect_ok(rs);
}

TEST(Failure, RankNeverArrivesAtRendezvous) {
  auto rs = spawn("rendezvous_absent", 3, 120s, {{"GS_ABSENT_RANK", "1"}});
  expect_ok(rs);
}

TEST(Failure, MemberNeverJoinsGroup) {
  auto rs = spawn("group_absent", 3, 120s);
  expect_ok(rs);
}

TEST(Depart, ReturnsOnEveryRankOnlyOnceTheLastRankCalledIt) { expect_ok(spawn("depart", 3)); }

TEST(Depart, ARankThatNeverDepartsIsNamedByTheOthers) { expect_ok(spawn("depart_absent", 3, 120s)); }

TEST(Failure, StoreHostNeverArrivesAtRendezvous) {
  auto rs = spawn("rendezvous_absent", 2, 120s, {{"GS_ABSENT_RANK", "0"}});
  expect_ok(rs);
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* scenario = std::getenv("GS_RANK_SCENARIO")) {
    return run_scenario(scenario);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
