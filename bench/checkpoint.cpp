// bench checkpoint: sharded checkpoint save and load throughput per rank on
// local disk, and resharding on load (2 -> 4 ranks), against the disk's own
// sequential write speed measured in the same run (write + fsync of one file
// as large as all ranks' shards together, per rank). Ranks are real processes (this binary,
// re-executed) talking Gloo on loopback. Before every load the checkpoint's
// files are dropped from the page cache (posix_fadvise DONTNEED), so loads
// read the disk.
//
//   scripts/bench.sh checkpoint [--ranks 2] [--reshard-ranks 4] [--layers 16]
//                               [--embd 512] [--repeat 3] [--dir DIR]
#include "shard/checkpoint.h"
#include "shard/fully_shard.h"
#include "shard/launch.h"
#include "shard/rendezvous.h"
#include "worker/model.h"

#include <torch/torch.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Args {
  int ranks = 2, reshard_ranks = 4, layers = 16, embd = 512, repeat = 3;
  std::string dir;
};

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr, "bench_checkpoint: %s\n", msg.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  std::map<std::string, int*> ints{{"--ranks", &a.ranks}, {"--reshard-ranks", &a.reshard_ranks},
                                   {"--layers", &a.layers}, {"--embd", &a.embd}, {"--repeat", &a.repeat}};
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (i + 1 >= argc) usage("missing value for " + f);
    if (f == "--dir") {
      a.dir = argv[++i];
      continue;
    }
    auto it = ints.find(f);
    if (it == ints.end()) usage("unknown flag " + f);
    *it->second = std::atoi(argv[++i]);
    if (*it->second < 1) usage(f + " must be >= 1");
  }
  return a;
}

greenshard::GPTConfig model_config(const Args& a) {
  greenshard::GPTConfig c;
  c.vocab_size = 8192;
  c.block_size = 64;
  c.n_layer = a.layers;
  c.n_embd = a.embd;
  c.n_head = std::max(1, a.embd / 64);
  return c;
}

double max_across(shard::Rendezvous& rdzv, double v) {
  at::Tensor t = at::full({1}, v, at::kDouble);
  at::Tensor all = at::empty({rdzv.world_size()}, at::kDouble);
  rdzv.world()->all_gather_into(all, t)->wait();
  return all.max().item<double>();
}

// ---- one rank: GS_BENCH_MODE = save | load ----
int run_rank(const Args& a, const std::string& mode, const std::string& root) {
  at::set_num_threads(1);
  auto info = shard::rendezvous_info_from_env();
  auto rdzv = shard::Rendezvous::connect(info);
  torch::manual_seed(0);
  greenshard::GPT model(model_config(a), /*deferred=*/true);
  shard::FullyShardOptions o;
  o.wrap = shard::WrapPolicy::by_type<greenshard::BlockImpl>();
  o.param_init = model->param_init();
  o.sync_module_states = false;
  shard::FullyShardedModel fsdp(model.ptr(), rdzv, o);
  torch::optim::AdamW opt(fsdp.parameters(), torch::optim::AdamWOptions(1e-4));
  if (mode == "save") {
    // One step, so AdamW has its moments (checkpointed with the parameters).
    auto x = at::randint(0, 8192, {1, 16}, at::kLong);
    model->loss(model->forward(x), x).backward();
    opt.step();
    for (int r = 0; r < a.repeat; ++r) {
      rdzv->world()->barrier()->wait();
      auto t0 = Clock::now();
      shard::CheckpointOptions co;
      co.keep_last = 1;
      const std::string dir = shard::save_checkpoint(fsdp, &opt, root, r + 1, "", co);
      double s = max_across(*rdzv, std::chrono::duration<double>(Clock::now() - t0).count());
      auto bytes = static_cast<double>(fs::file_size(fs::path(dir) / ("rank_" + std::to_string(info.rank) + ".bin")));
      double all_bytes = max_across(*rdzv, bytes);
      if (info.rank == 0) std::printf("ROW save %d %.0f %.6f\n", info.world_size, all_bytes, s);
    }
  } else {
    const std::string dir = shard::latest_checkpoint(root);
    rdzv->world()->barrier()->wait();
    auto t0 = Clock::now();
    auto loaded = shard::load_checkpoint(fsdp, &opt, dir);
    double s = max_across(*rdzv, std::chrono::duration<double>(Clock::now() - t0).count());
    int64_t mine = 0;
    for (auto& p : fsdp.parameters()) mine += p.numel() * 4 * 3;  // params + two moments
    double bytes = max_across(*rdzv, static_cast<double>(mine));
    if (info.rank == 0) std::printf("ROW load %d %.0f %.6f %d\n", info.world_size, bytes, s, loaded.saved_world_size);
  }
  std::fflush(stdout);
  rdzv->world()->barrier()->wait();
  return 0;
}

struct Row {
  std::string what;
  int world = 0;
  double bytes = 0, seconds = 0;
};

