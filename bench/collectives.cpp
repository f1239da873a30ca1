// bench_collectives: all-gather and reduce-scatter throughput of
// shard::Communicator (gloo backend) against raw gloo on the same context.
//
//   ./bench_collectives [--ranks N] [--min-bytes B] [--max-bytes B]
//                       [--factor F] [--iters I] [--warmup W] [--rounds R]
//                       [--dtype float32|bfloat16] [--chunk-bytes B]
//
// Run without RANK in the environment it starts N copies of itself as ranks
// (torchrun environment, 127.0.0.1, a free port) and waits for them; rank 0
// prints an nccl-tests style table per op and a final line
//   RESULT collectives allgather_vs_raw=<r> reducescatter_vs_raw=<r>
// where r = ours throughput / raw throughput at the largest size.
//
// Raw baselines, called directly on the communicator's gloo::Context:
//   all-gather:     gloo::allgather (ring, in -> out)
//   reduce-scatter: gloo::ReduceScatterHalvingDoubling<float> (in place;
//                   constructed once per size, outside the timing)
// size(B) is the total (all ranks) buffer: the all-gather output, the
// reduce-scatter input. algbw = size / time, busbw = algbw * (N-1)/N.
// Each size runs R rounds of I individually timed iterations per
// implementation, alternating which goes first; time is the median.
#include "bench_flags.h"
#include "communicator_gloo.h"
#include "shard/communicator.h"
#include "shard/launch.h"
#include "shard/rendezvous.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gloo/allgather.h>
#include <gloo/context.h>
#include <gloo/reduce_scatter.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>


namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int ranks = 2;
  size_t min_bytes = 1 << 10;
  size_t max_bytes = 64 << 20;
  size_t factor = 16;  // "doubling x4"
  int iters = 20;
  int warmup = 5;
  int rounds = 3;
  std::string dtype = "float32";
  size_t chunk_bytes = 0;  // 0: communicator default
  int timeout_s = 900;
};

[[noreturn]] void usage(const char* msg) {
  gsbench::usage_exit("bench_collectives", msg,
                      "[--ranks N] [--min-bytes B] [--max-bytes B] [--factor F] [--iters I] [--warmup W] "
                      "[--rounds R] [--dtype float32|bfloat16] [--chunk-bytes B] [--timeout-s S]");
}

size_t parse_size(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  std::string suffix = end ? end : "";
  double mult = 1;
  if (suffix == "K" || suffix == "KiB" || suffix == "k") mult = 1024.0;
  else if (suffix == "M" || suffix == "MiB") mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB") mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty()) usage(("bad value for " + flag + ": " + v).c_str());
  if (!(x > 0)) usage(("bad value for " + flag + ": " + v).c_str());
  return static_cast<size_t>(x * mult);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string v;
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (a != "--help" && a != "-h") {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      v = argv[++i];
    }
    if (a == "--ranks") o.ranks = std::atoi(v.c_str());
    else if (a == "--min-bytes") o.min_bytes = parse_size(a, v);
    else if (a == "--max-bytes") o.max_bytes = parse_size(a, v);
    else if (a == "--factor") o.factor = parse_size(a, v);
    else if (a == "--iters") o.iters = std::atoi(v.c_str());
    else if (a == "--warmup") o.warmup = std::atoi(v.c_str());
    else if (a == "--rounds") o.rounds = std::atoi(v.c_str());
    else if (a == "--dtype") o.dtype = v;
    else if (a == "--chunk-bytes") o.chunk_bytes = parse_size(a, v);
    else if (a == "--timeout-s") o.timeout_s = std::atoi(v.c_str());
    else if (a == "--help" || a == "-h") usage("help");
    else usage(("unknown flag " + a).c_str());
  }
  if (o.ranks < 1) usage("--ranks must be >= 1");
  if (o.iters < 1 || o.warmup < 0 || o.rounds < 1) usage("bad --iters/--warmup/--rounds");
  if (o.factor < 2) usage("--factor must be >= 2");
  if (o.dtype != "float32" && o.dtype != "bfloat16") usage("--dtype float32|bfloat16");
  if (o.min_bytes > o.max_bytes) usage("--min-bytes > --max-bytes");
  return o;
}

// ---------------------------------------------------------------- launcher

// Starts opts.ranks copies of this program with the torchrun environment and
// waits for them (killing them at the deadline).
int launch(const Options& opts, int argc, char** argv) {
  shard::LocalLaunchOptions lo;
  lo.nproc = opts.ranks;
  lo.timeout = std::chrono::seconds(opts.timeout_s);
  std::vector<std::string> args{"/proc/self/exe"};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  auto res = shard::launch_local(args, lo);
  for (size_t r = 0; r < res.exit_codes.size(); ++r)
    if (res.exit_codes[r] != 0)
      std::fprintf(stderr, "bench_collectives: rank %zu failed (%s %d)\n", r,
                   res.exit_codes[r] < 0 ? "signal" : "exit", std::abs(res.exit_codes[r]));
  if (res.timed_out) std::fprintf(stderr, "bench_collectives: timed out after %d s, killed ranks\n", opts.timeout_s);
  return res.ok ? 0 : 1;
}

