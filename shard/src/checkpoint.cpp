#include "shard/checkpoint.h"

#include "checkpoint_manifest.h"
#include "checkpoint_saver.h"
#include "checkpoint_store.h"
#include "crc32c.h"
#include "runtime.h"
#include "shard/fully_shard.h"

#include <c10/core/GradMode.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <caffe2/serialize/inline_container.h>

#ifdef GREENSHARD_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

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
#include <optional>
#include <sstream>
#include <type_traits>
#include <set>
#include <stdexcept>

namespace shard {

std::function<void(const std::string&)>& checkpoint_fault_hook();  // checkpoint_saver.cpp

struct CheckpointAccess {
  static Runtime& rt(FullyShardedModel& m) { return *m.rt_; }
};

namespace {

namespace fs = std::filesystem;

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

void fsync_dir(const std::string& path) {
  int dfd = ::open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// Write to <path>.tmp, fsync, rename: a crash never leaves a half file under
// the final name (the full-state-dict export; checkpoints go through a store).
void write_durable(const std::string& path, const std::string& bytes) {
  auto store = make_local_store(fs::path(path).parent_path().string());
  store->put(fs::path(path).filename().string(), bytes);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("checkpoint: missing file " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// torch.save's zip format holding a plain {name: tensor} dict. Unlike
// torch::jit::pickle_save, the dict is not wrapped in
// torch.jit._pickle.restore_type_tag (a TorchScript type tag), a global that
// torch.load(weights_only=True) -- the default from PyTorch 2.6 -- refuses.
// The rest is pickle_save's: _rebuild_tensor_v2 with persistent storages
// under data/<key>, data.pkl.
std::string torch_save_bytes(const c10::Dict<std::string, at::Tensor>& dict) {
  std::vector<char> pickle;
  torch::jit::Pickler pickler([&](const char* bytes, size_t n) { pickle.insert(pickle.end(), bytes, bytes + n); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
                              /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(dict));
  pickler.stop();
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) {
    out.append(static_cast<const char*>(bytes), n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return out;
}

// The optimizer's state is keyed by the parameter's TensorImpl: as a string
// of its address in LibTorch 1.x, as the address itself in 2.x.
using OptimizerStateKey = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

template <class Key>
Key state_key_of(c10::TensorImpl* impl) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream os;
    os << impl;
    return os.str();
  } else {
    return impl;
  }
}

OptimizerStateKey state_key(const at::Tensor& p) { return state_key_of<OptimizerStateKey>(p.unsafeGetTensorImpl()); }

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

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::string unit_name(const std::string& n) { return n.empty() ? "<root>" : n; }

std::string param_line(const FlatParamEntry& e, int version = kCheckpointFormatVersion) {
  return manifest_param_line(e.name, e.offset, e.numel, e.shape, version);
}

// "<root>/step_N" (a path or an S3 URL) -> the store of <root>, "step_N".
std::pair<std::shared_ptr<CheckpointStore>, std::string> open_step(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const auto slash = dir.rfind('/');
  const bool s3 = dir.rfind("s3://", 0) == 0;
  if (slash == std::string::npos || (s3 && slash < 5))
    return {open_checkpoint_store(s3 ? dir : "."), s3 ? "" : dir};
  return {open_checkpoint_store(slash == 0 ? "/" : dir.substr(0, slash)), dir.substr(slash + 1)};
}

// Everybody or nobody: one rank's error fails every rank (collective).
void agree_or_throw(Runtime& rt, const std::string& error, const std::string& others_failed) {
  at::Tensor bad = at::full({1}, error.empty() ? 0.0 : 1.0, at::kDouble);
  rt.rendezvous()->world()->all_reduce(bad, ReduceOp::kSum, {rt.options().timeout, "checkpoint agreement"})->wait();
  if (!error.empty()) throw std::runtime_error(error);
  if (bad.item<double>() > 0) throw std::runtime_error(others_failed);
}

// This rank's saver (created by the first save, on every rank at once: its
// communicator is collective).
CheckpointSaver& saver(Runtime& rt) {
  auto& s = rt.checkpoint_saver();
  if (!s) {
    std::vector<int> all(rt.rendezvous()->world_size());
    for (size_t k = 0; k < all.size(); ++k) all[k] = static_cast<int>(k);
    s = std::make_shared<CheckpointSaver>(rt.rendezvous()->new_group("checkpoint", all));
  }
  return *s;
}

// This rank's shards (per unit: master, exp_avg, exp_avg_sq, fp32) into the
// staging image after the magic. On a GPU the copies run now, on a side
// stream into page-locked memory, ordered after the compute stream's work.
// Host tensors: copied now when `now` (an asynchronous save: training goes
// on and changes them), else returned for the saver to copy piece by piece
// while it writes (a synchronous save: the caller waits).
std::vector<StagingCopy> stage(Runtime& rt, torch::optim::AdamW* opt, char* image,
                               const std::vector<int64_t>& offsets, bool now) {
  std::memcpy(image, kShardMagic, sizeof kShardMagic);
  const bool cuda = !rt.units().empty() && rt.units()[0]->master().is_cuda();
#ifdef GREENSHARD_CUDA
  std::optional<c10::cuda::CUDAStreamGuard> on_side;
  std::optional<c10::cuda::CUDAStream> side;
  if (cuda) {
    const auto dev = rt.units()[0]->master().device().index();
    side = c10::cuda::getStreamFromPool(false, dev);
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(dev));
    ready.block(*side);
    on_side.emplace(*side);
  }
#endif
  c10::NoGradGuard no_grad;
  std::vector<StagingCopy> later;
  for (size_t i = 0; i < rt.units().size(); ++i) {
    const at::Tensor master = rt.units()[i]->master().detach();
    auto* st = adam_state(opt, rt.units()[i]->master());
    const at::Tensor parts[kCheckpointParts] = {master, st ? st->exp_avg() : at::Tensor(),
                                                st ? st->exp_avg_sq() : at::Tensor()};
    for (int p = 0; p < kCheckpointParts; ++p) {
      const auto offset = static_cast<size_t>(offsets[i * kCheckpointParts + p]);
      const int64_t n = master.numel();
      const at::Tensor& t = parts[p];
      const bool plain = !t.defined() || (t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous());
      if (!now && plain) {
        later.push_back({t.defined() ? t.data_ptr() : nullptr, offset, static_cast<size_t>(n) * sizeof(float)});
      } else if (!t.defined()) {
        std::memset(image + offset, 0, n * sizeof(float));
      } else {
        at::from_blob(image + offset, {n}, at::kFloat).copy_(t.reshape({-1}), /*non_blocking=*/cuda);
      }
    }
  }
#ifdef GREENSHARD_CUDA
  if (side) side->synchronize();
#endif
  return later;
}

}  // namespace

std::string save_checkpoint(FullyShardedModel& model, torch::optim::Optimizer* opt_base, const std::string& root,
                            int64_t step, const std::string& extra, const CheckpointOptions& options) {
  if (step < 0) throw std::invalid_argument("save_checkpoint: step must be >= 0");
  if (options.keep_last < 0) throw std::invalid_argument("save_checkpoint: keep_last must be >= 0");
  if (options.timeout.count() <= 0) throw std::invalid_argument("save_checkpoint: timeout must be > 0");
  auto* opt = as_adamw(opt_base);
  Runtime& rt = CheckpointAccess::rt(model);
  rt.finish_all();
  CheckpointSaver& s = saver(rt);
  s.wait();  // at most one in flight; a failed one is raised here

  SaveRequest r;
  r.store = open_checkpoint_store(root);
  r.dir = step_name(step);
  r.keep_last = options.keep_last;
  r.timeout = options.timeout;
  Manifest& m = r.manifest;
  m.world_size = rt.rendezvous()->world_size();
  m.group_size = rt.shard_group()->size();
  m.strategy = to_string(rt.options().strategy);
  m.step = step;
  m.extra = extra;
  std::vector<int64_t> offsets;  // of unit i's part p in the file
  int64_t bytes = sizeof kShardMagic;
  for (auto& u : rt.units()) {
    const auto& l = u->layout();
    if (u->master().numel() != l.shard_numel())
      throw std::logic_error("save_checkpoint: unit '" + unit_name(u->name()) + "' master is not one shard");
    ManifestUnit mu{unit_name(u->name()), l.numel(), l.padded_numel(), l.shard_numel(), {}};
    for (const auto& e : l.entries()) mu.params.push_back(param_line(e));  // (masters: fp32)
    m.units.push_back(std::move(mu));
    if (auto* st = adam_state(opt, u->master())) {
      m.adam = true;
      m.adam_step = st->step();
    }
    for (int p = 0; p < kCheckpointParts; ++p) {
      offsets.push_back(bytes);
      bytes += l.shard_numel() * static_cast<int64_t>(sizeof(float));
    }
  }
  r.bytes = static_cast<size_t>(bytes);
  const bool pinned = !rt.units().empty() && rt.units()[0]->master().is_cuda();
  r.copies = stage(rt, opt, s.staging(r.bytes, pinned), offsets, /*now=*/options.async);
  const std::string dir = r.store->path(r.dir);
  s.start(std::move(r));
  if (!options.async) s.wait();
  return dir;
}

void wait_for_checkpoint(FullyShardedModel& model) {
  Runtime& rt = CheckpointAccess::rt(model);
  if (rt.checkpoint_saver()) rt.checkpoint_saver()->finish();
}

void check_checkpoint(FullyShardedModel& model) {
  Runtime& rt = CheckpointAccess::rt(model);
  if (rt.checkpoint_saver()) rt.checkpoint_saver()->poll();
}

void set_checkpoint_fault_hook(std::function<void(const std::string& point)> hook) {
  checkpoint_fault_hook() = std::move(hook);
}

std::string latest_checkpoint(const std::string& root) {
  auto store = open_checkpoint_store(root);
  auto dirs = store->list_dirs("step_");
  std::sort(dirs.rbegin(), dirs.rend());
  for (const auto& d : dirs)
    if (store->size(d + "/DONE")) return store->path(d);
  return "";
}

namespace {

// The manifest of step directory `step` in `store` (`dir` names it in
// errors), trusted only behind a DONE marker holding its checksum.
Manifest read_done_manifest(CheckpointStore& store, const std::string& step, const std::string& dir) {
  const std::string done_path = store.path(step + "/DONE");
  const std::string manifest_path = store.path(step + "/manifest.txt");
  const auto done = store.get(step + "/DONE");
  if (!done)
    throw std::runtime_error("checkpoint: " + dir + " has no DONE marker (incomplete checkpoint, not trusted)");
  const auto manifest_text = store.get(step + "/manifest.txt");
  if (!manifest_text) throw std::runtime_error("checkpoint: missing file " + manifest_path);
  if (*done != "manifest " + hex64(crc32c(0, manifest_text->data(), manifest_text->size())) + "\n")
    throw std::runtime_error("checkpoint: " + manifest_path + " does not match the checksum in " + done_path);
  return parse_manifest(*manifest_text, manifest_path);
}

}  // namespace

std::string read_checkpoint_extra(const std::string& dir) {
  auto [store, step] = open_step(dir);
  return read_done_manifest(*store, step, dir).extra;
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
  LoadedCheckpoint out;
  std::string error;
  try {
    auto [store, step] = open_step(dir);
    const std::string manifest_path = store->path(step + "/manifest.txt");
    man = read_done_manifest(*store, step, dir);
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
    // Old file k, opened once: size and magic checked, its chunk index (v4)
    // read and verified.
    std::set<int> opened;
    auto file = [&](int k) -> std::string {
      const std::string name = step + "/rank_" + std::to_string(k) + ".bin";
      if (opened.count(k)) return name;
      const std::string path = store->path(name);
      const auto size = store->size(name);
      if (!size) throw std::runtime_error("checkpoint: missing file " + path);
      if (*size != man.files[k].size)
        throw std::runtime_error("checkpoint: " + path + " has " + std::to_string(*size) + " bytes, manifest says " +
                                 std::to_string(man.files[k].size) + " (truncated or wrong file)");
      char magic[sizeof kShardMagic];
      store->read(name, 0, sizeof magic, magic);
      out.bytes_read += sizeof magic;
      if (std::memcmp(magic, kShardMagic, sizeof kShardMagic) != 0)
        throw std::runtime_error("checkpoint: " + path + ": not a GreenShard shard file");
      if (man.version >= 4) {
        const std::string index_name = step + "/rank_" + std::to_string(k) + ".crc";
        const auto index = store->get(index_name);
        if (!index) throw std::runtime_error("checkpoint: missing file " + store->path(index_name));
        out.bytes_read += static_cast<int64_t>(index->size());
        read_chunk_index(man, k, *index, store->path(index_name));
      }
      opened.insert(k);
      return name;
    };
    // Bytes [off, off + n) of old file k into dst: the checked ranges that
    // cover them are read whole and verified.
    std::vector<char> span_buf;
    auto read_verified = [&](int k, int64_t off, int64_t n, char* dst, const std::string& unit) {
      const std::string name = file(k);
      const FileChecks& fc = man.files[k];
      const auto& st = fc.starts;
      auto first = std::upper_bound(st.begin(), st.end(), off) - st.begin() - 1;
      auto last = std::lower_bound(st.begin(), st.end(), off + n) - st.begin() - 1;
      if (first < 0) throw std::logic_error("checkpoint: read before the first checked range");
      auto end_of = [&](int64_t i) { return i + 1 < static_cast<int64_t>(st.size()) ? st[i + 1] : fc.size; };
      const int64_t lo = st[first], hi = end_of(last);
      char* buf = dst;
      if (lo != off || hi != off + n) {
        span_buf.resize(static_cast<size_t>(hi - lo));
        buf = span_buf.data();
      }
      store->read(name, lo, static_cast<size_t>(hi - lo), buf);
      out.bytes_read += hi - lo;
      for (int64_t i = first; i <= last; ++i)
        if (crc32c(0, buf + (st[i] - lo), static_cast<size_t>(end_of(i) - st[i])) != fc.crcs[i])
          throw std::runtime_error("checkpoint: " + store->path(name) + ": checksum mismatch (corrupted) in unit '" +
                                   unit + "'");
      if (buf != dst) std::memcpy(dst, buf + (off - lo), static_cast<size_t>(n));
    };
    // Which bytes of which old files this rank's new shards need; old shards
    // of shard group 0 (ranks 0..G-1) cover everything.
    const int G = man.group_size;
    const int g = rt.shard_group()->rank();
    for (size_t i = 0; i < man.units.size(); ++i) {
      const auto& mu = man.units[i];
      const int64_t S = mu.shard, S2 = rt.units()[i]->layout().shard_numel();
      const int64_t a = g * S2, b = std::min<int64_t>(a + S2, mu.numel);  // new range, unpadded part
      Loaded l{at::zeros({S2}, at::kFloat), at::zeros({S2}, at::kFloat), at::zeros({S2}, at::kFloat)};
      for (int64_t k = S > 0 ? a / S : G; k < G && k * S < b; ++k) {
        const int64_t lo = std::max(a, k * S), hi = std::min(b, (k + 1) * S);
        if (lo >= hi) continue;
        for (int part = 0; part < kCheckpointParts; ++part) {
          at::Tensor& dst = part == 0 ? l.master : part == 1 ? l.m : l.v;
          const int64_t n = (hi - lo) * static_cast<int64_t>(sizeof(float));
          read_verified(static_cast<int>(k), man.part_offset(i, part) + (lo - k * S) * static_cast<int64_t>(sizeof(float)),
                        n, static_cast<char*>(dst.data_ptr()) + (lo - a) * sizeof(float), mu.name);
          out.bytes_needed += n;
        }
      }
      loaded.push_back(std::move(l));
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree_or_throw(rt, error, "checkpoint: " + dir + ": another rank failed to read its part (see its error)");

  c10::NoGradGuard no_grad;
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
        write_durable(path, torch_save_bytes(dict));
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
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < shards.size(); ++i) rt.units()[i]->master().detach().copy_(shards[i]);
}

}  // namespace shard
