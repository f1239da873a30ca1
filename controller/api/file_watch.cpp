#include "controller/api/file_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace controller {

namespace {
int64_t ns_of(const struct timespec& t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }

// The whole file, or nullopt with `err` set.
std::optional<std::string> read_whole(const std::string& path, std::string& err) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = std::generic_category().message(errno);
    return std::nullopt;
  }
  std::string text;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = std::generic_category().message(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, size_t(n));
  }
  ::close(fd);
  return text;
}
}  // namespace

FileWatch::Sig FileWatch::stat_file(const std::string& path) {
  struct stat st {};
  Sig s;
  if (::stat(path.c_str(), &st) != 0) return s;
  s.exists = true;
  s.dev = uint64_t(st.st_dev);
  s.ino = uint64_t(st.st_ino);
  s.size = int64_t(st.st_size);
  s.mtime_ns = ns_of(st.st_mtim);
  s.ctime_ns = ns_of(st.st_ctim);
  return s;
}

FileWatch::FileWatch(std::vector<std::string> paths, FileWatchOptions options, Callback on_change,
                     std::function<void(const std::string&)> on_error)
    : paths_(std::move(paths)),
      opt_(options),
      on_change_(std::move(on_change)),
      on_error_(std::move(on_error)),
      state_(paths_.size()) {
  if (::pipe2(pipe_, O_NONBLOCK | O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "file watch: pipe");
  try {
    check(false, true);
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    ::close(pipe_[0]);
    ::close(pipe_[1]);
    throw;
  }
}

FileWatch::~FileWatch() {
  stop();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

void FileWatch::request_reload() {
  int saved = errno;
  requested_.store(true);
  char c = 'r';
  [[maybe_unused]] ssize_t n = ::write(pipe_[1], &c, 1);  // full pipe: a wake-up is pending anyway
  errno = saved;
}

void FileWatch::stop() {
  std::lock_guard<std::mutex> lk(stop_mu_);
  stop_.store(true);
  char c = 's';
  [[maybe_unused]] ssize_t n = ::write(pipe_[1], &c, 1);
  if (thread_.joinable()) thread_.join();
}

void FileWatch::run() {
  const int timeout = opt_.poll.count() > 0 ? int(opt_.poll.count()) : -1;
  while (!stop_.load()) {
    pollfd p{pipe_[0], POLLIN, 0};
    if (::poll(&p, 1, timeout) > 0) {
      char buf[64];
      while (::read(pipe_[0], buf, sizeof buf) > 0) {
      }
    }
    if (stop_.load()) break;
    const bool forced = requested_.exchange(false);
    if (!forced && timeout < 0) continue;
    try {
      check(forced, false);
    } catch (const std::exception& e) {  // e.g. bad_alloc: the callback keeps what it had; keep watching
      if (on_error_) on_error_(e.what());
    }
  }
}

void FileWatch::check(bool forced, bool initial) {
  bool changed = false;
  std::vector<WatchedFile> files(paths_.size());
  for (size_t i = 0; i < paths_.size(); ++i) {
    State& s = state_[i];
    WatchedFile& f = files[i];
    f.path = paths_[i];
    const Sig before = stat_file(f.path);
    if (!forced && !initial && before == s.sig && !s.racy) {
      f.text = s.text;
      f.error = s.error;
      continue;
    }
    std::string err;
    std::optional<std::string> text = read_whole(f.path, err);
    const Sig after = stat_file(f.path);
    s.sig = before;
    // An mtime this recent may be followed by another write in the same
    // timestamp tick, with the same size: until it is older, compare the
    // bytes at every poll. A file that changed while it was read is read
    // again at the next poll (its stat no longer matches).
    const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
    s.racy = before != after || (before.exists && now_ns - before.mtime_ns < 2'000'000'000);
    if (text != s.text) changed = true;
    s.text = text;
    s.error = err;
    f.text = std::move(text);
    f.error = std::move(err);
  }
  if (!forced && !initial && !changed) return;  // touched, or re-read unchanged
  on_change_(files, forced, initial);
}

}  // namespace controller