// ------------------------------------------------------------------- ranks

struct Row {
  size_t bytes = 0;
  size_t count = 0;
  double ours_us = 0, raw_us = 0;
};

// Runs `body` o.iters times after a barrier, recording each iteration.
void timed_round(const Options& o, const std::function<void()>& barrier,
                 const std::function<void()>& body, std::vector<double>& us) {
  barrier();
  for (int i = 0; i < o.iters; ++i) {
    const auto t0 = Clock::now();
    body();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Times `ours` and `raw` after warm-up: o.rounds rounds of o.iters
// iterations each, alternating which goes first; returns medians. (On a
// small shared machine single iterations stall for a scheduler tick now and
// then; the median keeps those from dominating small sizes.)
void time_pair(const Options& o, const std::function<void()>& barrier,
               const std::function<void()>& ours, const std::function<void()>& raw,
               double& ours_us, double& raw_us) {
  for (int i = 0; i < o.warmup; ++i) ours();
  for (int i = 0; i < o.warmup && raw; ++i) raw();
  std::vector<double> t_ours, t_raw;
  for (int round = 0; round < o.rounds; ++round) {
    if (round % 2 == 0 || !raw) {
      timed_round(o, barrier, ours, t_ours);
      if (raw) timed_round(o, barrier, raw, t_raw);
    } else {
      timed_round(o, barrier, raw, t_raw);
      timed_round(o, barrier, ours, t_ours);
    }
  }
  ours_us = median(t_ours);
  raw_us = raw ? median(t_raw) : 0;
}

void print_table(const char* op, const char* type, int n, const std::vector<Row>& rows) {
  const double bus = n > 1 ? static_cast<double>(n - 1) / n : 1.0;
  std::printf("#\n# %s\n", op);
  std::printf("# %12s %12s %9s | %10s %11s %11s | %10s %11s %11s | %8s\n", "size(B)", "count",
              "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "raw(us)", "algbw(GB/s)",
              "busbw(GB/s)", "ours/raw");
  for (const auto& r : rows) {
    const double a = r.bytes / (r.ours_us * 1e3);
    if (r.raw_us > 0) {
      const double ra = r.bytes / (r.raw_us * 1e3);
      std::printf("  %12zu %12zu %9s | %10.1f %11.3f %11.3f | %10.1f %11.3f %11.3f | %8.3f\n",
                  r.bytes, r.count, type, r.ours_us, a, a * bus, r.raw_us, ra, ra * bus,
                  r.raw_us / r.ours_us);
    } else {
      std::printf("  %12zu %12zu %9s | %10.1f %11.3f %11.3f | %10s %11s %11s | %8s\n", r.bytes,
                  r.count, type, r.ours_us, a, a * bus, "n/a", "n/a", "n/a", "n/a");
    }
  }
  std::fflush(stdout);
}

int run_rank(const Options& o) {
  at::set_num_threads(1);
  const auto info = shard::rendezvous_info_from_env();
  shard::CommunicatorOptions copts;
  copts.timeout = std::chrono::seconds(120);
  auto rdv = shard::Rendezvous::connect(info, copts);
  shard::CommunicatorPtr comm = rdv->world();
  if (o.chunk_bytes > 0 && info.world_size > 1) {
    // A second communicator over the same ranks with the requested chunking.
    // (make_gloo_communicator needs a context of its own; reuse the world's
    // since the world communicator stays idle from here on.)
    shard::detail::GlooGroupSpec spec;
    spec.name = "bench";
    for (int r = 0; r < info.world_size; ++r) spec.global_ranks.push_back(r);
    spec.rank = info.rank;
    spec.timeout = copts.timeout;
    spec.chunk_bytes = o.chunk_bytes;
    comm = shard::detail::make_gloo_communicator(spec, shard::detail::gloo_context_of(*comm));
  }
  const int n = comm->size();
  const int r = comm->rank();
  auto ctx = shard::detail::gloo_context_of(*comm);
  const bool bf16 = o.dtype == "bfloat16";
  const auto dt = bf16 ? at::kBFloat16 : at::kFloat;
  const size_t esize = bf16 ? 2 : 4;
  auto barrier = [&] { comm->barrier()->wait(); };

  if (r == 0) {
    std::printf("# bench_collectives: %d ranks (processes) on 127.0.0.1, gloo tcp, dtype %s\n", n,
                o.dtype.c_str());
    std::printf("# time = median of %d rounds x %d iters (rounds alternate ours/raw first), "
                "%d warmup; ours = shard::Communicator (gloo backend), raw = gloo on the same "
                "gloo::Context\n",
                o.rounds, o.iters, o.warmup);
    std::printf("# raw all-gather: gloo::allgather; raw reduce-scatter: "
                "gloo::ReduceScatterHalvingDoubling<float>%s\n",
                bf16 ? " on the same element count (bf16 is reduced in fp32 by ours)" : "");
    std::printf("# size(B) = total bytes (all-gather output / reduce-scatter input); "
                "busbw = algbw * (N-1)/N; ours/raw = raw time / our time\n");
    std::fflush(stdout);
  }

  std::vector<Row> ag_rows, rs_rows;
  bool ok = true;
  for (size_t target = o.min_bytes;; target *= o.factor) {
    const size_t bytes_req = std::min(target, o.max_bytes);
    const size_t unit = static_cast<size_t>(n) * esize;
    const size_t per_rank = std::max<size_t>(1, bytes_req / unit);  // elements
    const size_t count = per_rank * n;
    const size_t bytes = count * esize;

    // ---- all-gather
    {
      auto in = at::full({static_cast<int64_t>(per_rank)}, static_cast<float>(r + 1),
                         at::TensorOptions().dtype(dt));
      auto out = at::empty({static_cast<int64_t>(count)}, at::TensorOptions().dtype(dt));
      auto raw_out = at::empty_like(out);
      auto ours = [&] { comm->all_gather_into(out, in)->wait(); };
      std::function<void()> raw;
      if (ctx) {
        raw = [&] {
          gloo::AllgatherOptions ao(ctx);
          ao.setInput(static_cast<uint8_t*>(in.data_ptr()), per_rank * esize);
          ao.setOutput(static_cast<uint8_t*>(raw_out.data_ptr()), bytes);
          gloo::allgather(ao);
        };
      }
      Row row{bytes, count};
      time_pair(o, barrier, ours, raw, row.ours_us, row.raw_us);
      for (int q = 0; q < n; ++q) {
        auto expect = at::full({static_cast<int64_t>(per_rank)}, static_cast<float>(q + 1),
                               at::TensorOptions().dtype(dt));
        if (!at::equal(out.narrow(0, q * per_rank, per_rank), expect)) ok = false;
      }
      ag_rows.push_back(row);
    }
    // ---- reduce-scatter
    {
      auto in = at::full({static_cast<int64_t>(count)}, 0.5f * (r + 1),
                         at::TensorOptions().dtype(dt));
      auto out = at::empty({static_cast<int64_t>(per_rank)}, at::TensorOptions().dtype(dt));
      std::vector<float> raw_buf(count, 0.5f);
      auto ours = [&] { comm->reduce_scatter(out, in, shard::ReduceOp::kSum)->wait(); };
      std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> hd;
      std::function<void()> raw;
      if (ctx) {
        std::vector<int> recv_elems(n, static_cast<int>(per_rank));
        hd = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
            ctx, std::vector<float*>{raw_buf.data()}, static_cast<int>(count), recv_elems);
        raw = [&] { hd->run(); };
      }
      Row row{bytes, count};
      time_pair(o, barrier, ours, raw, row.ours_us, row.raw_us);
      const float expect = 0.5f * n * (n + 1) / 2;
      if (!at::equal(out, at::full({static_cast<int64_t>(per_rank)}, expect,
                                   at::TensorOptions().dtype(dt)))) {
        ok = false;
      }
      rs_rows.push_back(row);
    }
    if (bytes_req >= o.max_bytes) break;
  }

  // Agree on correctness.
  auto flag = at::full({1}, ok ? 0.0 : 1.0, at::kDouble);
  comm->all_reduce(flag, shard::ReduceOp::kSum)->wait();
  const bool all_ok = flag.item<double>() == 0.0;

  if (r == 0) {
    const char* type = bf16 ? "bfloat16" : "float";
    print_table("all_gather_into  (ours vs raw gloo::allgather)", type, n, ag_rows);
    print_table("reduce_scatter sum  (ours vs raw gloo::ReduceScatterHalvingDoubling<float>)",
                type, n, rs_rows);
    if (!all_ok) std::printf("# ERROR: a result was wrong on some rank\n");
    auto ratio = [](const Row& row) { return row.raw_us > 0 ? row.raw_us / row.ours_us : 1.0; };
    std::printf("RESULT collectives allgather_vs_raw=%.3f reducescatter_vs_raw=%.3f\n",
                ratio(ag_rows.back()), ratio(rs_rows.back()));
    std::fflush(stdout);
  }
  comm.reset();
  rdv.reset();
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opts = parse(argc, argv);
  if (std::getenv("RANK") == nullptr) return launch(opts, argc, argv);
  try {
    return run_rank(opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_collectives rank %s: %s\n", std::getenv("RANK"), e.what());
    return 1;
  }
}
