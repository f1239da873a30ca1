// bench checkpoint: sharded checkpoints (shard/checkpoint.h) on this machine.
// Ranks are real processes (this binary, re-executed) talking Gloo on
// loopback; every number below comes from the same run. Times are the
// slowest rank's; the tables show medians.
//
//   * disk write+fsync: the disk's own sequential write rate. One process
//     writes (8 MiB O_DIRECT blocks; through the page cache where the file
//     system refuses O_DIRECT) and fsyncs one file as large as all ranks'
//     shards together, before and after the saves.
//   * save (sync): CheckpointOptions::async = false, after one untimed save
//     (it allocates the staging image, as a training run's first save does).
//     save_vs_disk = all ranks' rank_<r>.bin bytes per second of save / the
//     disk probe's rate (goal >= 0.8). The saves keep_last = 1, as training
//     does (rank 0 deletes the previous checkpoint before the save is done).
//     Where its time goes, from the same ranks: the same saves with
//     keep_last = 0 (nothing deleted); an async save waited for at once,
//     split into the staging copy (save_checkpoint's return) and the
//     background part (write, CRC-32C, agreements, manifest, DONE,
//     retention); and a plain copy and a CRC-32C (64 KiB chunks, as the
//     saver) of a buffer of one rank's file size, all ranks at once.
//   * async save stall: the same ranks train the bench's GPT (zero_grad,
//     forward, backward, AdamW step, check_checkpoint; batch 1 x 8 tokens)
//     for K steps without a save, and K steps with an async save issued
//     before the first step plus the final wait_for_checkpoint (time still
//     spent waiting counts as lost); alternating, in several rounds. K steps
//     last about 1.5 sync saves (at least 2 steps). stall = median(with) -
//     median(without); async_stall_vs_sync = stall (clamped at 0) / the sync
//     save's time (goal <= 0.10). The raw numbers, the time
//     save_checkpoint(async) took to return (the staging copy) and the final
//     wait are printed too.
//   * load (same world) and load resharded (ranks -> reshard-ranks) of the
//     last save: its files are dropped from the page cache (posix_fadvise
//     DONTNEED) before every load, so loads read the disk.
//     reshard_read_vs_needed = all ranks' LoadedCheckpoint::bytes_read / all
//     ranks' bytes_needed, resharded load (goal <= 1.1).
//   * save to S3: the same sync saves to s3://ckpt/bench on a real S3 server
//     (s3rver, a Node process on 127.0.0.1 storing on this machine's disk,
//     started and stopped by this bench; tests/shard/s3_server.h).
//     s3_save_vs_local = local save time / S3 save time (no goal). Without
//     node or the s3rver packages (scripts/install_s3_tools.sh) it prints
//     s3_save_vs_local=nan and why.
//
//   scripts/bench.sh checkpoint [--ranks 2] [--reshard-ranks 4] [--layers 16]
//                               [--embd 512] [--repeat 3] [--dir DIR]
//
// --dir DIR: the bench works in a fresh DIR/gs_bench_ckpt_<pid> (default:
// under the temp directory) and removes it at the end. A bad flag exits 2.
#include "bench_flags.h"
#include "shard/checkpoint.h"
#include "shard/fully_shard.h"
#include "shard/launch.h"
#include "shard/rendezvous.h"
#include "crc32c.h"            // shard/src: the checkpoint's checksum
#include "shard/s3_server.h"  // tests/shard: the s3rver fixture
#include "worker/model.h"

#include <torch/torch.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int64_t kVocab = 8192;
// The training step of the async measurement: batch x sequence tokens.
// (FSDP's all-gathers, reduce-scatters and AdamW over the whole model set a
// floor: on a 2-core machine a step takes ~0.6 s even at a few tokens.)
constexpr int64_t kTrainBatch = 1, kTrainSeq = 8;

struct Args {
  int ranks = 2, reshard_ranks = 4, layers = 16, embd = 512, repeat = 3;
  std::string dir;
};

[[noreturn]] void usage(const std::string& msg) {
  gsbench::usage_exit("bench_checkpoint", msg,
                      "[--ranks N] [--reshard-ranks N] [--layers N] [--embd N] [--repeat N] [--dir DIR]");
}

