// Watching files that configure a running controller (the tokens file, the
// TLS certificate and key), so that a change takes effect without a restart.
//
// A FileWatch stat()s its files every poll interval (device, inode, size,
// mtime, ctime: an editor's or Kubernetes' replace-by-rename is seen) on its
// own thread. When a file's stat changed, or its mtime is too recent to trust
// the stat alone (a second write in the same timestamp tick with the same
// size), it re-reads the bytes; when any file's bytes differ from the last
// read, or on request_reload() (SIGHUP in greenshard-controller), it calls
// the callback with every file's current bytes. The constructor does the
// first read and calls the callback once (initial = true) before the thread
// starts. The callback runs on one thread at a time and decides what a change
// means (parse, validate, swap in, or keep the old and log).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace controller {

struct WatchedFile {
  std::string path;
  std::optional<std::string> text;  // the bytes; nullopt when unreadable (error says why)
  std::string error;
};

struct FileWatchOptions {
  // How often the files are stat()ed; 0 = never (only on request_reload()).
  std::chrono::milliseconds poll{200};
};

class FileWatch {
 public:
  // forced: request_reload() (the files may be unchanged); initial: the
  // constructor's read.
  using Callback = std::function<void(const std::vector<WatchedFile>& files, bool forced, bool initial)>;

  // Reads `paths`, calls `on_change` (initial), then starts watching. Throws
  // what the callback throws on the initial read, and std::system_error when
  // the thread or the wake-up pipe cannot be made. Exceptions from later
  // callbacks are caught on the watch thread and passed to `on_error`.
  FileWatch(std::vector<std::string> paths, FileWatchOptions options, Callback on_change,
            std::function<void(const std::string&)> on_error);
  ~FileWatch();  // stop()
  FileWatch(const FileWatch&) = delete;
  FileWatch& operator=(const FileWatch&) = delete;

  // Re-reads every file now, changed or not, on the watch thread.
  // Async-signal-safe (an atomic flag and a write(2) to a self-pipe).
  void request_reload();
  // Stops and joins the watch thread; safe to call more than once and from
  // several threads.
  void stop();

 private:
  struct Sig {
    bool exists = false;
    uint64_t dev = 0, ino = 0;
    int64_t size = 0, mtime_ns = 0, ctime_ns = 0;
    bool operator==(const Sig&) const = default;
  };
  struct State {
    Sig sig;
    bool racy = false;                 // the last read saw an mtime too recent to trust the stat alone
    std::optional<std::string> text;   // what the last read got (nullopt: unreadable)
    std::string error;
  };
  static Sig stat_file(const std::string& path);
  void run();
  void check(bool forced, bool initial);

  const std::vector<std::string> paths_;
  const FileWatchOptions opt_;
  const Callback on_change_;
  const std::function<void(const std::string&)> on_error_;
  int pipe_[2] = {-1, -1};
  std::atomic<bool> stop_{false}, requested_{false};
  std::mutex stop_mu_;
  std::vector<State> state_;  // watch thread only (and the constructor, before it starts)
  std::thread thread_;
};

}  // namespace controller