std::vector<Row> run_gang(const Args& a, int nproc, const std::string& mode, const std::string& root, char** argv) {
  shard::LocalLaunchOptions lo;
  lo.nproc = nproc;
  lo.env = {{"OMP_NUM_THREADS", "1"}, {"OPENBLAS_NUM_THREADS", "1"}, {"GS_BENCH_MODE", mode}, {"GS_BENCH_ROOT", root}};
  lo.capture_rank0_stdout = true;
  lo.timeout = std::chrono::seconds(1800);
  std::vector<std::string> args{"/proc/self/exe"};
  for (int i = 1; argv[i]; ++i) args.push_back(argv[i]);
  auto res = shard::launch_local(args, lo);
  if (!res.ok) {
    std::fprintf(stderr, "%s on %d ranks failed:\n%s\n", mode.c_str(), nproc, res.rank0_stdout.c_str());
    std::exit(1);
  }
  std::vector<Row> rows;
  std::istringstream in(res.rank0_stdout);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("ROW ", 0) != 0) continue;
    std::istringstream l(line.substr(4));
    Row r;
    l >> r.what >> r.world >> r.bytes >> r.seconds;
    rows.push_back(r);
  }
  return rows;
}

// Sequential write of `bytes` with fsync: the disk's speed for this pattern.
double disk_write_seconds(const std::string& path, size_t bytes) {
  std::vector<char> block(8 << 20, 'x');
  auto t0 = Clock::now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) usage("cannot write " + path);
  for (size_t done = 0; done < bytes;) {
    size_t n = std::min(block.size(), bytes - done);
    if (::write(fd, block.data(), n) != static_cast<ssize_t>(n)) usage("write failed: " + path);
    done += n;
  }
  ::fsync(fd);
  ::close(fd);
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  fs::remove(path);
  return s;
}

void drop_from_page_cache(const std::string& root) {
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (const char* mode = std::getenv("GS_BENCH_MODE")) {
    try {
      return run_rank(a, mode, std::getenv("GS_BENCH_ROOT"));
    } catch (const std::exception& e) {
      std::printf("rank error: %s\n", e.what());
      return 1;
    }
  }
  const std::string base = a.dir.empty() ? (fs::temp_directory_path() / ("gs_bench_ckpt_" + std::to_string(::getpid()))).string()
                                         : a.dir;
  fs::create_directories(base);
  const std::string root = base + "/ckpt";
  const auto gc = model_config(a);
  const double model_mb = greenshard::num_parameters(gc) * 4 / 1e6;
  std::printf("# checkpoint: GPT %.1fM params (%.0f MB fp32; with AdamW moments %.0f MB), %d ranks save, %d load, "
              "%d reshard-load; dir %s\n",
              greenshard::num_parameters(gc) / 1e6, model_mb, 3 * model_mb, a.ranks, a.ranks, a.reshard_ranks,
              base.c_str());

  // The disk probe writes what all ranks write at once (ranks x one shard),
  // before and after the saves: this machine's page-cache and write-back
  // speed drift while other work runs.
  const size_t rank_guess = static_cast<size_t>(3 * model_mb * 1e6 / a.ranks);
  std::vector<double> disk_s;
  auto probe = [&] {
    disk_s.push_back(disk_write_seconds(base + "/disk_probe.bin", rank_guess * a.ranks) / a.ranks);
  };
  for (int r = 0; r < a.repeat; ++r) probe();
  auto saves = run_gang(a, a.ranks, "save", root, argv);
  for (int r = 0; r < a.repeat; ++r) probe();
  std::vector<double> save_s;
  for (const auto& r : saves) save_s.push_back(r.seconds);
  const double rank_bytes = saves.at(0).bytes;
  std::vector<double> load_s, reshard_s;
  double load_bytes = 0, reshard_bytes = 0;
  for (int r = 0; r < a.repeat; ++r) {
    drop_from_page_cache(root);
    auto l = run_gang(a, a.ranks, "load", root, argv).at(0);
    load_s.push_back(l.seconds);
    load_bytes = l.bytes;
    drop_from_page_cache(root);
    auto rs = run_gang(a, a.reshard_ranks, "load", root, argv).at(0);
    reshard_s.push_back(rs.seconds);
    reshard_bytes = rs.bytes;
  }
  fs::remove_all(base);

  const double disk_gbps = rank_guess / median(disk_s) / 1e9;
  auto row = [&](const char* op, int ranks, double bytes, double s) {
    double gbps = bytes / s / 1e9;
    std::printf("  %-22s %6d %12.1f %10.3f %10.3f %12.3f\n", op, ranks, bytes / 1e6, s, gbps, gbps / disk_gbps);
  };
  std::printf("#\n# %-22s %6s %12s %10s %10s %12s\n", "operation", "ranks", "MB/rank", "time(s)", "GB/s/rank",
              "vs disk write");
  row("disk write+fsync", a.ranks, static_cast<double>(rank_guess), median(disk_s));
  row("save", a.ranks, rank_bytes, median(save_s));
  row("load (same world)", a.ranks, load_bytes, median(load_s));
  row(("load resharded " + std::to_string(a.ranks) + "->" + std::to_string(a.reshard_ranks)).c_str(), a.reshard_ranks,
      reshard_bytes, median(reshard_s));
  std::printf("#\n# medians of %d; goal: save and load >= 1 GB/s per rank where the disk allows (ratio ~1)\n",
              a.repeat);
  std::printf("RESULT checkpoint save_gbps=%.3f load_gbps=%.3f disk_write_gbps=%.3f reshard_%dto%d_s=%.3f\n",
              rank_bytes / median(save_s) / 1e9, load_bytes / median(load_s) / 1e9, disk_gbps, a.ranks,
              a.reshard_ranks, median(reshard_s));
  return 0;
}