Args parse(int argc, char** argv) {
  Args a;
  std::map<std::string, int*> ints{{"--ranks", &a.ranks}, {"--reshard-ranks", &a.reshard_ranks},
                                   {"--layers", &a.layers}, {"--embd", &a.embd}, {"--repeat", &a.repeat}};
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto it = ints.find(f);
    if (f != "--dir" && it == ints.end()) usage("unknown flag " + f);
    if (i + 1 >= argc) usage("missing value for " + f);
    const std::string v = argv[++i];
    if (f == "--dir") {
      if (v.empty()) usage("--dir must not be empty");
      a.dir = v;
      continue;
    }
    errno = 0;
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno == ERANGE || n < 1 || n > INT_MAX)
      usage(f + " must be a whole number >= 1, not '" + v + "'");
    *it->second = static_cast<int>(n);
  }
  if (a.embd % std::max(1, a.embd / 64) != 0) usage("--embd must be divisible by its head count (embd / 64)");
  return a;
}

greenshard::GPTConfig model_config(const Args& a) {
  greenshard::GPTConfig c;
  c.vocab_size = kVocab;
  c.block_size = 64;
  c.n_layer = a.layers;
  c.n_embd = a.embd;
  c.n_head = std::max(1, a.embd / 64);
  return c;
}

at::Tensor gather(shard::Rendezvous& rdzv, double v) {
  at::Tensor t = at::full({1}, v, at::kDouble);
  at::Tensor all = at::empty({rdzv.world_size()}, at::kDouble);
  rdzv.world()->all_gather_into(all, t)->wait();
  return all;
}
double max_across(shard::Rendezvous& rdzv, double v) { return gather(rdzv, v).max().item<double>(); }
double sum_across(shard::Rendezvous& rdzv, double v) { return gather(rdzv, v).sum().item<double>(); }

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Rank 0 prints "ROW what world v0 v1 ..." lines; the launcher collects them.
void row_line(const shard::Rendezvous& rdzv, const std::string& what, const std::vector<double>& v) {
  if (rdzv.rank() != 0) return;
  std::string s = "ROW " + what + " " + std::to_string(rdzv.world_size());
  char buf[64];
  for (double x : v) {
    std::snprintf(buf, sizeof buf, " %.9g", x);
    s += buf;
  }
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
}

