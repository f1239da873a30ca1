// Test and bench helper: feed a named pipe from a thread, so that a program
// reads more input than any file on disk holds (the streaming `prepare`).
#pragma once

#include <cstdint>
#include <string>
#include <thread>

namespace gstest {

// Starts a thread that opens the FIFO `path` for writing (blocking until a
// reader opens it), writes `text` `repeats` times and closes it. It stops
// early, closing the pipe, when the reader goes away (a write fails), or
// when the FIFO cannot be opened. `text` must outlive the thread: join it
// before `text` goes out of scope.
std::thread feed_fifo(const std::string& path, const std::string& text, int64_t repeats);

}  // namespace gstest
