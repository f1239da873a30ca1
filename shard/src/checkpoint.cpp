#include "shard/checkpoint.h"

#include "crc32c.h"
#include "runtime.h"
#include "shard/fully_shard.h"

#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace shard {

struct CheckpointAccess {
  static Runtime& rt(FullyShardedModel& m) { return *m.rt_; }
};

namespace {

namespace fs = std::filesystem;
constexpr char kMagic[8] = {'G', 'S', 'C', 'K', 'P', 'T', '0', '1'};
// v2: CRC-32C per file and per segment (one unit's master, exp_avg or
// exp_avg_sq shard), so a reader verifies exactly the bytes it reads.
// v3: every parameter line names the stored dtype. v2 is still read (its
// shards are fp32 like v3's).
constexpr int kFormatVersion = 3;
constexpr int kOldestReadableVersion = 2;
constexpr int kParts = 3;  // master, exp_avg, exp_avg_sq

// An fd closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

void write_fully(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w <= 0) throw std::runtime_error("checkpoint: write failed: " + path + ": " + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void read_fully_at(int fd, void* data, size_t n, int64_t offset, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, offset);
    if (r <= 0) throw std::runtime_error("checkpoint: " + path + ": read failed at byte " + std::to_string(offset));
    p += r;
    n -= static_cast<size_t>(r);
    offset += r;
  }
}

void fsync_dir(const std::string& path) {
  int dfd = ::open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string to_hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out.empty() ? "-" : out;
}