// ---- one rank: GS_BENCH_MODE = save | s3save | load ----
//   save:   ROW save W max_rank_bytes seconds total_bytes         (per sync save)
//           ROW save_keep_all W seconds                           (per sync save, keep_last 0)
//           ROW split W staging_s background_s                    (per async save, waited at once)
//           ROW cpu W bytes copy_s crc_s                          (per repeat)
//           ROW step W seconds                                    (a training step, warm)
//           ROW async W K seconds_without seconds_with staging_s wait_s   (per round)
//   s3save: ROW s3save W 0 seconds 0                              (per sync save; the sizes
//           are the local save's: the same image)
//   load:   ROW load W max_rank_bytes seconds saved_world bytes_read_all bytes_needed_all total_bytes
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
  auto barrier = [&] { rdzv->world()->barrier()->wait(); };

  const auto x = at::randint(0, kVocab, {kTrainBatch, kTrainSeq}, at::kLong);
  const auto y = at::randint(0, kVocab, {kTrainBatch, kTrainSeq}, at::kLong);
  auto train_step = [&] {
    opt.zero_grad();
    model->loss(model->forward(x), y).backward();
    opt.step();
    shard::check_checkpoint(fsdp);
  };

  // Synchronous saves: one untimed (it allocates the staging image, as the
  // first save of a training run does), then `repeat` timed.
  auto sync_saves = [&](const std::string& what, int64_t first_step) {
    std::vector<double> secs;
    shard::CheckpointOptions co;
    co.keep_last = 1;
    shard::save_checkpoint(fsdp, &opt, root, first_step, "", co);
    for (int r = 0; r < a.repeat; ++r) {
      barrier();
      const auto t0 = Clock::now();
      const std::string dir = shard::save_checkpoint(fsdp, &opt, root, first_step + 1 + r, "", co);
      const double s = max_across(*rdzv, seconds_since(t0));
      // (S3: the same image as the local save's file; the parent takes its size from there.)
      double bytes = 0;
      if (root.rfind("s3://", 0) != 0)
        bytes = static_cast<double>(fs::file_size(fs::path(dir) / ("rank_" + std::to_string(info.rank) + ".bin")));
      row_line(*rdzv, what, {max_across(*rdzv, bytes), s, sum_across(*rdzv, bytes)});
      secs.push_back(s);
    }
    return median(secs);
  };

  if (mode == "save" || mode == "s3save") {
    train_step();  // AdamW has its moments (checkpointed with the parameters)
    const double sync_s = sync_saves(mode, 1);
    if (mode == "s3save") {
      barrier();
      return 0;
    }

    // The same saves with nothing to delete (keep_last = 0): what retention
    // (rank 0 deleting the previous checkpoint before the save is done) adds.
    for (int r = 0; r < a.repeat; ++r) {
      shard::CheckpointOptions co;  // keep_last = 0
      barrier();
      const auto t0 = Clock::now();
      shard::save_checkpoint(fsdp, &opt, root, 10 + r, "", co);
      row_line(*rdzv, "save_keep_all", {max_across(*rdzv, seconds_since(t0))});
    }
    {
      shard::CheckpointOptions co;
      co.keep_last = 1;  // (untimed: deletes what the saves above kept)
      shard::save_checkpoint(fsdp, &opt, root, 20, "", co);
    }

    // Where a sync save's time goes: an async save waited for at once
    // (nothing else running) splits it into the staging copy and the
    // background part (write, checksums, agreements, manifest, DONE,
    // retention). And the raw cost of a copy and of the checksums of one
    // rank's image, every rank at once, as the saves do.
    for (int r = 0; r < a.repeat; ++r) {
      shard::CheckpointOptions co;
      co.keep_last = 1;
      co.async = true;
      barrier();
      const auto t0 = Clock::now();
      shard::save_checkpoint(fsdp, &opt, root, 100 + r, "", co);
      const double staged = seconds_since(t0);
      shard::wait_for_checkpoint(fsdp);
      const double total = seconds_since(t0);
      row_line(*rdzv, "split", {max_across(*rdzv, staged), max_across(*rdzv, total - staged)});
    }
    {
      const int64_t n = static_cast<int64_t>(fs::file_size(fs::path(shard::latest_checkpoint(root)) /
                                                           ("rank_" + std::to_string(info.rank) + ".bin")));
      at::Tensor src = at::ones({n}, at::kByte), dst = at::zeros({n}, at::kByte);
      const char* p = static_cast<const char*>(src.data_ptr());
      for (int r = 0; r < a.repeat; ++r) {
        barrier();
        auto t0 = Clock::now();
        dst.copy_(src);
        const double copy_s = max_across(*rdzv, seconds_since(t0));
        barrier();
        t0 = Clock::now();
        uint32_t crc = 0;
        for (int64_t at = 0; at < n; at += 64 << 10)
          crc ^= shard::crc32c(0, p + at, static_cast<size_t>(std::min<int64_t>(64 << 10, n - at)));
        const double crc_s = max_across(*rdzv, seconds_since(t0));
        asm volatile("" : : "r"(crc));  // (the checksums are used)
        row_line(*rdzv, "cpu", {static_cast<double>(n), copy_s, crc_s});
      }
    }

    // Training with an async save in flight vs without.
    std::vector<double> steps;
    for (int i = 0; i < 3; ++i) {
      barrier();
      const auto t0 = Clock::now();
      train_step();
      steps.push_back(max_across(*rdzv, seconds_since(t0)));
    }
    const double step_s = median(steps);
    row_line(*rdzv, "step", {step_s});
    // Every rank computes the same K from the same (gathered) numbers.
    const int K = static_cast<int>(std::clamp(std::ceil(1.5 * sync_s / step_s), 2.0, 200.0));
    const std::string async_root = root + "_async";
    int64_t async_step = 1000;
    auto run_k = [&](bool with_save, double& staging_s, double& wait_s) {
      barrier();
      const auto t0 = Clock::now();
      if (with_save) {
        shard::CheckpointOptions co;
        co.keep_last = 1;
        co.async = true;
        shard::save_checkpoint(fsdp, &opt, async_root, async_step++, "", co);
      }
      const double staged = seconds_since(t0);
      for (int k = 0; k < K; ++k) train_step();
      const auto w0 = Clock::now();
      if (with_save) shard::wait_for_checkpoint(fsdp);
      const double waited = seconds_since(w0);
      const double total = max_across(*rdzv, seconds_since(t0));
      staging_s = max_across(*rdzv, with_save ? staged : 0.0);
      wait_s = max_across(*rdzv, with_save ? waited : 0.0);
      return total;
    };
    // One async save first, untimed: the saver's thread and staging image
    // are warm, as in a training run that saves periodically.
    {
      double s0 = 0, w0 = 0;
      run_k(true, s0, w0);
    }
    const int rounds = std::max(9, 3 * a.repeat);
    for (int r = 0; r < rounds; ++r) {
      double s_without = 0, s_with = 0, staging = 0, waited = 0, unused = 0;
      if (r % 2 == 0) {  // alternate the order: drift cancels
        s_without = run_k(false, unused, unused);
        s_with = run_k(true, staging, waited);
      } else {
        s_with = run_k(true, staging, waited);
        s_without = run_k(false, unused, unused);
      }
      row_line(*rdzv, "async", {static_cast<double>(K), s_without, s_with, staging, waited});
    }
    barrier();
    if (info.rank == 0) fs::remove_all(async_root);
  } else {
    const std::string dir = shard::latest_checkpoint(root);
    barrier();
    const auto t0 = Clock::now();
    auto loaded = shard::load_checkpoint(fsdp, &opt, dir);
    const double s = max_across(*rdzv, seconds_since(t0));
    int64_t mine = 0;
    for (auto& p : fsdp.parameters()) mine += p.numel() * 4 * 3;  // params + two moments
    const double read = sum_across(*rdzv, static_cast<double>(loaded.bytes_read));
    const double needed = sum_across(*rdzv, static_cast<double>(loaded.bytes_needed));
    row_line(*rdzv, "load",
             {max_across(*rdzv, static_cast<double>(mine)), s, static_cast<double>(loaded.saved_world_size), read,
              needed, sum_across(*rdzv, static_cast<double>(mine))});
  }
  rdzv->depart();
  return 0;
}

