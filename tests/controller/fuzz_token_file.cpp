// libFuzzer target for the worker's token-file reader (worker/data.cpp
// TokenFile: header, version, width, vocabulary, tokenizer block, count and
// every token checked against the vocabulary). TokenFile reads a path, so
// the input is written to a memfd and opened as /proc/self/fd/<n>. Errors
// must be std::runtime_error; an accepted file must answer at() within
// its vocabulary.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "worker/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = ::memfd_create("greenshard-fuzz-tokens", 0);
  if (fd < 0) std::abort();
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::write(fd, data + done, size - done);
    if (w <= 0) std::abort();
    done += static_cast<size_t>(w);
  }
  try {
    greenshard::TokenFile f("/proc/self/fd/" + std::to_string(fd));
    for (int64_t i = 0; i < f.size(); ++i)
      if (f.at(i) >= static_cast<uint64_t>(f.vocab())) std::abort();
  } catch (const std::runtime_error&) {
  }
  ::close(fd);
  return 0;
}