std::string from_hex(const std::string& h, const std::string& where) {
  if (h == "-") return "";
  if (h.size() % 2) throw std::runtime_error(where + ": bad extra field");
  std::string out;
  for (size_t i = 0; i < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

// Write to <path>.tmp, fsync, rename: a crash never leaves a half file under
// the final name.
void write_durable(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("checkpoint: cannot create " + tmp);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error("checkpoint: write failed: " + tmp);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw std::runtime_error("checkpoint: fsync failed: " + tmp);
  fs::rename(tmp, path);
  fsync_dir(path);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("checkpoint: missing file " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string state_key(const at::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

torch::optim::AdamW* as_adamw(torch::optim::Optimizer* opt) {
  if (!opt) return nullptr;
  auto* a = dynamic_cast<torch::optim::AdamW*>(opt);
  if (!a) throw std::invalid_argument("checkpoint: only torch::optim::AdamW optimizer state is supported");
  return a;
}

torch::optim::AdamWParamState* adam_state(torch::optim::AdamW* opt, const at::Tensor& p) {
  if (!opt) return nullptr;
  auto it = opt->state().find(state_key(p));
  if (it == opt->state().end()) return nullptr;
  return static_cast<torch::optim::AdamWParamState*>(it->second.get());
}

std::string step_dir(const std::string& root, int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return (fs::path(root) / buf).string();
}

struct ManifestUnit {
  std::string name;
  int64_t numel = 0, padded = 0, shard = 0;
  std::vector<std::string> params;  // param_line() text of the manifest's version
};

struct Manifest {
  int version = 0;
  int world_size = 0, group_size = 0;
  std::string strategy;
  int64_t step = 0;
  std::string extra;
  bool adam = false;
  int64_t adam_step = 0;
  std::vector<ManifestUnit> units;
  std::vector<std::pair<int64_t, uint64_t>> files;  // size, checksum per rank
  std::vector<std::vector<uint32_t>> segments;      // per rank: CRC of unit u part p at [u * 3 + p]
};

// The dtype of what the shard files hold for a parameter: the fp32 master.
constexpr const char* kStoredDtype = "float32";

// "name offset numel dtype ndim d0 d1 ..." (v3; v2 has no dtype).
std::string param_line(const FlatParamEntry& e, int version = kFormatVersion) {
  std::ostringstream os;
  os << e.name << " " << e.offset << " " << e.numel;
  if (version >= 3) os << " " << kStoredDtype;
  os << " " << e.shape.size();
  for (auto d : e.shape) os << " " << d;
  return os.str();
}

std::string unit_name(const std::string& n) { return n.empty() ? "<root>" : n; }

Manifest parse_manifest(const std::string& path) {
  std::istringstream in(read_all(path));
  Manifest m;
  std::string line, key;
  int lineno = 0;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("checkpoint: " + path + " line " + std::to_string(lineno) + ": " + why);
  };
  auto next = [&](const std::string& want) -> std::istringstream {
    if (!std::getline(in, line)) fail("unexpected end, expected '" + want + "'");
    ++lineno;
    std::istringstream ls(line);
    ls >> key;
    if (key != want) fail("expected '" + want + "', got '" + key + "'");
    return ls;
  };
  try {
    int& version = m.version;
    next("greenshard-checkpoint") >> version;
    if (version < kOldestReadableVersion || version > kFormatVersion)
      fail("unsupported format version " + std::to_string(version) + " (this build reads versions " +
           std::to_string(kOldestReadableVersion) + " to " + std::to_string(kFormatVersion) + ")");
    next("world_size") >> m.world_size;
    next("shard_group_size") >> m.group_size;
    next("strategy") >> m.strategy;
    next("step") >> m.step;
    std::string hex;
    next("extra") >> hex;
    m.extra = from_hex(hex, path);
    next("adam_state") >> m.adam >> m.adam_step;
    size_t units = 0;
    next("units") >> units;
    if (m.world_size < 1 || m.group_size < 1 || m.world_size % m.group_size || units > 100000)
      fail("inconsistent sizes");
    for (size_t u = 0; u < units; ++u) {
      ManifestUnit mu;
      size_t nparams = 0;
      auto ls = next("unit");
      ls >> mu.name >> mu.numel >> mu.padded >> mu.shard >> nparams;
      if (!ls || mu.padded != mu.shard * m.group_size || mu.numel > mu.padded) fail("bad unit line");
      for (size_t p = 0; p < nparams; ++p) {
        auto ps = next("param");
        if (version >= 3) {
          std::string pname, dtype;
          int64_t offset = 0, numel = 0;
          ps >> pname >> offset >> numel >> dtype;
          if (!ps) fail("bad param line");
          if (dtype != kStoredDtype)
            fail("parameter '" + pname + "' has dtype '" + dtype + "'; shard files hold " + kStoredDtype);
        }
        mu.params.push_back(line.substr(6));
      }
      m.units.push_back(std::move(mu));
    }
    size_t files = 0;
    next("files") >> files;
    if (files != static_cast<size_t>(m.world_size)) fail("expected one file per rank");
    for (size_t f = 0; f < files; ++f) {
      std::string name, sum;
      int64_t size = 0;
      next("file") >> name >> size >> sum;
      if (name != "rank_" + std::to_string(f) + ".bin") fail("unexpected file name " + name);
      m.files.emplace_back(size, std::stoull(sum, nullptr, 16));
      auto ls = next("segments");
      std::vector<uint32_t> segs;
      for (size_t k = 0; k < kParts * m.units.size(); ++k) {
        std::string h;
        if (!(ls >> h)) fail("expected " + std::to_string(kParts * m.units.size()) + " segment checksums");
        segs.push_back(static_cast<uint32_t>(std::stoul(h, nullptr, 16)));
      }
      m.segments.push_back(std::move(segs));
    }
  } catch (const std::invalid_argument&) {
    fail("unparsable value");
  }
  return m;
}

std::function<void(const std::string&)>& fault_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

void fault_point(const char* point) {
  if (fault_hook()) fault_hook()(point);
}

// Everybody or nobody: one rank's error fails every rank (collective).
void agree_or_throw(Runtime& rt, const std::string& error, const std::string& others_failed) {
  at::Tensor bad = at::full({1}, error.empty() ? 0.0 : 1.0, at::kDouble);
  rt.rendezvous()->world()->all_reduce(bad, ReduceOp::kSum, {rt.options().timeout, "checkpoint agreement"})->wait();
  if (!error.empty()) throw std::runtime_error(error);
  if (bad.item<double>() > 0) throw std::runtime_error(others_failed);
}

}  // namespace

std::string save_checkpoint(FullyShardedModel& model, torch::optim::Optimizer* opt_base, const std::string& root,
                            int64_t step, const std::string& extra, const CheckpointOptions& options) {
  if (step < 0) throw std::invalid_argument("save_checkpoint: step must be >= 0");
  if (options.keep_last < 0) throw std::invalid_argument("save_checkpoint: keep_last must be >= 0");
  auto* opt = as_adamw(opt_base);
  Runtime& rt = CheckpointAccess::rt(model);
  rt.finish_all();
  auto world = rt.rendezvous()->world();
  const int rank = rt.rendezvous()->rank(), W = rt.rendezvous()->world_size();
  const std::string dir = step_dir(root, step);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) throw std::runtime_error("save_checkpoint: cannot create " + dir);
  if (rank == 0) fs::remove(fs::path(dir) / "DONE", ec);  // rewriting a step: untrusted until done
  world->barrier({rt.options().timeout, "checkpoint mkdir"})->wait();

  // 1. This rank's shard: magic, then per unit master, exp_avg, exp_avg_sq
  //    (fp32), streamed from the tensors to <file>.tmp; fsync; rename.
  const size_t U = rt.units().size();
  std::vector<int64_t> sums(2 + kParts * U);  // size, file CRC, segment CRCs
  bool have_adam = false;
  int64_t adam_step = 0;
  const std::string path = (fs::path(dir) / ("rank_" + std::to_string(rank) + ".bin")).string();
  {
    const std::string tmp = path + ".tmp";
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
    if (fd.fd < 0) throw std::runtime_error("checkpoint: cannot create " + tmp + ": " + std::strerror(errno));
    uint32_t file_crc = crc32c(0, kMagic, sizeof kMagic);
    write_fully(fd.fd, kMagic, sizeof kMagic, tmp);
    int64_t size = sizeof kMagic;
    for (size_t i = 0; i < U; ++i) {
      // (host copies when the shards live on a GPU; no copy on CPU)
      at::Tensor master = rt.units()[i]->master().detach().to(at::kCPU).contiguous();
      auto* st = adam_state(opt, rt.units()[i]->master());
      at::Tensor zeros;
      if (st) {
        have_adam = true;
        adam_step = st->step();
      } else {
        zeros = at::zeros_like(master);
      }
      const at::Tensor parts[kParts] = {master, st ? st->exp_avg().to(at::kCPU).contiguous() : zeros,
                                        st ? st->exp_avg_sq().to(at::kCPU).contiguous() : zeros};
      for (int p = 0; p < kParts; ++p) {
        const size_t n = parts[p].numel() * sizeof(float);
        sums[2 + i * kParts + p] = crc32c(0, parts[p].data_ptr(), n);
        file_crc = crc32c(file_crc, parts[p].data_ptr(), n);
        write_fully(fd.fd, parts[p].data_ptr(), n, tmp);
        size += static_cast<int64_t>(n);
      }
      if (i == 0) fault_point("shard_partially_written");
    }
    if (::fsync(fd.fd) != 0) throw std::runtime_error("checkpoint: fsync failed: " + tmp);
    sums[0] = size;
    sums[1] = file_crc;
    fs::rename(tmp, path);
    fsync_dir(path);
  }
  fault_point("shard_renamed");

  // 2. Everybody's size and checksums, for the manifest.
  const int64_t per = static_cast<int64_t>(sums.size());
  at::Tensor mine = at::tensor(sums, at::kLong);
  at::Tensor all = at::empty({per * W}, at::kLong);
  world->all_gather_into(all, mine, {rt.options().timeout, "checkpoint checksums"})->wait();
  world->barrier({rt.options().timeout, "checkpoint shards written"})->wait();

  // 3. Rank 0: manifest, then DONE.
  if (rank == 0) {
    std::ostringstream m;
    m << "greenshard-checkpoint " << kFormatVersion << "\n"
      << "world_size " << W << "\n"
      << "shard_group_size " << rt.shard_group()->size() << "\n"
      << "strategy " << to_string(rt.options().strategy) << "\n"
      << "step " << step << "\n"
      << "extra " << to_hex(extra) << "\n"
      << "adam_state " << (have_adam ? 1 : 0) << " " << adam_step << "\n"
      << "units " << rt.units().size() << "\n";
    for (auto& u : rt.units()) {
      const auto& l = u->layout();
      m << "unit " << unit_name(u->name()) << " " << l.numel() << " " << l.padded_numel() << " " << l.shard_numel()
        << " " << l.entries().size() << "\n";
      for (const auto& e : l.entries()) m << "param " << param_line(e) << "\n";  // (masters: fp32)
    }
    m << "files " << W << "\n";
    auto a = all.accessor<int64_t, 1>();
    for (int r = 0; r < W; ++r) {
      m << "file rank_" << r << ".bin " << a[per * r] << " " << hex64(static_cast<uint64_t>(a[per * r + 1])) << "\n";
      m << "segments";
      for (int64_t k = 2; k < per; ++k) m << " " << hex64(static_cast<uint64_t>(a[per * r + k]));
      m << "\n";
    }
    const std::string manifest = m.str();
    write_durable((fs::path(dir) / "manifest.txt").string(), manifest);
    fault_point("manifest_written");
    write_durable((fs::path(dir) / "DONE").string(),
                  "manifest " + hex64(crc32c(0, manifest.data(), manifest.size())) + "\n");
    if (options.keep_last > 0) {
      // The newest K DONE checkpoints stay. A step directory without DONE
      // that sorts before the newest DONE one is a save that crashed (it
      // is never trusted): removed. A newer one may be a save in progress
      // (or to be retried): kept.
      std::vector<std::string> done, partial;
      for (const auto& entry : fs::directory_iterator(root, ec)) {
        if (entry.path().filename().string().rfind("step_", 0) != 0 || !entry.is_directory(ec)) continue;
        (fs::exists(entry.path() / "DONE") ? done : partial).push_back(entry.path().string());
      }
      std::sort(done.begin(), done.end());
      if (!done.empty())
        for (const auto& p : partial)
          if (fs::path(p).filename().string() < fs::path(done.back()).filename().string()) fs::remove_all(p, ec);
      for (size_t i = 0; i + options.keep_last < done.size(); ++i) fs::remove_all(done[i], ec);
    }
  }
  world->barrier({rt.options().timeout, "checkpoint done"})->wait();
  return dir;
}

void set_checkpoint_fault_hook(std::function<void(const std::string& point)> hook) { fault_hook() = std::move(hook); }

std::string latest_checkpoint(const std::string& root) {
  std::error_code ec;
  std::string best;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) != 0 || !fs::exists(entry.path() / "DONE")) continue;
    if (best.empty() || name > fs::path(best).filename().string()) best = entry.path().string();
  }
  return best;
}

