// Shared by the libFuzzer harnesses: a library error is the expected answer to a hostile
// input, so each harness catches dt::Error (and only that: anything else escaping, a crash,
// a leak, an out-of-bounds read or an allocation over libFuzzer's limit is a finding).
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace dt::fuzz {

// The input as a file: a memfd, so nothing touches the disk and every run gets a fresh
// one; /proc/self/fd/N names it for loaders that take a path (it is a regular file).
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t n) {
    fd_ = ::memfd_create("dtrain-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) return;
    for (size_t at = 0; at < n;) {
      ssize_t w = ::write(fd_, data + at, n - at);
      if (w <= 0) break;
      at += static_cast<size_t>(w);
    }
  }
  ~MemFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_ = -1;
};

template <class F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const Error&) {  // the loader said no, in its own words: fine
  }
}

}  // namespace dt::fuzz