struct Row {
  std::string what;
  int world = 0;
  std::vector<double> v;
};

std::vector<Row> run_gang(int nproc, const std::string& mode, const std::string& root, char** argv,
                          const std::map<std::string, std::string>& extra_env = {}) {
  shard::LocalLaunchOptions lo;
  lo.nproc = nproc;
  lo.env = {{"OMP_NUM_THREADS", "1"}, {"OPENBLAS_NUM_THREADS", "1"}, {"GS_BENCH_MODE", mode}, {"GS_BENCH_ROOT", root}};
  for (const auto& [k, v] : extra_env) lo.env[k] = v;
  lo.capture_rank0_stdout = true;
  lo.timeout = std::chrono::seconds(1800);
  std::vector<std::string> args{"/proc/self/exe"};
  for (int i = 1; argv[i]; ++i) args.push_back(argv[i]);
  auto res = shard::launch_local(args, lo);
  if (!res.ok)
    throw std::runtime_error(mode + " on " + std::to_string(nproc) + " ranks failed" +
                             (res.timed_out ? " (timed out)" : "") + "; rank 0's output:\n" + res.rank0_stdout);
  std::vector<Row> rows;
  std::istringstream in(res.rank0_stdout);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("ROW ", 0) != 0) continue;
    std::istringstream l(line.substr(4));
    Row r;
    l >> r.what >> r.world;
    for (double x; l >> x;) r.v.push_back(x);
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<Row> rows_of(const std::vector<Row>& rows, const std::string& what) {
  std::vector<Row> out;
  for (const auto& r : rows)
    if (r.what == what) out.push_back(r);
  if (out.empty()) throw std::runtime_error("no '" + what + "' rows in the ranks' output");
  return out;
}