LoadedCheckpoint load_checkpoint(FullyShardedModel& model, torch::optim::Optimizer* opt_base, const std::string& dir) {
  auto* opt = as_adamw(opt_base);
  Runtime& rt = CheckpointAccess::rt(model);
  rt.finish_all();
  struct Loaded {
    at::Tensor master, m, v;
  };
  std::vector<Loaded> loaded;
  Manifest man;
  std::string error;
  try {
    const std::string done_path = (fs::path(dir) / "DONE").string();
    if (!fs::exists(done_path))
      throw std::runtime_error("checkpoint: " + dir + " has no DONE marker (incomplete checkpoint, not trusted)");
    const std::string manifest_path = (fs::path(dir) / "manifest.txt").string();
    const std::string manifest_text = read_all(manifest_path);
    if (read_all(done_path) != "manifest " + hex64(crc32c(0, manifest_text.data(), manifest_text.size())) + "\n")
      throw std::runtime_error("checkpoint: " + manifest_path + " does not match the checksum in " + done_path);
    man = parse_manifest(manifest_path);
    // Same model?
    auto other = [&](const std::string& why) {
      throw std::runtime_error("checkpoint: " + manifest_path + " was written for another model: " + why);
    };
    if (man.units.size() != rt.units().size())
      other(std::to_string(man.units.size()) + " units, this model has " + std::to_string(rt.units().size()));
    for (size_t i = 0; i < man.units.size(); ++i) {
      const auto& u = rt.units()[i];
      const auto& mu = man.units[i];
      if (mu.name != unit_name(u->name())) other("unit " + std::to_string(i) + " is '" + mu.name + "', here '" + unit_name(u->name()) + "'");
      const auto& entries = u->layout().entries();
      if (mu.params.size() != entries.size() || mu.numel != u->layout().numel())
        other("unit '" + mu.name + "' has a different parameter set");
      for (size_t p = 0; p < entries.size(); ++p) {
        const std::string here = param_line(entries[p], man.version);
        if (mu.params[p] != here) other("parameter '" + mu.params[p] + "' vs '" + here + "'");
      }
    }
    // Which bytes of which old files this rank's new shards need; old shards
    // of shard group 0 (ranks 0..G-1) cover everything. Each overlapping old
    // segment is read once (pread) and verified against its CRC.
    std::map<int, std::unique_ptr<Fd>> files;  // opened, size and magic checked
    auto file = [&](int k) -> int {
      auto it = files.find(k);
      if (it != files.end()) return it->second->fd;
      const std::string path = (fs::path(dir) / ("rank_" + std::to_string(k) + ".bin")).string();
      auto fd = std::make_unique<Fd>(::open(path.c_str(), O_RDONLY));
      if (fd->fd < 0) throw std::runtime_error("checkpoint: missing file " + path);
      const auto size = static_cast<int64_t>(fs::file_size(path));
      if (size != man.files[k].first)
        throw std::runtime_error("checkpoint: " + path + " has " + std::to_string(size) + " bytes, manifest says " +
                                 std::to_string(man.files[k].first) + " (truncated or wrong file)");
      char magic[sizeof kMagic];
      read_fully_at(fd->fd, magic, sizeof magic, 0, path);
      if (std::memcmp(magic, kMagic, sizeof kMagic) != 0)
        throw std::runtime_error("checkpoint: " + path + ": not a GreenShard shard file");
      return files.emplace(k, std::move(fd)).first->second->fd;
    };
    const int G = man.group_size;
    const int g = rt.shard_group()->rank();
    std::vector<int64_t> unit_base(man.units.size());
    int64_t off = sizeof kMagic;
    for (size_t i = 0; i < man.units.size(); ++i) {
      unit_base[i] = off;
      off += kParts * man.units[i].shard * static_cast<int64_t>(sizeof(float));
    }
    for (size_t i = 0; i < man.units.size(); ++i) {
      const auto& mu = man.units[i];
      const int64_t S = mu.shard, S2 = rt.units()[i]->layout().shard_numel();
      const int64_t a = g * S2, b = std::min<int64_t>(a + S2, mu.numel);  // new range, unpadded part
      Loaded l{at::zeros({S2}, at::kFloat), at::zeros({S2}, at::kFloat), at::zeros({S2}, at::kFloat)};
      for (int64_t k = a / S; k < G && k * S < b; ++k) {
        const int64_t lo = std::max(a, k * S), hi = std::min(b, (k + 1) * S);
        if (lo >= hi) continue;
        const int fd = file(static_cast<int>(k));
        const std::string path = (fs::path(dir) / ("rank_" + std::to_string(k) + ".bin")).string();
        for (int part = 0; part < kParts; ++part) {
          at::Tensor& dst = part == 0 ? l.master : part == 1 ? l.m : l.v;
          // The whole old segment (to verify it); straight into place when
          // it is exactly the new shard.
          const bool in_place = S == S2 && lo == a && k * S == a;
          at::Tensor seg = in_place ? dst : at::empty({S}, at::kFloat);
          read_fully_at(fd, seg.data_ptr(), S * sizeof(float),
                        unit_base[i] + part * S * static_cast<int64_t>(sizeof(float)), path);
          if (crc32c(0, seg.data_ptr(), S * sizeof(float)) != man.segments[k][i * kParts + part])
            throw std::runtime_error("checkpoint: " + path + ": checksum mismatch (corrupted) in unit '" + mu.name +
                                     "'");
          if (!in_place) dst.narrow(0, lo - a, hi - lo).copy_(seg.narrow(0, lo - k * S, hi - lo));
        }
      }
      loaded.push_back(std::move(l));
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree_or_throw(rt, error, "checkpoint: " + dir + ": another rank failed to read its part (see its error)");

  at::NoGradGuard no_grad;
  for (size_t i = 0; i < loaded.size(); ++i) {
    at::Tensor master = rt.units()[i]->master();
    master.detach().copy_(loaded[i].master);
    if (opt && man.adam) {
      auto st = std::make_unique<torch::optim::AdamWParamState>();
      st->step(man.adam_step);
      st->exp_avg(loaded[i].m.to(master.device()));
      st->exp_avg_sq(loaded[i].v.to(master.device()));
      opt->state()[state_key(master)] = std::move(st);
    }
  }
  LoadedCheckpoint out;
  out.step = man.step;
  out.extra = man.extra;
  out.saved_world_size = man.world_size;
  return out;
}

void export_full_state_dict(FullyShardedModel& model, const std::string& path, ExportFormat format) {
  Runtime& rt = CheckpointAccess::rt(model);
  const bool writer = rt.rendezvous()->rank() == 0;
  torch::serialize::OutputArchive archive;
  c10::Dict<std::string, at::Tensor> dict;  // insertion-ordered, like a state_dict
  rt.for_each_full_unit([&](Unit& u, const std::vector<at::Tensor>& values) {
    if (!writer) return;
    for (size_t i = 0; i < values.size(); ++i) {
      const std::string& name = u.layout().entries()[i].name;
      if (format == ExportFormat::kTorchSave)
        dict.insert(name, values[i].to(at::kCPU));
      else
        archive.write(name, values[i].to(at::kCPU));  // (host tensors in the file)
    }
  });
  std::string error;
  if (writer) {
    try {
      if (format == ExportFormat::kTorchSave) {
        const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(dict));
        write_durable(path, std::string(bytes.begin(), bytes.end()));
      } else {
        const std::string tmp = path + ".tmp";
        archive.save_to(tmp);
        {
          Fd fd(::open(tmp.c_str(), O_RDONLY));
          if (fd.fd < 0 || ::fsync(fd.fd) != 0) throw std::runtime_error("fsync failed: " + tmp);
        }
        fs::rename(tmp, path);
        fsync_dir(path);
      }
    } catch (const c10::Error& e) {
      error = std::string("export_full_state_dict: cannot write ") + path + ": " + e.what_without_backtrace();
    } catch (const std::exception& e) {
      error = std::string("export_full_state_dict: cannot write ") + path + ": " + e.what();
    }
  }
  agree_or_throw(rt, error, "export_full_state_dict: rank 0 failed to write " + path);
}

namespace {

// Tensors by name from either export format. A LibTorch archive is tried
// first; a torch.save / pickle_save file must hold a dict of str -> Tensor
// (an OrderedDict state_dict is such a dict).
std::function<bool(const std::string&, at::Tensor&)> open_full_state_dict(const std::string& path) {
  auto archive = std::make_shared<torch::serialize::InputArchive>();
  std::string archive_error;
  try {
    archive->load_from(path);
    return [archive](const std::string& name, at::Tensor& t) { return archive->try_read(name, t); };
  } catch (const c10::Error& e) {
    archive_error = e.what_without_backtrace();
  }
  std::string bytes = read_all(path);
  c10::IValue v;
  try {
    v = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const c10::Error& e) {
    throw std::runtime_error("import_full_state_dict: " + path +
                             " is neither a LibTorch archive nor a torch.save file: " + archive_error.substr(0, 200));
  }
  if (!v.isGenericDict())
    throw std::runtime_error("import_full_state_dict: " + path + " holds a " + v.tagKind() +
                             ", not a dict of name -> tensor");
  auto table = std::make_shared<std::map<std::string, at::Tensor>>();
  for (const auto& kv : v.toGenericDict()) {
    if (!kv.key().isString() || !kv.value().isTensor())
      throw std::runtime_error("import_full_state_dict: " + path + " holds a dict entry that is not name -> tensor");
    (*table)[kv.key().toStringRef()] = kv.value().toTensor();
  }
  return [table](const std::string& name, at::Tensor& t) {
    auto it = table->find(name);
    if (it == table->end()) return false;
    t = it->second;
    return true;
  };
}

}  // namespace

void import_full_state_dict(FullyShardedModel& model, const std::string& path) {
  Runtime& rt = CheckpointAccess::rt(model);
  rt.finish_all();
  std::vector<at::Tensor> shards;
  std::string error;
  try {
    if (!fs::exists(path)) throw std::runtime_error("import_full_state_dict: missing file " + path);
    auto read = open_full_state_dict(path);
    for (auto& u : rt.units()) {
      const auto& l = u->layout();
      at::Tensor flat = at::zeros({l.padded_numel()}, at::kFloat);
      for (const auto& e : l.entries()) {
        at::Tensor t;
        if (!read(e.name, t))
          throw std::runtime_error("import_full_state_dict: " + path + " has no parameter '" + e.name + "'");
        if (t.sizes().vec() != e.shape)
          throw std::runtime_error("import_full_state_dict: " + path + ": parameter '" + e.name + "' has shape " +
                                   c10::str(t.sizes()) + ", the model has " + c10::str(at::IntArrayRef(e.shape)));
        flat.narrow(0, e.offset, e.numel).copy_(t.reshape({-1}).to(at::kFloat));
      }
      const int64_t S = l.shard_numel();
      shards.push_back(u->always_unsharded() ? flat : flat.narrow(0, rt.shard_group()->rank() * S, S).clone());
    }
  } catch (const c10::Error& e) {
    error = "import_full_state_dict: cannot read " + path + ": " + e.what_without_backtrace();
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree_or_throw(rt, error, "import_full_state_dict: another rank failed to read " + path);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < shards.size(); ++i) rt.units()[i]->master().detach().copy_(shards[i]);
}

}  // namespace shard
