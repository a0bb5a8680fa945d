#include "io/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace dt::io {

void io_fail(const std::string& path, const std::string& what) {
  int e = errno;
  fail(DT_ERR_IO, path + ": " + what + (e ? std::string(" (") + std::strerror(e) + ")" : std::string()));
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string dir_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

namespace {

// Opens `path` for reading if it is a regular file. O_NONBLOCK makes open return at once
// on a FIFO (which would otherwise wait for a writer); the flag is cleared again so reads
// of the regular file block as usual.
int open_regular(const std::string& path, uint64_t* size) {
  // A name from a file (an index's shard name, "\u0000" in JSON) may hold a NUL, which
  // open() would take for its end and so open another file than the one named.
  if (path.find('\0') != std::string::npos)
    fail(DT_ERR_IO, path.substr(0, path.find('\0')) + "\\0...: a file name with a NUL byte; accepted: names without one");
  errno = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) io_fail(path, "cannot open");
  struct stat st;
  if (::fstat(fd, &st) != 0) { ::close(fd); io_fail(path, "cannot stat"); }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    errno = 0;
    io_fail(path, std::string("is not a regular file (") +
                      (S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket") + ")");
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) { ::close(fd); io_fail(path, "cannot set blocking reads"); }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

}  // namespace

std::vector<char> read_file(const std::string& path, uint64_t max_bytes, const char* what) {
  uint64_t size = 0;
  int fd = open_regular(path, &size);
  if (size > max_bytes) {
    ::close(fd);
    errno = 0;
    io_fail(path, std::to_string(size) + " bytes; the limit for " + what + " is " + std::to_string(max_bytes));
  }
  std::vector<char> buf(static_cast<size_t>(size));
  size_t got = 0;
  while (got < buf.size()) {
    errno = 0;
    ssize_t r = ::read(fd, buf.data() + got, buf.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) { ::close(fd); io_fail(path, "read failed at byte " + std::to_string(got)); }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return buf;
}

ReadOnlyFile::ReadOnlyFile(const std::string& path) : path_(path) {
  uint64_t size = 0;
  fd_ = open_regular(path, &size);  // kept open: reads go through pread on it
  size_ = static_cast<size_t>(size);
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ReadOnlyFile::copy_to(uint64_t offset, void* dst, size_t n) const {
  if (offset > size_ || n > size_ - offset)
    fail(DT_ERR_INTERNAL, path_ + ": read of " + std::to_string(n) + " bytes at " + std::to_string(offset) +
                              " is past its size at open (" + std::to_string(size_) + " bytes)");
  char* p = static_cast<char*>(dst);
  size_t got = 0;
  while (got < n) {
    errno = 0;
    ssize_t r = ::pread(fd_, p + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) io_fail(path_, "read failed at byte " + std::to_string(offset + got));
    if (r == 0) {
      struct stat st;
      std::string now = ::fstat(fd_, &st) == 0 ? std::to_string(st.st_size) : std::string("?");
      errno = 0;
      io_fail(path_, "the file shrank (truncated while in use): it had " + std::to_string(size_) + " bytes at open, " +
                         now + " now; byte " + std::to_string(offset + got) + " is gone");
    }
    got += static_cast<size_t>(r);
  }
}

std::vector<unsigned char> ReadOnlyFile::read(uint64_t offset, size_t n) const {
  std::vector<unsigned char> out(n);
  copy_to(offset, out.data(), n);
  return out;
}

int remove_stale_temps(const std::string& target) {
  const std::string dir = dir_of(target);
  const std::string prefix = target.substr(target.find_last_of('/') + 1) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // "<pid>.<n>", digits only: anything else is not ours to remove.
    std::string rest = name.substr(prefix.size());
    size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos || dot + 1 == rest.size() ||
        rest.find_first_not_of("0123456789.") != std::string::npos || rest.find('.', dot + 1) != std::string::npos)
      continue;
    long pid = std::strtol(rest.substr(0, dot).c_str(), nullptr, 10);
    bool alive = pid > 0 && pid == static_cast<long>(::getpid());  // our own: maybe another thread's save
    if (!alive && pid > 0 && pid <= INT32_MAX) alive = ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
    if (!alive && ::unlink((dir + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

void fsync_dir(const std::string& dir) {
  errno = 0;
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) io_fail(dir, "cannot open directory to fsync");
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) io_fail(dir, "fsync of directory failed");
}

AtomicFile::AtomicFile(const std::string& path) : path_(path) {
  // pid + counter: concurrent writers (ranks of one process, or processes) never share a temp.
  static std::atomic<uint64_t> counter{0};
  tmp_ = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  errno = 0;
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) io_fail(tmp_, "cannot create");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    errno = 0;
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) io_fail(tmp_, "write failed");
    p += w, n -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  errno = 0;
  if (::fsync(fd_) != 0) io_fail(tmp_, "fsync failed");
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) io_fail(tmp_, "close failed");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) io_fail(path_, "rename from " + tmp_ + " failed");
  tmp_.clear();  // renamed: nothing left to remove
  fsync_dir(dir_of(path_));
}

}  // namespace dt::io