// Sequential write of `bytes` (a multiple of 4 KiB) with fsync: the disk's
// speed. 8 MiB O_DIRECT writes (through the page cache where the file system
// refuses O_DIRECT): the page cache's own cost on this machine varies from
// run to run with the memory state, the disk's does not.
double disk_write_seconds(const std::string& path, size_t bytes) {
  constexpr size_t kBlock = 8 << 20;
  std::unique_ptr<char, decltype(&std::free)> block(static_cast<char*>(std::aligned_alloc(4096, kBlock)), &std::free);
  if (!block) throw std::bad_alloc();
  std::memset(block.get(), 'x', kBlock);
  const auto t0 = Clock::now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
  if (fd < 0) fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kBlock, bytes - done);
    const ssize_t w = ::write(fd, block.get(), n);
    if (w < 0 && errno == EINVAL && (::fcntl(fd, F_GETFL) & O_DIRECT)) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT);
      continue;
    }
    if (w != static_cast<ssize_t>(n)) {
      ::close(fd);
      throw std::runtime_error("write failed: " + path + ": " + std::strerror(errno));
    }
    done += n;
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  const double s = seconds_since(t0);
  fs::remove(path);
  if (!synced) throw std::runtime_error("fsync failed: " + path);
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

// The orchestrating process.
int run_bench(const Args& a, char** argv, const std::string& base) {
  const std::string root = base + "/ckpt";
  const auto gc = model_config(a);
  const double model_mb = greenshard::num_parameters(gc) * 4 / 1e6;
  std::printf("# checkpoint: GPT %.1fM params (%.0f MB fp32; with AdamW moments %.0f MB), %d ranks save, %d load, "
              "%d reshard-load; dir %s\n",
              greenshard::num_parameters(gc) / 1e6, model_mb, 3 * model_mb, a.ranks, a.ranks, a.reshard_ranks,
              base.c_str());
  std::fflush(stdout);

  // The disk probe writes what all ranks write (ranks x one shard), from one
  // process, before and after the saves: this machine's speed drifts while
  // other work runs.
  const size_t probe_bytes = static_cast<size_t>(3 * model_mb * 1e6) / 4096 * 4096;
  std::vector<double> disk_s;
  auto probe = [&] { disk_s.push_back(disk_write_seconds(base + "/disk_probe.bin", probe_bytes)); };
  for (int r = 0; r < a.repeat; ++r) probe();
  const auto saved = run_gang(a.ranks, "save", root, argv);
  for (int r = 0; r < a.repeat; ++r) probe();

  // Sync saves.
  std::vector<double> save_s;
  for (const auto& r : rows_of(saved, "save")) save_s.push_back(r.v.at(1));
  const double rank_bytes = rows_of(saved, "save").at(0).v.at(0), total_bytes = rows_of(saved, "save").at(0).v.at(2);
  // A sync save's parts, and the raw copy and checksum costs.
  std::vector<double> split_stage_s, split_bg_s, copy_s, crc_s, keep_all_s;
  for (const auto& r : rows_of(saved, "save_keep_all")) keep_all_s.push_back(r.v.at(0));
  for (const auto& r : rows_of(saved, "split")) {
    split_stage_s.push_back(r.v.at(0));
    split_bg_s.push_back(r.v.at(1));
  }
  for (const auto& r : rows_of(saved, "cpu")) {
    copy_s.push_back(r.v.at(1));
    crc_s.push_back(r.v.at(2));
  }
  // Async saves while training.
  const double step_s = rows_of(saved, "step").at(0).v.at(0);
  std::vector<double> without_s, with_s, staging_s, wait_s;
  int K = 0;
  for (const auto& r : rows_of(saved, "async")) {
    K = static_cast<int>(r.v.at(0));
    without_s.push_back(r.v.at(1));
    with_s.push_back(r.v.at(2));
    staging_s.push_back(r.v.at(3));
    wait_s.push_back(r.v.at(4));
  }

  // Loads.
  std::vector<double> load_s, reshard_s;
  Row load_row, reshard_row;
  for (int r = 0; r < a.repeat; ++r) {
    drop_from_page_cache(root);
    load_row = rows_of(run_gang(a.ranks, "load", root, argv), "load").at(0);
    load_s.push_back(load_row.v.at(1));
    drop_from_page_cache(root);
    reshard_row = rows_of(run_gang(a.reshard_ranks, "load", root, argv), "load").at(0);
    reshard_s.push_back(reshard_row.v.at(1));
  }

  // Saves to S3 (s3rver on loopback).
  std::vector<double> s3_s;
  std::string s3_note;
  if (!gstest::S3Server::available()) {
    s3_note = "not measured: " + gstest::S3Server::unavailable_reason();
  } else {
    std::unique_ptr<gstest::S3Server> s3;  // stopped, and its data removed, at the end of this block
    try {
      s3 = std::make_unique<gstest::S3Server>("ckpt");
    } catch (const std::exception& e) {
      s3_note = std::string("not measured: ") + e.what();
    }
    if (s3) {
      const auto rows =
          rows_of(run_gang(a.ranks, "s3save", "s3://" + s3->bucket() + "/bench", argv, s3->env()), "s3save");
      for (const auto& r : rows) s3_s.push_back(r.v.at(1));
      s3_note = "s3rver (node) on " + s3->endpoint() + ", storing under " + s3->dir() + " (this machine's disk)";
    }
  }

  // ---- report ----
  const double disk_gbps = probe_bytes / median(disk_s) / 1e9;  // all ranks' bytes, one writer
  const std::string reshard_name = std::to_string(a.ranks) + "->" + std::to_string(a.reshard_ranks);
  std::printf("#\n# %-40s %6s %10s %9s %10s %9s %8s\n", "operation", "ranks", "MB/rank", "time(s)", "GB/s/rank",
              "GB/s all", "vs disk");
  auto row = [&](const std::string& op, int ranks, double bytes_rank, double bytes_all, double s) {
    std::printf("  %-40s %6d %10.1f %9.3f %10.3f %9.3f %8.3f\n", op.c_str(), ranks, bytes_rank / 1e6, s,
                bytes_rank / s / 1e9, bytes_all / s / 1e9, bytes_all / s / 1e9 / disk_gbps);
  };
  row("disk write+fsync (1 process)", a.ranks, static_cast<double>(probe_bytes) / a.ranks,
      static_cast<double>(probe_bytes), median(disk_s));
  row("save (sync, keep_last=1)", a.ranks, rank_bytes, total_bytes, median(save_s));
  row("  same, keep_last=0 (no deletion)", a.ranks, rank_bytes, total_bytes, median(keep_all_s));
  row("  split: staging copy (async save)", a.ranks, rank_bytes, total_bytes, median(split_stage_s));
  row("  split: background (write..retention)", a.ranks, rank_bytes, total_bytes, median(split_bg_s));
  row("  memcpy of the image alone", a.ranks, rank_bytes, total_bytes, median(copy_s));
  row("  CRC-32C of the image alone", a.ranks, rank_bytes, total_bytes, median(crc_s));
  if (!s3_s.empty()) row("save to S3 (s3rver, sync)", a.ranks, rank_bytes, total_bytes, median(s3_s));
  row("load (same world)", a.ranks, load_row.v.at(0), load_row.v.at(5), median(load_s));
  row("load resharded " + reshard_name, a.reshard_ranks, reshard_row.v.at(0), reshard_row.v.at(5),
      median(reshard_s));

  const double sync_s = median(save_s);
  const double t_without = median(without_s), t_with = median(with_s);
  const double stall = t_with - t_without;
  std::printf("#\n# %-40s %6s %6s %9s %12s\n", "training with an async save", "ranks", "steps", "time(s)",
              "vs sync save");
  auto arow = [&](const std::string& op, const std::string& steps, double s) {
    std::printf("  %-40s %6d %6s %9.3f %12.3f\n", op.c_str(), a.ranks, steps.c_str(), s, s / sync_s);
  };
  const std::string ks = std::to_string(K);
  arow("one step (batch " + std::to_string(kTrainBatch) + "x" + std::to_string(kTrainSeq) + ")", "1", step_s);
  arow("K steps, no save", ks, t_without);
  arow("K steps + async save + final wait", ks, t_with);
  arow("  in it: save_checkpoint(async)", "-", median(staging_s));
  arow("  in it: final wait_for_checkpoint", "-", median(wait_s));
  arow("async save stall (with - without)", ks, stall);
  arow("sync save", "-", sync_s);

  const double read_all = reshard_row.v.at(3), needed_all = reshard_row.v.at(4);
  std::printf("#\n# %-40s %6s %14s %15s %12s\n", "load reads (all ranks)", "ranks", "read MB", "needed MB",
              "read/needed");
  auto rrow = [&](const std::string& op, int ranks, const Row& r) {
    std::printf("  %-40s %6d %14.1f %15.1f %12.4f\n", op.c_str(), ranks, r.v.at(3) / 1e6, r.v.at(4) / 1e6,
                r.v.at(3) / r.v.at(4));
  };
  rrow("load (same world)", a.ranks, load_row);
  rrow("load resharded " + reshard_name, a.reshard_ranks, reshard_row);

  // Raw numbers of every round (seconds).
  std::string raw;
  char buf[128];
  std::vector<double> paired;
  for (size_t i = 0; i < with_s.size(); ++i) {
    std::snprintf(buf, sizeof buf, " %.3f/%.3f", without_s[i], with_s[i]);
    raw += buf;
    paired.push_back(with_s[i] - without_s[i]);
  }
  std::printf("#\n# async rounds (K steps without/with a save, s):%s\n", raw.c_str());
  std::printf("# async: without %.3f s, with %.3f s: stall %.3f s raw (%+.3f x the sync save; median of the "
              "rounds' own differences %.3f s); save_checkpoint(async) %.3f s, final wait %.3f s\n",
              t_without, t_with, stall, stall / sync_s, median(paired), median(staging_s), median(wait_s));
  const double save_vs_disk = total_bytes / sync_s / 1e9 / disk_gbps;
  const double async_ratio = std::max(0.0, stall) / sync_s;
  const double reshard_ratio = read_all / needed_all;
  const double s3_ratio = s3_s.empty() ? std::nan("") : sync_s / median(s3_s);
  std::printf("# medians: %d disk probes, %d saves, %d loads; %zu rounds of K=%d training steps with and without "
              "an async save\n",
              2 * a.repeat, a.repeat, a.repeat, with_s.size(), K);
  std::printf("# s3: %s\n", s3_note.c_str());
  std::printf("# goals: save_vs_disk >= 0.8, async_stall_vs_sync <= 0.10, reshard_read_vs_needed <= 1.1; "
              "s3_save_vs_local reported\n");
  std::printf("RESULT checkpoint save_gbps=%.3f load_gbps=%.3f disk_write_gbps=%.3f reshard_%dto%d_s=%.3f "
              "save_vs_disk=%.3f async_stall_vs_sync=%.3f reshard_read_vs_needed=%.4f s3_save_vs_local=%.3f\n",
              rank_bytes / sync_s / 1e9, load_row.v.at(0) / median(load_s) / 1e9, disk_gbps, a.ranks,
              a.reshard_ranks, median(reshard_s), save_vs_disk, async_ratio, reshard_ratio, s3_ratio);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (const char* mode = std::getenv("GS_BENCH_MODE")) {
    try {
      const char* root = std::getenv("GS_BENCH_ROOT");
      return run_rank(a, mode, root ? root : "");
    } catch (const std::exception& e) {
      std::printf("rank error: %s\n", e.what());
      return 1;
    }
  }
  const fs::path parent = a.dir.empty() ? fs::temp_directory_path() : fs::path(a.dir);
  const std::string base = (parent / ("gs_bench_ckpt_" + std::to_string(::getpid()))).string();
  int rc = 0;
  try {
    fs::create_directories(base);
    rc = run_bench(a, argv, base);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "bench_checkpoint: %s\n", e.what());
    rc = 1;
  }
  std::error_code ec;
  fs::remove_all(base, ec);
  return rc;
}
