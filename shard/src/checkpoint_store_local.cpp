// The local-directory checkpoint store (see checkpoint_store.h).
//
// Writing runs at the disk's speed: a writer hands each appended piece to a
// thread of its own, which pwrite()s it while the caller prepares (and
// checksums) the next. Files are opened O_DIRECT: whole 4 KiB-aligned blocks
// go from the caller's buffer to the disk with no page-cache copy and no
// write-back left for fsync. A piece that is not aligned (address, length or
// file offset) goes through the page cache instead (the descriptor drops
// O_DIRECT); so does everything on a file system that refuses O_DIRECT.
#include "checkpoint_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace shard {
namespace {

namespace fs = std::filesystem;

constexpr size_t kBlock = 4096;  // O_DIRECT alignment of address, length and offset

bool aligned(uintptr_t v) { return v % kBlock == 0; }

void fsync_parent(const fs::path& path) {
  int dfd = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

class LocalWriter final : public ObjectWriter {
 public:
  LocalWriter(fs::path path) : path_(std::move(path)), tmp_(path_.string() + ".tmp") {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    if (fd_ >= 0) {
      direct_ = true;
    } else {
      fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    if (fd_ < 0) throw std::runtime_error("checkpoint: cannot create " + tmp_ + ": " + std::strerror(errno));
    thread_ = std::thread([this] { write_loop(); });
  }
  ~LocalWriter() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }

  void append(const void* data, size_t n) override {
    if (n == 0) return;
    std::unique_lock<std::mutex> lock(mu_);
    // At most two pieces queued: the caller runs ahead by one.
    cv_.wait(lock, [&] { return jobs_.size() < 2 || !error_.empty(); });
    if (!error_.empty()) throw std::runtime_error(error_);
    jobs_.push_back({static_cast<const char*>(data), n, size_});
    size_ += static_cast<int64_t>(n);
    cv_.notify_all();
  }

  void flush() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return (jobs_.empty() && !busy_) || !error_.empty(); });
    if (!error_.empty()) throw std::runtime_error(error_);
  }

  int64_t commit() override {
    flush();
    if (::ftruncate(fd_, size_) != 0) fail("truncate");  // (an aligned tail's padding)
    if (::fsync(fd_) != 0) fail("fsync");
    if (::close(fd_) != 0) {
      fd_ = -1;
      fail("close");
    }
    fd_ = -1;
    std::error_code ec;
    fs::rename(tmp_, path_, ec);
    if (ec) throw std::runtime_error("checkpoint: cannot rename " + tmp_ + ": " + ec.message());
    fsync_parent(path_);
    return size_;
  }

 private:
  struct Job {
    const char* data;
    size_t n;
    int64_t offset;
  };

  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(std::string("checkpoint: ") + what + " failed: " + tmp_ + ": " + std::strerror(errno));
  }

  void write_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return !jobs_.empty() || stop_; });
      if (stop_) return;
      Job job = jobs_.front();
      jobs_.pop_front();
      busy_ = true;
      lock.unlock();
      std::string error = write_job(job);
      lock.lock();
      busy_ = false;
      if (!error.empty() && error_.empty()) error_ = std::move(error);
      cv_.notify_all();
    }
  }

  // (writer thread)
  std::string write_job(Job j) {
    if (direct_) {
      const bool whole = aligned(reinterpret_cast<uintptr_t>(j.data)) && aligned(static_cast<uintptr_t>(j.offset));
      const size_t body = whole ? j.n / kBlock * kBlock : 0;
      if (body > 0) {
        std::string e = pwrite_all(j.data, body, j.offset);
        if (!e.empty()) return e;
        j.data += body;
        j.n -= body;
        j.offset += static_cast<int64_t>(body);
      }
      if (j.n > 0 && whole && j.n < kBlock) {
        // An aligned tail: one padded block (cut by commit's ftruncate).
        if (!bounce_) bounce_.reset(static_cast<char*>(std::aligned_alloc(kBlock, kBlock)));
        std::memset(bounce_.get(), 0, kBlock);
        std::memcpy(bounce_.get(), j.data, j.n);
        return pwrite_all(bounce_.get(), kBlock, j.offset);
      }
      if (j.n > 0) drop_direct();
    }
    return pwrite_all(j.data, j.n, j.offset);
  }

  void drop_direct() {
    direct_ = false;
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_DIRECT);
  }

  std::string pwrite_all(const char* p, size_t n, int64_t off) {
    while (n > 0) {
      ssize_t w = ::pwrite(fd_, p, n, off);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EINVAL && direct_) {
        // O_DIRECT accepted at open, not for this file system's I/O.
        drop_direct();
        continue;
      }
      if (w <= 0) return "checkpoint: write failed: " + tmp_ + ": " + std::strerror(w < 0 ? errno : EIO);
      p += w;
      n -= static_cast<size_t>(w);
      off += w;
    }
    return "";
  }

  fs::path path_;
  std::string tmp_;
  int fd_ = -1;
  bool direct_ = false;  // (the writer thread's once started)
  int64_t size_ = 0;     // appended so far
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> bounce_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool busy_ = false, stop_ = false;
  std::string error_;
  std::thread thread_;
};

class LocalStore final : public CheckpointStore {
 public:
  explicit LocalStore(std::string root) : root_(std::move(root)) {}
  const std::string& root() const override { return root_; }

  std::unique_ptr<ObjectWriter> create(const std::string& name) override {
    return std::make_unique<LocalWriter>(fs::path(root_) / name);
  }

  void put(const std::string& name, const std::string& bytes) override {
    auto w = create(name);
    w->append(bytes.data(), bytes.size());
    w->commit();
  }

  std::optional<std::string> get(const std::string& name) override {
    std::ifstream in(fs::path(root_) / name, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::optional<int64_t> size(const std::string& name) override {
    std::error_code ec;
    const auto n = fs::file_size(fs::path(root_) / name, ec);
    if (ec) return std::nullopt;
    return static_cast<int64_t>(n);
  }

  void read(const std::string& name, int64_t offset, size_t n, void* dst) override {
    const std::string p = path(name);
    int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("checkpoint: missing file " + p);
    char* out = static_cast<char*>(dst);
    while (n > 0) {
      ssize_t r = ::pread(fd, out, n, offset);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        ::close(fd);
        throw std::runtime_error("checkpoint: " + p + ": read failed at byte " + std::to_string(offset));
      }
      out += r;
      n -= static_cast<size_t>(r);
      offset += r;
    }
    ::close(fd);
  }

  std::vector<std::string> list_dirs(const std::string& prefix) override {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root_, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(prefix, 0) == 0 && entry.is_directory(ec)) out.push_back(name);
    }
    return out;
  }

  void remove(const std::string& name) override {
    std::error_code ec;
    fs::remove(fs::path(root_) / name, ec);
  }
  void remove_dir(const std::string& dir) override {
    std::error_code ec;
    fs::remove_all(fs::path(root_) / dir, ec);
  }
  void make_dir(const std::string& dir) override {
    std::error_code ec;
    fs::create_directories(fs::path(root_) / dir, ec);
    if (!fs::is_directory(fs::path(root_) / dir)) throw std::runtime_error("checkpoint: cannot create " + path(dir));
  }

 private:
  std::string root_;
};

}  // namespace

std::shared_ptr<CheckpointStore> make_local_store(const std::string& root) {
  return std::make_shared<LocalStore>(root);
}

}  // namespace shard
